"""A TAO experiment spec and its ``key=value`` overrides checked against the pinned TAO's schema.

The spec (a YAML file) and the overrides are merged as TAO's Hydra runner merges them (OmegaConf's structured
config: a key the network's config lacks is refused, a value is converted to its key's type or refused; an
override ``key=value`` sets a key that exists, ``+key=value`` adds one that does not, ``++key=value`` either,
``~key`` deletes) and then checked as the runner cannot: values outside TAO's ``valid_min``/``valid_max`` and
``valid_options``, and required values (``???``) of the sections the action reads left unset.

Each problem is one line naming its dotted path; an unknown key names the nearest real one
("did you mean train.num_epochs?"). The schema is :mod:`taobank.tao_spec_schema`' (generated from nvidia-tao-core).
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from . import tao_spec_schema
from .errors import TaoError
from .tao_spec_schema import MISSING, deref, is_section, types

#: The largest spec file read (TAO's specs are a few KiB; a bigger file is not a spec).
MAX_SPEC_BYTES = 1 << 20
#: How many problems are listed at most (the rest counted in one line).
MAX_PROBLEMS = 50
#: The problems TAO's Hydra runner also refuses; ``range``/``options`` are TAO's limits only the bank checks.
RUNNER_KINDS = frozenset({"unknown", "type", "override"})

_OVERRIDE = re.compile(r"(?P<op>~|\+\+|\+)?(?P<key>[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*)"
                       r"(?:(?P<eq>=)(?P<value>.*))?\Z", re.S)
_INT = re.compile(r"[+-]?(0|[1-9][0-9_]*)\Z")
_FLOAT = re.compile(r"[+-]?((\d[\d_]*)?\.\d[\d_]*([eE][+-]?\d+)?|\d[\d_]*\.([eE][+-]?\d+)?|\d[\d_]*[eE][+-]?\d+|inf|nan)\Z",
                    re.I)


@dataclass
class Problem:
    """One thing wrong, at a dotted path: ``kind`` is unknown, type, required, range, options or override."""

    path: str
    kind: str
    text: str

    def line(self) -> str:
        from .text import escaped

        return escaped(f"{self.path}: {self.text}")  # a key of the file may hold a newline: one line still


@dataclass
class Override:
    """One Hydra override: ``op`` is "" (set), "+" (add), "++" (set or add) or "~" (delete)."""

    word: str
    op: str
    path: list[str]
    value: Any = None
    has_value: bool = True


@dataclass
class Report:
    """What a check found: the problems, and notes (a spec that could not be read, what was not judged)."""

    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        shown = [p.line() for p in self.problems[:MAX_PROBLEMS]]
        if len(self.problems) > MAX_PROBLEMS:
            shown.append(f"... and {len(self.problems) - MAX_PROBLEMS} more problems")
        return shown


# ------------------------------------------------------------------ reading a spec and overrides
def read_spec(path: str) -> dict:
    """The spec file at ``path`` as a mapping; one-line TaoError when it cannot be read, is too big, is not
    YAML (aliases refused: a few anchors expand to gigabytes) or is not a mapping."""
    try:
        size = os.stat(path).st_size
        if size > MAX_SPEC_BYTES:
            raise TaoError(f"spec file {path} is {size // (1 << 20) or 1} MiB or more, over the "
                           f"{MAX_SPEC_BYTES >> 20} MiB a TAO spec may be: is it the right file?")
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SPEC_BYTES + 1)
    except IsADirectoryError:
        raise TaoError(f"spec file {path} is a folder: name the YAML file") from None
    except OSError as exc:
        raise TaoError(f"spec file {path} cannot be read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TaoError(f"spec file {path} is not UTF-8 text: is it a YAML spec?") from None
    return spec_mapping(text, f"spec file {path}")


def spec_mapping(text: str, what: str) -> dict:
    """YAML ``text`` as a spec mapping (empty text: an empty spec); one line naming ``what`` otherwise."""
    from .fsio import yaml_value

    if len(text) > MAX_SPEC_BYTES:
        raise TaoError(f"{what} is over the {MAX_SPEC_BYTES >> 20} MiB a TAO spec may be")
    doc = yaml_value(text, what, unique_keys=True)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise TaoError(f"{what} is a YAML {type(doc).__name__}, not a mapping of keys: a TAO spec maps sections "
                       "to their keys (train: {num_epochs: 10})")
    return doc


def parse_override(word: str) -> Override:
    """One ``key=value`` word in TAO's Hydra syntax (``+key=value``, ``++key=value``, ``~key``; values as Hydra
    reads them: numbers, true/false, null, quoted text, ``[a,b]`` lists, ``{k: v}`` mappings)."""
    found = _OVERRIDE.match(word)
    if not found:
        if "=" not in word:
            raise TaoError(f"override {word[:80]!r} has no '=': give key=value (train.num_epochs=10)")
        raise TaoError(f"override {word[:80]!r} has no valid dotted key before '=' (train.num_epochs=10)")
    op, key = found["op"] or "", found["key"]
    if not found["eq"]:
        if op != "~":
            raise TaoError(f"override {word[:80]!r} has no '=': give key=value (train.num_epochs=10)")
        return Override(word, op, key.split("."), has_value=False)
    return Override(word, op, key.split("."), _value(found["value"], word))


def _value(text: str, word: str) -> Any:
    parser = _ValueParser(text.strip(), word)
    value = parser.value(top=True)
    parser.end()
    return value


class _ValueParser:
    """Hydra's override value grammar, the part a TAO command uses (no sweeps: a top-level ``a,b`` is one)."""

    def __init__(self, text: str, word: str) -> None:
        self.text, self.word, self.i, self.depth = text, word, 0, 0

    def fail(self, why: str) -> TaoError:
        return TaoError(f"override {self.word[:80]!r}: {why}")

    def end(self) -> None:
        if self.i < len(self.text):
            if self.text[self.i] == ",":
                raise self.fail("a,b is a sweep (TAO runs one value): give [a,b] for a list, or quote it")
            raise self.fail(f"unexpected {self.text[self.i]!r} in the value")

    def value(self, top: bool = False) -> Any:
        self.skip()
        if self.i >= len(self.text):
            return ""
        c = self.text[self.i]
        if c == "[":
            return self.seq("[", "]")
        if c == "{":
            return self.seq("{", "}")
        if c in "'\"":
            return self.quoted(c)
        return self.plain(top)

    def skip(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in " \t":
            self.i += 1

    def quoted(self, quote: str) -> str:
        out, self.i = [], self.i + 1
        while self.i < len(self.text):
            c = self.text[self.i]
            if c == "\\" and self.i + 1 < len(self.text):
                out.append(self.text[self.i + 1])
                self.i += 2
                continue
            if c == quote:
                self.i += 1
                return "".join(out)
            out.append(c)
            self.i += 1
        raise self.fail(f"a {quote} quote is not closed")

    def plain(self, top: bool) -> Any:
        start, depth = self.i, 0
        while self.i < len(self.text):
            c = self.text[self.i]
            if c == "$" and self.text[self.i:self.i + 2] == "${":
                depth += 1
                self.i += 2
                continue
            if c == "}" and depth:
                depth -= 1
            elif not depth and c in (",]}:" if not top else ","):
                break
            self.i += 1
        return _scalar(self.text[start:self.i].strip())

    def seq(self, open_: str, close: str) -> Any:
        self.depth += 1
        if self.depth > 32:
            raise self.fail("the value is nested deeper than 32 levels")
        self.i += 1
        items: list = []
        pairs: dict = {}
        self.skip()
        if self.i < len(self.text) and self.text[self.i] == close:
            self.i += 1
            self.depth -= 1
            return items if open_ == "[" else pairs
        while True:
            if open_ == "{":
                key = self.value()
                self.skip()
                if self.i >= len(self.text) or self.text[self.i] != ":":
                    raise self.fail("a {key: value} mapping needs ':' after each key")
                self.i += 1
                pairs[str(key)] = self.value()
            else:
                items.append(self.value())
            self.skip()
            if self.i >= len(self.text):
                raise self.fail(f"a {open_} is not closed with {close}")
            if self.text[self.i] == ",":
                self.i += 1
                continue
            if self.text[self.i] == close:
                self.i += 1
                self.depth -= 1
                return items if open_ == "[" else pairs
            raise self.fail(f"unexpected {self.text[self.i]!r} in the value")


def _scalar(text: str) -> Any:
    low = text.lower()
    if low == "null":
        return None
    if low in ("true", "false"):
        return low == "true"
    try:
        if _INT.match(text):
            return int(text.replace("_", ""))
        if _FLOAT.match(text):
            return float(text.replace("_", ""))
    except ValueError:  # more digits than Python converts: no key of TAO takes it (the check says so)
        return text
    return text


# ------------------------------------------------------------------ the check
def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value).replace("True", "true").replace("False", "false") \
        if isinstance(value, bool) else str(value)
    if isinstance(value, (dict, list)):
        text = "a mapping" if isinstance(value, dict) else f"a list {str(value)[:40]}"
    return text[:60] + ("..." if len(text) > 60 else "")


