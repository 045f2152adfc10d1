"""The record's shape, written once: ``schemas/job-record.schema.json``, compiled on first use into plain Python
checks (:func:`compile_schema`, no jsonschema import), and the rules a schema cannot say (the transitions follow the table of :mod:`taobank.states`; a record's id is its file's name; its
results folder is its own: :func:`check_results_dir`, :func:`folder_of`, :func:`within`, :func:`folder_problem`).
One module, since every record read runs through all of it.

One verdict for both directions: what a write would refuse (:func:`validate`) is damaged when it is read
(:func:`damage`), so a hand-edited or foreign record is reported as one line where it is first read, never
halfway through a status. Messages name the field, never its value.

Why not jsonschema: every mark of every poll writes a record, and importing jsonschema is most of a helper's
start-up (benchmarks/helper_startup.py --check keeps it out of every record verb); a list reads every record.
The schema file stays the one description of the record; this module only reads it. A keyword it does not
know is refused when the schema is compiled, so the file can never say more than is checked
(tests/unit/test_records.py holds its verdicts to jsonschema's). Stricter than JSON Schema in one way: a
float is never a whole number (``1.0``), and ``true`` is never ``1``. A subclass of a
JSON value's type (``taobank.states.State``, a ``str``) is that value.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from .. import BANK_ROOT, registry, states
from ..errors import TaoError


# ---------------------------------------------------------------- the schema, compiled into plain checks
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
                             "taobank.records.shape: add them there first")
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


# ---------------------------------------------------------------- the results folder
#: In ``results_dir`` given to :func:`taobank.records.open_record`, replaced by the minted id.
ID_PLACEHOLDER = "{id}"
#: The ``results_dir`` of a job told to keep no results (``--no-results``): shown as "no results".
NO_RESULTS_DIR = "/dev/null"
#: A ``scheme://`` location (S3, Lustre ...), as opposed to an absolute path.
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def check_results_dir(value: str) -> str:
    """An absolute path or a ``scheme://`` URI without credentials; anything else is refused."""
    got = check_results_dirs([value])[0]
    if isinstance(got, TaoError):
        raise got
    return got


def check_results_dirs(values: Sequence[str]) -> list[str | TaoError]:
    """:func:`check_results_dir` of each value (the folders of a batch of records), in one call: the folder as
    stored, or the one-line TaoError that refuses it."""
    from ..redact import lint_text

    out: list[str | TaoError] = []
    for value in values:
        try:
            out.append(_results_dir(value))
        except TaoError as exc:
            out.append(exc)
    # the credential lint last, for every folder the rules above let through (one run of scanner calls)
    return [TaoError("results_dir looks like it carries a credential: give the bare path or URI")
            if isinstance(v, str) and lint_text(v, "results_dir") else v for v in out]


def _results_dir(value: str) -> str:
    """The rules of :func:`check_results_dir` but its credential lint."""
    from urllib.parse import urlsplit

    from ..redact import shown

    v = str(value).strip()
    if not v:
        raise TaoError("results_dir is empty: give an absolute path or a URI such as s3://bucket/prefix")
    if any(ord(c) < 32 or ord(c) == 127 for c in v):
        raise TaoError("results_dir contains a control character: give a plain path or URI")
    if URI.match(v):
        parts = urlsplit(v)
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise TaoError("results_dir carries credentials (user@ or user:pass@): give the bare URI and keep credentials in the environment")
        if parts.query or parts.fragment or "?" in v:
            raise TaoError("results_dir has a query string (presigned URLs carry credentials): give the bare URI, e.g. s3://bucket/prefix")
        if not (parts.netloc or parts.path.strip("/")):
            raise TaoError(f"results_dir {shown(v)} names no location: add the bucket/volume and prefix")
    elif not v.startswith("/"):
        hint = "expand ~ first" if v.startswith("~") else "relative paths are refused"
        raise TaoError(f"results_dir {shown(v)} is not absolute ({hint}): give /abs/path or a URI such as s3://bucket/prefix")
    if ".." in v.split("/"):
        raise TaoError(f"results_dir {shown(v)} contains '..': give the resolved path")
    return v


