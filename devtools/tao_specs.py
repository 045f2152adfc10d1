"""The experiment-spec schema of every network of the pinned TAO, read from NVIDIA's own packages.

Written by ``python3 -m devtools.tao_schema`` beside ``schemas/tao_networks.json`` (one generator, one check),
into ``schemas/tao_specs/`` (``<network>.json.gz`` each, ``_common.json.gz`` the shared ``$defs``): for each
network a JSON Schema (draft 2020-12) of its experiment config,
built from two of nvidia-tao-core's views of the same dataclasses:

- the *types* as TAO's Hydra runner enforces them: OmegaConf's structured config of ``ExperimentConfig``
  (its node types, which values may be null, which keys exist: a key not there is refused);
- the *facts for people*: TAO's own converter (``nvidia_tao_core.api_utils.dataclass2json_converter``, the one
  ``nvidia_tao_core.scripts.generate_schema`` runs) gives each key's description, ``valid_min``/``valid_max``
  (``minimum``/``maximum``) and ``valid_options`` (``enum``).

Each key's default is the schema's ``default`` (``???``: a value TAO requires and has none for), so the
template of an action is rendered from the schema (:mod:`taobank.tao_spec_schema`), never stored twice. Sub-schemas met
more than once (the same section in many networks) are stored once under ``$defs``. An ``enum`` marked
``x-enum-type`` is a Python Enum's names (TAO's Hydra runner refuses another value); any other ``enum``,
``minimum`` and ``maximum`` are TAO's ``valid_options``/``valid_min``/``valid_max``, which the runner does not
enforce and the bank's check does. A key TAO marks ``automl_enabled`` (the keys TAO's own AutoML searches by
default) carries ``x-automl``: TAO's metadata of it as given (:func:`automl_facts`), and only those keys do.
"""
from __future__ import annotations

import dataclasses
import enum
import gzip
import hashlib
import importlib
import json
import logging
import math
import typing
from pathlib import Path
from typing import Any

#: Where the data lives, relative to the bank's root (taobank.tao_spec_schema reads it): a file per network (a
#: check reads one) and the shared part (the TAO version, the sub-schemas several networks use).
SPECS_DIR = "schemas/tao_specs"
COMMON = "_common"
#: A sub-schema is shared under $defs when it is met this many times and is at least this big (JSON chars).
_SHARE_MIN_COUNT, _SHARE_MIN_CHARS = 2, 200
#: Action sections TAO's own per-action schema always keeps (nvidia_tao_core.scripts.generate_schema).
_ALWAYS_KEPT = ("train", "distill", "quantize")


def experiment_class(network: str, action: str) -> type | None:
    """The experiment dataclass TAO builds ``network action``'s config from, chosen as nvidia-tao-core's own
    ``generate_schema`` chooses it (bevfusion's and stylegan_xl's dataset_convert have their own)."""
    from devtools.tao_schema import _experiment_config

    if network == "bevfusion" and action == "dataset_convert":
        return importlib.import_module("nvidia_tao_core.config.bevfusion.default_config").BEVFusionDataConvertExpConfig
    if network == "stylegan_xl" and action == "dataset_convert":
        return importlib.import_module("nvidia_tao_core.config.stylegan_xl.dataset").DataConvertExpConfig
    return _experiment_config(importlib.import_module(f"nvidia_tao_core.config.{network}.default_config"))


def network_actions(network: str, top_level: list[str]) -> list[str]:
    """The actions TAO's API lists for ``network`` (its ``network_configs/<network>.config.json``), else the
    experiment config's top-level sections that are actions of some network."""
    from nvidia_tao_core.microservices import enum_constants

    listed = enum_constants._get_valid_config_json_param_for_network(network, "actions")
    if not listed:
        listed = {k for k in top_level if k in enum_constants._get_valid_actions()}
    return sorted(a for a in listed if a.replace("_", "").isalnum() and a.islower())


def template_sections(top_level: list[str], actions: list[str], action: str) -> list[str]:
    """The top-level keys of ``action``'s template: TAO's own rule (``generate_schema.filter_schema``): every
    key that is not an action, the action's own, and train, distill, quantize."""
    return [k for k in top_level if k not in actions or k in (*_ALWAYS_KEPT, action)]


# ------------------------------------------------------------------ types, as OmegaConf enforces them
def _nullable(schema: dict, optional: bool) -> dict:
    if not optional or schema == {}:
        return schema
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list) and "null" not in kind:
        return {**schema, "type": [*kind, "null"]}
    if "enum" in schema:
        return {**schema, "enum": [*schema["enum"], None]}
    return schema