def _interpolation(value: Any) -> bool:
    return isinstance(value, str) and "${" in value


_BOOL_WORDS = {"yes", "y", "on", "true", "no", "n", "off", "false"}


def convert(node: dict, value: Any) -> tuple[bool, Any]:
    """(ok, value) as OmegaConf converts ``value`` for a key of ``node``'s type (int, float, bool, str; Any)."""
    kinds = [k for k in types(node) if k != "null"]
    if not kinds or value is None:
        return True, value
    for kind in kinds:
        if kind == "integer" and type(value) in (int, str):
            try:
                return True, int(value)
            except ValueError:
                continue
        if kind == "number" and type(value) in (int, float, str):
            try:
                return True, float(value)
            except ValueError:
                continue
        if kind == "boolean":
            if isinstance(value, (bool, int)):
                return True, bool(value)
            if isinstance(value, str):
                try:
                    return True, int(value) != 0
                except ValueError:
                    if value.lower() in _BOOL_WORDS:
                        return True, value.lower() in ("yes", "y", "on", "true")
        if kind == "string" and not isinstance(value, (dict, list, bytes)):
            return True, str(value) if not isinstance(value, bool) else str(value)
        if kind == "array" and isinstance(value, list):
            return True, value
        if kind == "object" and isinstance(value, dict):
            return True, value
    return False, value


