"""The experiment specs of the pinned TAO: each network's schema, an action's template and its keys.

The data is ``schemas/tao_specs/`` (a file per network), generated from nvidia-tao-core's config dataclasses with the table
``schemas/tao_networks.json`` by ``python3 -m devtools.tao_schema`` (a unit test regenerates both and fails on
any difference). A template is rendered from the schema (each key's default, its description as a comment,
``???`` for a value TAO requires), so the data holds each fact once. :mod:`taobank.tao_spec_check` checks a spec.
"""
from __future__ import annotations

import functools
import gzip
import json
from dataclasses import dataclass
from typing import Any, Iterator

from . import BANK_ROOT, tao_command
from .errors import TaoError

#: The generated data, relative to the bank's root: ``<network>.json.gz`` each, ``_common.json.gz`` shared.
SPECS_DIR = "schemas/tao_specs"
#: What a spec says for a value TAO requires and has no default for (OmegaConf's MISSING).
MISSING = "???"


@functools.lru_cache(maxsize=None)
def _file(name: str) -> dict[str, Any]:
    """One generated file (each read once): ``_common`` or a network's."""
    where = f"{SPECS_DIR}/{name}.json.gz"
    try:
        found = json.loads(gzip.decompress((BANK_ROOT / where).read_bytes()))
    except (OSError, ValueError, EOFError) as exc:
        raise TaoError(f"{where} cannot be read ({exc.__class__.__name__}): restore it from git, or regenerate "
                       "it with python3 -m devtools.tao_schema") from None
    if not isinstance(found, dict):
        raise TaoError(f"{where} is not the bank's spec data: regenerate it with python3 -m devtools.tao_schema")
    return found


def _defs() -> dict[str, Any]:
    defs = _file("_common").get("$defs")
    return defs if isinstance(defs, dict) else {}


def tao_version() -> str:
    return str(_file("_common").get("tao_version"))


def actions(network: str) -> list[str]:
    """The actions of ``network`` (from the table: ``spec list`` reads nothing else)."""
    row = tao_command.table()["networks"].get(network) or {}
    return list(row.get("actions") or [])


def listing() -> dict[str, list[str]]:
    """network -> its actions, for every network the pinned TAO has."""
    return {n: actions(n) for n in tao_command.networks()}


def _close(word: str, known: list[str]) -> str:
    import difflib  # only for a name the pinned TAO lacks
    near = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f"did you mean {near[0]}? " if near else ""


def check_known(network: str, action: str) -> None:
    """Refuse, in one line listing the known ones, a network or action the pinned TAO does not have."""
    if not tao_command.known(network):
        known = tao_command.networks()
        raise TaoError(f"TAO {tao_command.tao_version()} has no network {str(network)[:60]!r}: "
                       f"{_close(network, known)}known: {', '.join(known)}")
    have = actions(network)
    if action not in have:
        raise TaoError(f"{network} has no action {str(action)[:60]!r} in TAO {tao_command.tao_version()}: "
                       f"{_close(action, have)}known: {', '.join(have)}")


@dataclass(frozen=True)
class Spec:
    """One network action's spec: its schema (the root), the template's top-level sections, the TAO version."""

    network: str
    action: str
    schema: dict
    sections: tuple[str, ...]

    @property
    def reads(self) -> tuple[str, ...]:
        """The top-level keys whose required values the action needs: every key that is not another action's
        section (TAO's entrypoint reads its own section and the shared ones)."""
        others = set(actions(self.network)) - {self.action}
        return tuple(k for k in self.schema.get("properties", {}) if k not in others)


def spec(network: str, action: str) -> Spec:
    """The spec of ``network action`` (refused in one line when the pinned TAO has no such pair)."""
    check_known(network, action)
    row = _file(network)
    info = (row.get("actions") or {}).get(action) or {}
    schema = (row.get("schemas") or {}).get(info.get("schema")) if info.get("schema") else row.get("schema")
    if not isinstance(schema, dict):
        raise TaoError(f"{SPECS_DIR}/{network}.json.gz has no schema of {action}: regenerate it with "
                       "python3 -m devtools.tao_schema")
    return Spec(network, action, schema, tuple(info.get("sections") or schema.get("properties", {})))


def deref(node: Any) -> dict:
    """``node`` with a ``$ref`` to a shared sub-schema followed."""
    while isinstance(node, dict) and "$ref" in node:
        node = _defs().get(str(node["$ref"]).rpartition("/")[2], {})
    return node if isinstance(node, dict) else {}


def types(node: dict) -> list[str]:
    kind = node.get("type")
    return [kind] if isinstance(kind, str) else list(kind or [])


def is_section(node: dict) -> bool:
    """A dataclass of TAO's config (named keys only), not a free mapping."""
    return "object" in types(node) and "properties" in node