def _scalar(kind: Any) -> dict | None:
    if kind is Any or kind is None or kind is object:
        return {}
    if kind is bool:
        return {"type": "boolean"}
    if kind is int:
        return {"type": "integer"}
    if kind is float:
        return {"type": "number"}
    if kind in (str, Path, bytes):
        return {"type": "string"}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return {"type": "string", "enum": list(kind.__members__), "x-enum-type": True}
    return None


def type_schema(kind: Any) -> dict:
    """The schema of a type annotation (OmegaConf's subset: primitives, Enum, Optional, List/Tuple, Dict,
    dataclasses); defaults of a dataclass come from the class."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union:
        rest = [a for a in args if a is not type(None)]
        return _nullable(type_schema(rest[0]) if len(rest) == 1 else {}, True)
    scalar = _scalar(kind)
    if scalar is not None:
        return scalar
    if origin in (list, tuple, typing.List, typing.Tuple) or kind in (list, tuple):
        item = args[0] if args and args[0] is not Ellipsis else Any
        return {"type": "array", "items": type_schema(item)}
    if origin in (dict, typing.Dict) or kind is dict:
        return {"type": "object", "additionalProperties": type_schema(args[1] if len(args) == 2 else Any)}
    if dataclasses.is_dataclass(kind):
        from omegaconf import OmegaConf

        return node_schema(OmegaConf.structured(kind))
    return {}


def node_schema(node: Any) -> dict:
    """The schema of an OmegaConf node of a structured config, its default included."""
    from omegaconf import DictConfig, ListConfig, OmegaConf
    from omegaconf import nodes as n

    md = node._metadata
    if isinstance(node, DictConfig):
        if node._is_none() or node._is_missing():
            out = type_schema(md.ref_type)
            out = _nullable(out, md.optional)
            out["default"] = None if node._is_none() else "???"
            return out
        if dataclasses.is_dataclass(md.object_type):
            props = {str(k): node_schema(node._get_node(k)) for k in node}
            return _nullable({"type": "object", "properties": props, "additionalProperties": False}, md.optional)
        return _nullable({"type": "object", "additionalProperties": type_schema(md.element_type),
                          "default": _plain(OmegaConf.to_container(node, resolve=False))}, md.optional)
    if isinstance(node, ListConfig):
        out = {"type": "array", "items": type_schema(md.element_type)}
        out["default"] = None if node._is_none() else "???" if node._is_missing() else \
            _plain(OmegaConf.to_container(node, resolve=False))
        return _nullable(out, md.optional)
    if isinstance(node, n.EnumNode):
        out = {"type": "string", "enum": list(node.enum_type.__members__), "x-enum-type": True}
    elif isinstance(node, n.BooleanNode):
        out = {"type": "boolean"}
    elif isinstance(node, n.IntegerNode):
        out = {"type": "integer"}
    elif isinstance(node, n.FloatNode):
        out = {"type": "number"}
    elif isinstance(node, (n.StringNode, n.PathNode, n.BytesNode)):
        out = {"type": "string"}
    else:
        out = {}
    out = _nullable(out, md.optional)
    out["default"] = "???" if node._is_missing() else _plain(node._value())
    return out


def _plain(value: Any) -> Any:
    """A default as JSON: enums by name, paths as text, non-finite floats as TAO's own spelling (``inf``)."""
    while hasattr(value, "_value") and callable(value._value):  # a node held by a Union-typed key
        value = value._value()
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# ------------------------------------------------------------------ TAO's converter: descriptions, ranges
def converter_schema(exp: type) -> dict:
    """TAO's own JSON Schema of ``exp`` (its converter; logging of the wheel kept quiet)."""
    from nvidia_tao_core.api_utils import dataclass2json_converter as conv

    logging.getLogger("nvidia_tao_core").setLevel(logging.ERROR)
    return conv.create_json_schema(conv.dataclass_to_json(exp()))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _holds(schema: dict, value: Any) -> bool:
    """Whether the default ``value`` is within the constraint keys of ``schema`` (TAO's own defaults must pass
    their own check: a constraint a default breaks is not TAO's rule)."""
    values = value if isinstance(value, list) else [value]
    for v in values:
        if v is None or v == "???" or (isinstance(v, str) and v.startswith("${")):
            continue
        if "enum" in schema and v not in schema["enum"]:
            return False
        if _finite(v) and ("minimum" in schema and v < schema["minimum"] or "maximum" in schema and v > schema["maximum"]):
            return False
    return True