def folder_of(rec: Mapping[str, Any]) -> str:
    """The folder a record's job writes: ``backend.results_dir`` (where a platform keeps the job's own folder)
    or ``results_dir``; "" for a job that keeps none."""
    b = rec.get("backend")
    v = b.get("results_dir") if isinstance(b, dict) else None
    folder = v if isinstance(v, str) and v else rec.get("results_dir")
    return folder.rstrip("/") or "/" if isinstance(folder, str) and folder != NO_RESULTS_DIR else ""


def within(path: str, root: str) -> bool:
    """``path`` is ``root`` or inside it: absolute paths by :func:`taobank.paths.is_under`, URIs by prefix."""
    from ..paths import is_under

    if not path or not root:
        return False
    if path.startswith("/") and root.startswith("/"):
        return is_under(path, root)
    a, b = path.rstrip("/"), root.rstrip("/")
    return URI.match(a) is not None and (a == b or a.startswith(b + "/"))


def folder_problem(rec: Mapping[str, Any]) -> str | None:
    """A results folder no verb may list, fetch from or delete: the whole disk, or a ``backend.results_dir``
    that is neither the record's ``results_dir`` nor a folder named after the job (``rec`` is schema-valid)."""
    top, own = rec["results_dir"], rec["backend"].get("results_dir")
    for folder in (top, own):
        if isinstance(folder, str) and folder.startswith("/") and not folder.strip("/"):
            return "its results folder is / (the whole disk)"
    if own is not None and own.rstrip("/") != top.rstrip("/") and own.rstrip("/").rsplit("/", 1)[-1] != rec["id"]:
        return "backend.results_dir is neither its results_dir nor a folder named after the job"
    if own is not None and not (own.startswith("/") or URI.match(own)):
        return "backend.results_dir is not an absolute path"
    return None


# ---------------------------------------------------------------- the record's rules
SCHEMA_FILE = BANK_ROOT / "schemas" / "job-record.schema.json"
#: optional: lineage (taobank.campaign.lineage), absent on records that have none
LINEAGE_FIELDS = ("parent", "continues")
#: a sweep trial's fields (taobank.campaign.sweeps): all three on a trial, absent on every other record
SWEEP_FIELDS = ("sweep", "trial", "overrides")


@functools.cache
def schema() -> dict[str, Any]:
    """The record's JSON Schema (read once per process)."""
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return loaded


@functools.cache
def _check() -> Check:
    return compile_schema(schema())


_TYPE_WORDS = {"string": "text", "integer": "a whole number", "number": "a number", "boolean": "true/false",
               "object": "an object", "array": "a list"}


def _said(node: Mapping[str, Any]) -> str | None:
    """What a schema node stands for, in words: its description (or its $ref's), or "null"."""
    if "description" in node:
        return str(node["description"])
    if "$ref" in node:
        return _said(schema()["$defs"][node["$ref"].rsplit("/", 1)[-1]])
    return "null" if node.get("type") == "null" else None


def _words(f: Failure) -> str:
    """One line for a schema failure, naming the field (never its value)."""
    from ..redact import looks_like_secret, shown

    # a path holds the record's own keys (a backend key may be anything field-like): never one that looks secret
    at = " ".join("(a key not shown)" if isinstance(p, str) and looks_like_secret(p) else str(p) for p in f.path)
    if (f.path and f.path[0] in SWEEP_FIELDS) or (not f.path and f.name in SWEEP_FIELDS):
        return "its sweep fields are not a sweep id, a trial number and key=value overrides"
    if f.keyword == "type":
        if not f.path:
            return "not a JSON object"
        kinds = f.node["type"] if isinstance(f.node["type"], list) else [f.node["type"]]
        said = [_TYPE_WORDS[k] for k in kinds if k != "null"]
        return f"{at} is not {', '.join(said[:-1]) + ' or ' + said[-1] if len(said) > 1 else said[0]}"
    if f.keyword in ("enum", "const") or list(f.path) == ["platform"]:  # a platform: a name of the registry
        return f"unknown {at}"
    if f.keyword in ("required", "dependentRequired"):
        return f"{(at + ' ') if at else ''}{f.name} is missing"
    if f.keyword == "additionalProperties":
        return f"{shown(f.name, 40)} is not a field of {at or 'a record'}"
    if f.keyword == "propertyNames":
        return f"{at} has a key that is not a field name"
    if f.keyword == "allOf" and "description" in f.node:
        return f"it breaks the rule {f.node['description']!r}"
    branches = [_said(b) for b in f.node.get("oneOf", ())] if f.keyword == "oneOf" else []
    if branches and all(branches):
        return f"{at} is not {' or '.join(str(b) for b in branches)}"
    if "description" in f.node:
        return f"{at} is not {f.node['description']}"
    return f"{at} breaks the schema's {f.keyword}"