def default(node: dict) -> Any:
    """The default of a (dereferenced) schema node: a section's is the mapping of its keys' defaults unless
    TAO leaves the whole section unset (null)."""
    if is_section(node) and node.get("default", {}) is not None:
        return {k: default(deref(v)) for k, v in node["properties"].items()}
    return node.get("default")


def walk(node: dict, path: str = "") -> Iterator[tuple[str, dict]]:
    """Every key under ``node`` as (dotted path, its dereferenced schema), sections before their keys."""
    for key, sub in (node.get("properties") or {}).items():
        child = deref(sub)
        here = f"{path}.{key}" if path else key
        yield here, child
        if is_section(child):
            yield from walk(child, here)


# ------------------------------------------------------------------ template
def _scalar_text(value: Any) -> str:
    import yaml

    if value == MISSING:
        return MISSING
    return str(yaml.safe_dump(value, default_flow_style=True, width=float("inf"), allow_unicode=True)).strip() \
        .removesuffix("\n...").removesuffix("...").strip()


def _comment(node: dict, indent: str) -> list[str]:
    text = str(node.get("description") or "").strip()
    limits = rule_text(node)
    if node.get("default") == MISSING:
        text = f"REQUIRED: {text}" if text else "REQUIRED"
    if limits:
        text = f"{text} [{limits}]" if text else f"[{limits}]"
    return [f"{indent}# {text}"] if text else []


def rule_text(node: dict) -> str:
    """The range and options of a key, as a template comment and ``spec keys`` show them."""
    target = deref(node.get("items")) if "array" in types(node) and isinstance(node.get("items"), dict) else node
    parts = []
    if "minimum" in target or "maximum" in target:
        parts.append(f"{target.get('minimum', '-inf')}..{target.get('maximum', 'inf')}")
    if "enum" in target:
        parts.append("one of " + ", ".join(map(str, target["enum"])))
    return "; ".join(parts)


def template(network: str, action: str) -> str:
    """The default spec of ``network action`` as YAML: each key with TAO's default, its description (and range
    or options) as a comment above it, ``???`` (marked REQUIRED) for a value TAO needs and has none for."""
    s = spec(network, action)
    lines = [f"# {network} {action} spec: TAO {tao_version()}'s defaults (tao_jobs.py spec template {network} {action})",
             f"# Check it before submitting: tao_jobs.py spec check FILE --network {network} --action {action}"]
    props = s.schema.get("properties", {})
    for key in s.sections:
        if key in props:
            _render(key, deref(props[key]), "", lines, expand=key == action)
    return "\n".join(lines) + "\n"


def _render(key: str, node: dict, indent: str, lines: list[str], *, expand: bool = False) -> None:
    lines.extend(_comment(node, indent))
    if is_section(node) and (node.get("default", {}) is not None or expand):
        lines.append(f"{indent}{key}:")
        for sub, child in node["properties"].items():
            _render(sub, deref(child), indent + "  ", lines)
        if not node["properties"]:
            lines[-1] += " {}"
        return
    lines.append(f"{indent}{key}: {_scalar_text(default(node))}")


# ------------------------------------------------------------------ keys
def type_text(node: dict) -> str:
    """A key's type in words (``integer``, ``list of number``, ``section``), ``or null`` when TAO allows null."""
    kinds = [k for k in types(node) if k != "null"]
    if is_section(node):
        word = "section"
    elif kinds == ["array"]:
        item = deref(node.get("items"))
        word = "list of " + ("/".join(k for k in types(item) if k != "null") or "any")
    elif kinds == ["object"]:
        word = "mapping"
    else:
        word = "/".join(kinds) or "any"
    return word + (" or null" if "null" in types(node) else "")


def keys(network: str, action: str, pattern: str | None = None) -> list[dict[str, Any]]:
    """The keys of ``network action``'s spec whose dotted path holds ``pattern`` (case-insensitive; every key
    without one): path, type, default, range or options, description."""
    s = spec(network, action)
    want = (pattern or "").lower()
    rows = []
    for path, node in walk(s.schema):
        if want and want not in path.lower():
            continue
        rows.append({"key": path, "type": type_text(node),
                     "default": None if is_section(node) else default(node),
                     "rule": rule_text(node), "description": str(node.get("description") or "")})
    return rows


def schema_document(network: str, action: str) -> dict:
    """The action's JSON Schema on its own: the network's schema with the shared sub-schemas it uses, and what
    the bank adds (``x-tao``: version, network, action, the template's sections)."""
    s = spec(network, action)
    used: dict[str, dict] = {}

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = ref.rpartition("/")[2]
                if name not in used:
                    used[name] = _defs().get(name, {})
                    collect(used[name])
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(s.schema)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"{network} {action} experiment spec (TAO {tao_version()})", **s.schema,
            "$defs": dict(sorted(used.items())),
            "x-tao": {"version": tao_version(), "network": network, "action": action,
                      "template_sections": list(s.sections)}}