def annotate(schema: dict, facts: dict, dropped: list[str], path: str = "") -> None:
    """Fold TAO's converter ``facts`` (the same tree) into ``schema``: description, title, and the ranges and
    options a value is checked against (scalars, and each item of a list of scalars)."""
    if facts.get("description"):
        schema["description"] = " ".join(str(facts["description"]).split())
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    target = schema
    if "array" in kinds and isinstance(schema.get("items"), dict) and "type" in schema["items"]:
        target = schema["items"]
        kinds = target["type"] if isinstance(target["type"], list) else [target["type"]]
    numeric = "integer" in kinds or "number" in kinds
    rule: dict = {}
    for key in ("minimum", "maximum"):
        if numeric and _finite(facts.get(key)):
            rule[key] = facts[key]
    options = facts.get("enum")
    if isinstance(options, list) and options and "enum" not in target and \
            all(isinstance(o, (str, int, float)) and not isinstance(o, bool) for o in options) and \
            ("string" in kinds or numeric):
        rule["enum"] = list(dict.fromkeys(options))
    if rule:
        if _holds(rule, schema.get("default")):
            target.update(rule)
        else:
            dropped.append(path)
    if facts.get("automl_enabled") is True:
        schema["x-automl"] = automl_facts(facts)
    props, fprops = schema.get("properties"), facts.get("properties")
    if isinstance(props, dict) and isinstance(fprops, dict):
        for key, sub in props.items():
            if isinstance(fprops.get(key), dict):
                annotate(sub, fprops[key], dropped, f"{path}.{key}" if path else key)


def _bound(value: Any) -> Any:
    """A bound of TAO's metadata as JSON: a number, or ``"inf"``/``"-inf"`` for an open side."""
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def automl_facts(facts: dict) -> dict:
    """What TAO's metadata says of a key it marks ``automl_enabled`` (``x-automl``; ``{}``: marked, nothing more):
    ``valid_min``/``valid_max`` as given (an open side ``"inf"``), ``valid_options``, ``math_cond`` (``"> 0.0"``,
    ``"/ 8"``, ``"> depends_on"``), ``depends_on`` (the key it is tied to) and ``parent_param`` (other keys are
    tied to it): what TAO's own AutoML picks a value from, and what the bank's default search space is read
    from (:mod:`taobank.campaign.search.automl`)."""
    out: dict[str, Any] = {}
    for ours, theirs in (("valid_min", "minimum"), ("valid_max", "maximum")):
        value = facts.get(theirs)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[ours] = _bound(value)
    options = facts.get("enum")
    if isinstance(options, list) and options:
        out["valid_options"] = list(options)
    for key in ("math_cond", "depends_on"):
        if isinstance(facts.get(key), str) and facts[key].strip():
            out[key] = " ".join(facts[key].split())
    if str(facts.get("parent_param") or "").upper() == "TRUE" or facts.get("parent_param") is True:
        out["parent_param"] = True
    return out


# ------------------------------------------------------------------ the file
def experiment_schema(exp: type, dropped: list[str]) -> dict:
    from omegaconf import OmegaConf

    schema = node_schema(OmegaConf.structured(exp))
    annotate(schema, converter_schema(exp), dropped)
    return schema