def _chain_problem(state: str, chain: list[str]) -> str | None:
    """The transitions must run from the initial state to ``state`` by the moves of the table of
    :mod:`taobank.states` (:data:`states.TRANSITIONS`, the table :func:`states.is_allowed` reads)."""
    if chain[0] != states.INITIAL or chain[-1] != state:
        return f"its transitions run {chain[0]} .. {chain[-1]}, not {states.INITIAL} .. {state}"
    for a, b in zip(chain, chain[1:]):
        if b not in states.TRANSITIONS.get(a, ()):
            return f"its transition {a} -> {b} is not in the table"
    return None

def damage(rec: Any, job_id: str) -> str | None:
    """What makes ``rec`` (read from ``<job_id>.json``) unusable as a record, as one line; None when it is
    whole. Cheap: a compiled check, no jsonschema import."""
    f = _check()(rec)
    if f is not None:
        return _words(f)
    if rec["id"] != job_id:
        return "its id does not match the file name"
    if rec["platform"] not in registry.PACKAGES:  # the schema says a name; the registry says which
        return "unknown platform"
    return _chain_problem(rec["state"], [t["state"] for t in rec["transitions"]]) or folder_problem(rec)


def damage_each(recs: Sequence[tuple[Any, str]]) -> list[str | None]:
    """:func:`damage` of each ``(record, job id)`` read in one pass, in one call."""
    return [damage(rec, job_id) for rec, job_id in recs]


def validate(rec: Mapping[str, Any], job_id: str | None = None) -> bool:
    """The schema plus the transition table; TaoError naming the first problem (a record about to be written).
    True when ``rec``, stored as ``<job_id>.json``, is also whole as a read sees it (:func:`damage`: its id is the
    file's name and its results folder its own), so the store need not check the bytes it wrote a second time."""
    f = _check()(rec)
    if f is not None:
        where = "/".join(str(p) for p in f.path) or "record"
        raise TaoError(f"job record rejected at {where}: {_words(f)}")
    if rec["platform"] not in registry.PACKAGES:  # the schema says a name; the registry says which
        raise TaoError(f"job record rejected at platform: unknown platform (one of {', '.join(registry.names())})")
    chain = _chain_problem(rec["state"], [t["state"] for t in rec["transitions"]])
    if chain:
        raise TaoError(f"job record rejected: {chain}")
    return rec["id"] == job_id and folder_problem(rec) is None


def validate_each(recs: Sequence[tuple[Mapping[str, Any], str | None]]) -> list[bool | TaoError]:
    """:func:`validate` of each ``(record, job id)`` of a batch about to be written, in one call: its verdict, or
    the one-line TaoError that rejects it (the store writes the records before the first rejected one)."""
    out: list[bool | TaoError] = []
    for rec, job_id in recs:
        try:
            out.append(validate(rec, job_id))
        except TaoError as exc:
            out.append(exc)
    return out


__all__ = ["Failure", "Check", "Path", "compile_schema", "ANNOTATIONS", "KEYWORDS", "ID_PLACEHOLDER", "NO_RESULTS_DIR",
           "URI", "check_results_dir", "check_results_dirs", "folder_of", "within", "folder_problem", "SCHEMA_FILE", "LINEAGE_FIELDS", "SWEEP_FIELDS", "schema", "damage", "validate",
           "validate_each"]
