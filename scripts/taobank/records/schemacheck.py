"""A JSON Schema, compiled once into plain Python checks (the keywords the bank's record schema uses).

Why not jsonschema: every mark of every poll writes a record, and importing jsonschema is most of a helper's
start-up (benchmarks/helper_startup.py --check keeps it out of every record verb); a list reads every record.
The schema file stays the one description of the record; this module only reads it. A keyword it does not
know is refused when the schema is compiled, so the file can never say more than is checked
(tests/unit/test_records.py holds its verdicts to jsonschema's). Stricter than JSON Schema in one way: a
float is never a whole number (``1.0``), and ``true`` is never ``1``. A subclass of a
JSON value's type (``taobank.states.State``, a ``str``) is that value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

Path = tuple["str | int", ...]


@dataclass(frozen=True)
class Failure:
    """The first thing a document breaks: where (``path`` of the value holding it), which ``keyword`` of which
    schema ``node``, and for a keyword about a member (required, additionalProperties, dependentRequired) that
    member's ``name``. Never the offending value: callers word it without it."""

    path: Path
    keyword: str
    node: Mapping[str, Any]
    name: str | None = None


#: Checks a value: the first failure (its path relative to the value), or None.
Check = Callable[[Any], "Failure | None"]

#: keywords that say nothing a value must satisfy
ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description", "examples", "default"})
#: the Python types of each JSON type (a bool is no integer here, an integer is a number)
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "null": (type(None),),
    "object": (dict,), "array": (list,)}
_NUMBER = frozenset((int, float))


def _ok(_v: Any) -> Failure | None:
    return None


def _under(key: str | int, f: Failure) -> Failure:
    return replace(f, path=(key, *f.path))


def _all(checks: Sequence[Check]) -> Check:
    if not checks:
        return _ok
    if len(checks) == 1:
        return checks[0]
    first = tuple(checks)

    def check(v: Any) -> Failure | None:
        for c in first:
            f = c(v)
            if f is not None:
                return f
        return None
    return check


#: the Python types json.loads makes; a subclass of one (a StrEnum such as taobank.states.State) stands for it
_EXACT = frozenset((str, int, float, bool, type(None), dict, list))
_BASES = (bool, str, int, float, dict, list)  # bool before int: a bool is no integer
_PLAIN: dict[type, Callable[[Any], Any]] = {str: str.__str__, int: int.__int__, float: float.__float__}


def _json_type(v: Any) -> type:
    """The Python type of the JSON value ``v`` stands for (``State.RUNNING`` is text)."""
    t = type(v)
    if t in _EXACT:
        return t
    return next((b for b in _BASES if isinstance(v, b)), t)


def _members(values: Sequence[Any], node: Mapping[str, Any], keyword: str) -> Check:
    """``enum``/``const``: JSON scalars compared with their type (``true`` is not ``1``)."""
    if not all(v is None or type(v) in (str, int, float, bool) for v in values):
        raise ValueError(f"schema {keyword} with a member that is not a scalar: not checked here")
    pairs = frozenset((type(v), v) for v in values)

    def check(v: Any) -> Failure | None:
        t = type(v)
        if t not in _EXACT:
            t = _json_type(v)
            v = _PLAIN[t](v) if t in _PLAIN else v
        return None if t not in (dict, list) and (t, v) in pairs else Failure((), keyword, node)
    return check


#: the keywords about a plain value (text, number, a member of a list)
_SCALAR = frozenset({"type", "const", "enum", "minLength", "maxLength", "pattern", "minimum", "maximum",
                     "exclusiveMinimum", "exclusiveMaximum"})


def _scalar(s: Mapping[str, Any]) -> Check:  # noqa: C901 - one branch per keyword, in one call
    """The :data:`_SCALAR` keywords of a node as one function (the same verdicts as one check each)."""
    names = [s["type"]] if isinstance(s.get("type"), str) else list(s.get("type", ()))
    kinds = frozenset(t for n in names for t in _TYPES[n]) if "type" in s else None
    key = "const" if "const" in s else "enum" if "enum" in s else None
    members = None if key is None else _members([s["const"]] if key == "const" else list(s["enum"]), s, key)
    lo, hi = s.get("minLength", 0), s.get("maxLength", float("inf"))
    search = re.compile(s["pattern"]).search if "pattern" in s else None
    sized = "minLength" in s or "maxLength" in s
    bounds = [(k, b) for k, b in ((k, s.get(k)) for k in ("minimum", "maximum", "exclusiveMinimum",
                                                         "exclusiveMaximum")) if b is not None]

    def check(v: Any) -> Failure | None:
        t = type(v)
        if t not in _EXACT:
            t = _json_type(v)
        if kinds is not None and t not in kinds:
            return Failure((), "type", s)
        if members is not None:
            f = members(v)
            if f is not None:
                return f
        if t is str:
            if sized and not lo <= len(v) <= hi:
                return Failure((), "minLength" if len(v) < lo else "maxLength", s)
            if search is not None and search(v) is None:
                return Failure((), "pattern", s)
        elif bounds and t in _NUMBER:
            for k, b in bounds:
                if not (v >= b if k == "minimum" else v <= b if k == "maximum" else v > b if k == "exclusiveMinimum"
                        else v < b):
                    return Failure((), k, s)
        return None
    return check


def _rule(inner: Check, branch: Mapping[str, Any]) -> Check:
    """An ``allOf`` branch that says what it means (a rule tying fields together): it fails as itself."""
    return lambda v: None if inner(v) is None else Failure((), "allOf", branch)