def _share(networks: dict) -> dict:
    """Sub-schemas met more than once stored once under ``$defs`` (named by a digest of their text); the
    networks' schemas refer to them with ``$ref``. Deterministic: the same wheels give the same file."""
    counts: dict[str, int] = {}

    def key(node: dict) -> str:
        return json.dumps(node, sort_keys=True)

    def count(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node:
                text = key(node)
                if len(text) >= _SHARE_MIN_CHARS:
                    counts[text] = counts.get(text, 0) + 1
            for value in node.values():
                count(value)

    for row in networks.values():
        count(row["schema"])
    defs: dict[str, dict] = {}

    def replace(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        if "properties" in node and counts.get(key(node), 0) >= _SHARE_MIN_COUNT:
            name = hashlib.sha256(key(node).encode()).hexdigest()[:10]
            if name not in defs:
                defs[name] = {}  # reserved first: a sub-schema never holds itself
                defs[name] = {k: replace(v) if k != "properties" else {p: replace(s) for p, s in v.items()}
                              for k, v in node.items()}
            return {"$ref": f"#/$defs/{name}"}
        return {k: ({p: replace(s) for p, s in v.items()} if k in ("properties",) else replace(v))
                for k, v in node.items()}

    for row in networks.values():
        row["schema"] = {k: ({p: replace(s) for p, s in v.items()} if k == "properties" else replace(v))
                         for k, v in row["schema"].items()}
    return dict(sorted(defs.items()))


def build(tao_version: str, names: list[str]) -> tuple[dict, dict[str, list[str]]]:
    """(the whole file's data, network -> its actions) for the networks ``names`` of the pinned TAO."""
    networks: dict[str, dict] = {}
    actions_of: dict[str, list[str]] = {}
    for network in names:
        base = experiment_class(network, "train")
        if base is None:
            continue
        dropped: list[str] = []
        schema = experiment_schema(base, dropped)
        top = list(schema["properties"])
        actions = network_actions(network, top)
        row: dict[str, Any] = {"schema": schema, "actions": {}}
        for action in actions:
            exp = experiment_class(network, action)
            if exp is not base and exp is not None:  # an action with its own experiment config
                own = experiment_schema(exp, dropped)
                row.setdefault("schemas", {})[action] = own
                row["actions"][action] = {"sections": list(own["properties"]), "schema": action}
            else:
                row["actions"][action] = {"sections": template_sections(top, actions, action)}
        if dropped:
            row["tao_defaults_outside_own_range"] = sorted(set(dropped))
        networks[network] = row
        actions_of[network] = actions
    flat = {}
    for network, row in networks.items():  # each schema (the network's, an action's own) shares sub-schemas
        flat[network] = {"schema": row["schema"]}
        for action, own in (row.get("schemas") or {}).items():
            flat[f"{network}:{action}"] = {"schema": own}
    defs = _share(flat)
    for network, row in networks.items():
        row["schema"] = flat[network]["schema"]
        for action in row.get("schemas") or {}:
            row["schemas"][action] = flat[f"{network}:{action}"]["schema"]
    data = {"tao_version": tao_version,
            "generated_by": f"python3 -m devtools.tao_schema (nvidia-tao-core {tao_version}: OmegaConf's structured "
                            "config of each ExperimentConfig for types, TAO's dataclass2json_converter for "
                            "descriptions, valid_min/valid_max and valid_options, and automl_enabled keys' x-automl)",
            "$defs": defs, "networks": networks}
    return data, actions_of


def facts(data: dict, network: str, gpu_keys: tuple[str, ...], resume_keys: tuple[str, ...]) -> dict:
    """The table's row of ``network`` (``schemas/tao_networks.json``) read off its schema here: whether the top
    level takes ``results_dir``, and per section the GPU/node keys and the resume keys it has."""
    defs = data["$defs"]

    def deref(node: Any) -> dict:
        while isinstance(node, dict) and "$ref" in node:
            node = defs[str(node["$ref"]).rpartition("/")[2]]
        return node if isinstance(node, dict) else {}

    top = data["networks"][network]["schema"]["properties"]
    sections = {}
    for name, sub in top.items():
        props = deref(sub).get("properties")
        if not isinstance(props, dict):
            continue
        keys, resume = [k for k in gpu_keys if k in props], [k for k in resume_keys if k in props]
        if keys or resume:
            sections[name] = {"gpu_keys": keys, "resume_keys": resume}
    return {"results_dir": "results_dir" in top, "sections": dict(sorted(sections.items()))}


def text(data: dict) -> str:
    return json.dumps(data, indent=None, separators=(",", ":"), ensure_ascii=False) + "\n"


def files(data: dict) -> dict[str, str]:
    """file name (in :data:`SPECS_DIR`, without ``.json.gz``) -> its JSON text: the shared part, then a file per
    network."""
    common = {k: v for k, v in data.items() if k != "networks"}
    return {COMMON: text(common), **{network: text(row) for network, row in data["networks"].items()}}


def packed(content: str) -> bytes:
    return gzip.compress(content.encode("utf-8"), compresslevel=9, mtime=0)


def checked_in(root: Path) -> dict[str, str]:
    """What the bank holds now, as :func:`files` gives it."""
    folder = root / SPECS_DIR
    return {p.name.removesuffix(".json.gz"): gzip.decompress(p.read_bytes()).decode("utf-8")
            for p in sorted(folder.glob("*.json.gz"))} if folder.is_dir() else {}


def write(root: Path, data: dict) -> int:
    """Write every file (and remove one of a network TAO no longer has); the folder's size in bytes."""
    folder = root / SPECS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    want = files(data)
    for old in folder.glob("*.json.gz"):
        if old.name.removesuffix(".json.gz") not in want:
            old.unlink()
    for name, content in want.items():
        (folder / f"{name}.json.gz").write_bytes(packed(content))
    return sum(p.stat().st_size for p in folder.glob("*.json.gz"))