_WORDS = {"integer": "a whole number", "number": "a number", "boolean": "true or false", "string": "text",
          "array": "a list", "object": "a mapping"}


def _expects(node: dict) -> str:
    kinds = [k for k in types(node) if k != "null"]
    if is_section(node):
        return "a section (a mapping of its keys)"
    return " or ".join(_WORDS.get(k, k) for k in kinds) or "any value"


class Checker:
    """One check of one network action: merge a spec and overrides onto TAO's defaults, collecting problems."""

    def __init__(self, network: str, action: str) -> None:
        self.spec = tao_spec_schema.spec(network, action)
        self.report = Report()
        self.merged: dict = tao_spec_schema.default(self.spec.schema) or {}

    def add(self, path: str, kind: str, text: str) -> None:
        self.report.problems.append(Problem(path, kind, text))

    # -------------------------------------------------------------- suggestions
    def _all_paths(self) -> list[str]:
        return [p for p, _ in tao_spec_schema.walk(self.spec.schema)]

    def unknown(self, path: str, parent: dict, key: str, how: str = "") -> None:
        siblings = list((parent.get("properties") or {}))
        prefix = path.rpartition(".")[0]
        import difflib  # only when a key is wrong
        near = difflib.get_close_matches(key, siblings, n=1, cutoff=0.6)
        if near:
            hint = f"did you mean {prefix + '.' if prefix else ''}{near[0]}?"
        else:
            leaf = [p for p in self._all_paths() if p.rpartition(".")[2] == key]
            far = difflib.get_close_matches(path, self._all_paths(), n=1, cutoff=0.75)
            hint = f"did you mean {(leaf or far)[0]}?" if (leaf or far) else \
                f"see tao_jobs.py spec keys {self.spec.network} {self.spec.action} {prefix or ''}".rstrip()
        self.add(path, "unknown",
                 f"no such key in {self.spec.network}'s spec (TAO {tao_spec_schema.tao_version()}){how}: {hint}")

    # -------------------------------------------------------------- merge
    def merge(self, node: dict, base: Any, value: Any, path: str) -> Any:
        """``value`` merged onto ``base`` (what the key holds so far) for a key of schema ``node``."""
        node = deref(node)
        if value == MISSING or _interpolation(value):
            return value
        if value is None:
            if types(node) and "null" not in types(node):
                self.add(path, "type", f"null is not allowed: TAO expects {_expects(node)}")
                return base
            return None
        if is_section(node):
            if not isinstance(value, dict):
                self.add(path, "type", f"{_shown(value)} is not a mapping: {path} is a section "
                                       f"(give its keys: {path}.KEY=VALUE)")
                return base
            out = dict(base) if isinstance(base, dict) else (tao_spec_schema.default({**node, "default": {}}) or {})
            for key, sub in value.items():
                here = f"{path}.{key}" if path else str(key)
                props = node.get("properties") or {}
                if key in props:
                    out[key] = self.merge(props[key], out.get(key), sub, here)
                elif isinstance(node.get("additionalProperties"), dict):
                    out[key] = self.merge(node["additionalProperties"], out.get(key), sub, here)
                else:
                    self.unknown(here, node, str(key))
            return out
        kinds = types(node)
        if "object" in kinds and isinstance(value, dict):
            item = node.get("additionalProperties")
            out = dict(base) if isinstance(base, dict) else {}
            for key, sub in value.items():
                here = f"{path}.{key}"
                out[key] = self.merge(item, out.get(key), sub, here) if isinstance(item, dict) else sub
            return out
        if "array" in kinds and isinstance(value, list):
            item = node.get("items")
            return [self.merge(item, None, v, f"{path}[{i}]") if isinstance(item, dict) else v
                    for i, v in enumerate(value)]
        ok, converted = convert(node, value)
        if not ok:
            self.add(path, "type", f"{_shown(value)} is not {_expects(node)}")
            return base
        self.limits(node, converted, path, value)
        return converted

    def limits(self, node: dict, value: Any, path: str, given: Any = None) -> None:
        """TAO's valid_options and valid_min/valid_max (the runner does not check them); ``given``: the value as
        written (before TAO's conversion), shown in the line."""
        if value is None or value == MISSING:
            return
        shown = _shown(value if given is None else given)
        options = node.get("enum")
        if isinstance(options, list) and value not in options and not (
                isinstance(value, float) and any(isinstance(o, (int, float)) and o == value for o in options)):
            listed = ", ".join(map(str, options[:12])) + (", ..." if len(options) > 12 else "")
            kind = "type" if node.get("x-enum-type") else "options"
            self.add(path, kind, f"{shown} is not one of TAO's options: {listed}")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
            if "minimum" in node and value < node["minimum"]:
                self.add(path, "range", f"{shown} is below TAO's minimum {node['minimum']}")
            if "maximum" in node and value > node["maximum"]:
                self.add(path, "range", f"{shown} is above TAO's maximum {node['maximum']}")

    # -------------------------------------------------------------- a whole document, an override
    def spec_document(self, doc: dict) -> None:
        """A spec file's mapping (Hydra's own ``defaults`` list is not a key of the config)."""
        doc = {k: v for k, v in doc.items() if k != "defaults"}
        self.merged = self.merge(self.spec.schema, self.merged, doc, "")

    def override(self, ov: Override) -> None:
        """One Hydra override, as the runner applies it to the merged config: ``key=value`` sets a key that
        exists, ``+key=value`` adds one that does not, ``++`` either, ``~key`` deletes one."""
        node: dict = self.spec.schema
        holder: Any = self.merged
        exists, in_section = True, False
        for depth, key in enumerate(ov.path):
            here = ".".join(ov.path[:depth + 1])
            if depth and not is_section(node) and "object" not in types(node) and node:
                self.add(here, "override", f"{'.'.join(ov.path[:depth])} is a value, not a section: "
                                           f"{ov.word[:80]} cannot set a key inside it")
                return
            props = node.get("properties") if is_section(node) else None
            holder = holder.get(key) if isinstance(holder, dict) else None
            in_section = props is not None
            if props is not None and key in props:
                node = deref(props[key])
            elif props is None and isinstance(node.get("additionalProperties"), dict):
                node, exists = deref(node["additionalProperties"]), exists and holder is not None
            elif props is None and not types(node):
                node, exists = {}, exists and holder is not None
            else:
                if ov.op in ("+", "++"):
                    return  # Hydra adds a key that is not there (the runner takes it; TAO ignores it)
                if ov.op == "~":
                    self.add(here, "override", f"{ov.word[:80]} deletes a key that is not there")
                else:
                    self.unknown(here, node, key)
                return
        path = ".".join(ov.path)
        if ov.op == "+" and exists:
            self.add(path, "override", f"{ov.word[:80]} adds a key that is there already: drop the + to set it")
            return
        if ov.op == "~" and in_section:
            self.add(path, "override", f"{ov.word[:80]}: TAO's config keeps every key of a section (its runner "
                                       f"cannot delete one): set {path}=VALUE instead")
            return
        if ov.op == "~":
            parent: Any = self.merged
            for key in ov.path[:-1]:
                parent = parent.get(key) if isinstance(parent, dict) else None
            if isinstance(parent, dict):
                parent.pop(ov.path[-1], None)
            return
        nested: Any = ov.value
        for key in reversed(ov.path):
            nested = {key: nested}
        self.merged = self.merge(self.spec.schema, self.merged, nested, "")

    def required(self) -> None:
        """Every ``???`` left in the sections the action reads (TAO fails on it when it reads the key)."""
        for top in self.spec.reads:
            self._missing(self.merged.get(top) if isinstance(self.merged, dict) else None, top)

    def _missing(self, value: Any, path: str) -> None:
        if value == MISSING:
            self.add(path, "required", f"TAO requires a value and the spec leaves it unset (???): set it in the "
                                       f"spec or add {path}=VALUE")
        elif isinstance(value, dict):
            for key, sub in value.items():
                self._missing(sub, f"{path}.{key}")


def check(network: str, action: str, doc: dict | None, overrides: Sequence[str | Override] = (), *,
          required: bool = True) -> Report:
    """The problems of ``doc`` (a spec mapping; None: the spec could not be read, so only the overrides are
    judged and required values are not) with ``overrides`` applied, for ``network action``."""
    checker = Checker(network, action)
    if doc is not None:
        checker.spec_document(doc)
        if "defaults" in doc:
            checker.report.notes.append("the spec composes other files (defaults:): its own keys are checked, "
                                        "required values are not judged")
            required = False
    for word in overrides:
        try:
            checker.override(word if isinstance(word, Override) else parse_override(word))
        except TaoError as exc:
            checker.add(str(word).partition("=")[0][:80], "override", str(exc))
    if doc is not None and required:
        checker.required()
    return checker.report