class _Compiler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, target: str) -> Check:
        if target not in self.refs:
            if not target.startswith("#/"):
                raise ValueError(f"schema $ref {target!r}: only refs inside the schema (#/...) are checked")
            node: Any = self.root
            for part in target[2:].split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            self.refs[target] = self.node(node)
        return self.refs[target]

    def node(self, s: Mapping[str, Any] | bool) -> Check:
        if s is True:
            return _ok
        if s is False:
            return lambda v: Failure((), "false", {})
        unknown = set(s) - KEYWORDS - ANNOTATIONS
        if unknown:
            raise ValueError(f"schema keyword(s) {', '.join(sorted(unknown))} are not checked by "
                             "taobank.records.schemacheck: add them there first")
        checks: list[Check] = []
        if set(s) & _SCALAR:  # one call for a value's own keywords: all of most of a record's fields
            checks.append(_scalar(s))
        checks += self._array(s) + self._object(s)
        if "$ref" in s:
            checks.append(self.ref(s["$ref"]))
        checks += self._logic(s)
        return _all(checks)

    def _array(self, s: Mapping[str, Any]) -> list[Check]:
        out: list[Check] = []
        if "minItems" in s or "maxItems" in s:
            lo, hi = s.get("minItems", 0), s.get("maxItems", float("inf"))
            out.append(lambda v: None if not isinstance(v, list) or lo <= len(v) <= hi
                       else Failure((), "minItems" if len(v) < lo else "maxItems", s))
        if "items" in s:
            item = self.node(s["items"])

            def items(v: Any) -> Failure | None:
                if isinstance(v, list):
                    for i, x in enumerate(v):
                        f = item(x)
                        if f is not None:
                            return _under(i, f)
                return None
            out.append(items)
        return out

    def _object(self, s: Mapping[str, Any]) -> list[Check]:  # noqa: C901 - one branch per keyword
        out: list[Check] = []
        if "required" in s:
            need = tuple(s["required"])

            def required(v: Any) -> Failure | None:
                if isinstance(v, dict):
                    for k in need:
                        if k not in v:
                            return Failure((), "required", s, k)
                return None
            out.append(required)
        if "dependentRequired" in s:
            deps = tuple((k, tuple(ks)) for k, ks in s["dependentRequired"].items())

            def dependent(v: Any) -> Failure | None:
                if isinstance(v, dict):
                    for k, ks in deps:
                        if k in v:
                            for want in ks:
                                if want not in v:
                                    return Failure((), "dependentRequired", s, want)
                return None
            out.append(dependent)
        if "minProperties" in s or "maxProperties" in s:
            lo, hi = s.get("minProperties", 0), s.get("maxProperties", float("inf"))
            out.append(lambda v: None if not isinstance(v, dict) or lo <= len(v) <= hi
                       else Failure((), "minProperties" if len(v) < lo else "maxProperties", s))
        if "propertyNames" in s:
            name = self.node(s["propertyNames"])

            def names(v: Any) -> Failure | None:
                if isinstance(v, dict):
                    for k in v:
                        if name(k) is not None:
                            return Failure((), "propertyNames", s)
                return None
            out.append(names)
        props = {k: self.node(sub) for k, sub in s.get("properties", {}).items()}
        extra = s.get("additionalProperties", True)
        if extra is False:
            def closed(v: Any) -> Failure | None:
                if isinstance(v, dict):
                    for k in v:
                        if k not in props:
                            return Failure((), "additionalProperties", s, str(k))
                return None
            out.append(closed)
        if props:
            listed = tuple(props.items())

            def properties(v: Any) -> Failure | None:
                if isinstance(v, dict):
                    for k, c in listed:
                        if k in v:
                            f = c(v[k])
                            if f is not None:
                                return _under(k, f)
                return None
            out.append(properties)
        if extra is not True and extra is not False:
            rest = self.node(extra)

            def others(v: Any) -> Failure | None:
                if isinstance(v, dict):
                    for k, x in v.items():
                        if k not in props:
                            f = rest(x)
                            if f is not None:
                                return _under(k, f)
                return None
            out.append(others)
        return out

    def _logic(self, s: Mapping[str, Any]) -> list[Check]:
        out: list[Check] = []
        for branch in s.get("allOf", ()):
            inner = self.node(branch)
            if isinstance(branch, Mapping) and "description" in branch:
                # a branch that says what it means (a rule tying fields together) fails as itself
                out.append(_rule(inner, branch))
            else:
                out.append(inner)
        if "anyOf" in s:
            any_of = [self.node(b) for b in s["anyOf"]]
            out.append(lambda v: None if any(c(v) is None for c in any_of) else Failure((), "anyOf", s))
        if "oneOf" in s:
            one_of = [self.node(b) for b in s["oneOf"]]
            out.append(lambda v: None if sum(c(v) is None for c in one_of) == 1 else Failure((), "oneOf", s))
        if "not" in s:
            negated = self.node(s["not"])
            out.append(lambda v: None if negated(v) is not None else Failure((), "not", s))
        if "if" in s:
            cond, then, other = self.node(s["if"]), self.node(s.get("then", True)), self.node(s.get("else", True))
            out.append(lambda v: then(v) if cond(v) is None else other(v))
        return out


#: the keywords this module checks
KEYWORDS = frozenset({
    "type", "const", "enum", "$ref", "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minItems", "maxItems", "items", "required", "dependentRequired", "minProperties",
    "maxProperties", "propertyNames", "properties", "additionalProperties", "allOf", "anyOf", "oneOf", "not", "if",
    "then", "else"})


def compile_schema(schema: Mapping[str, Any]) -> Check:
    """``schema`` as one check (call it with a document); ValueError for a keyword it cannot check."""
    return _Compiler(schema).node(schema)


__all__ = ["Failure", "Check", "Path", "compile_schema", "ANNOTATIONS", "KEYWORDS"]
