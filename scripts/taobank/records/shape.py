"""The record's shape, written once: ``schemas/job-record.schema.json``, compiled on first use
(:mod:`.schemacheck`), plus the rules a schema cannot say (the transitions follow the table of
:mod:`taobank.states`; a record's id is its file's name; its results folder is its own).

One verdict for both directions: what a write would refuse (:func:`validate`) is damaged when it is read
(:func:`damage`), so a hand-edited or foreign record is reported as one line where it is first read, never
halfway through a status. Messages name the field, never its value.
"""
from __future__ import annotations

import functools
import json
from typing import Any, Mapping

from .. import BANK_ROOT, registry, states
from ..errors import TaoError
from .folders import folder_problem
from .schemacheck import Check, Failure, compile_schema

SCHEMA_FILE = BANK_ROOT / "schemas" / "job-record.schema.json"
#: optional: lineage (taobank.lineage), absent on records that have none
LINEAGE_FIELDS = ("parent", "continues")
#: a sweep trial's fields (taobank.sweeps): all three on a trial, absent on every other record
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
    """The transitions must run from the initial state to ``state`` by the table's moves."""
    if chain[0] != states.INITIAL or chain[-1] != state:
        return f"its transitions run {chain[0]} .. {chain[-1]}, not {states.INITIAL} .. {state}"
    for a, b in zip(chain, chain[1:]):
        if not states.is_allowed(a, b):
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


def validate(rec: Mapping[str, Any]) -> None:
    """The schema plus the transition table; TaoError naming the first problem (a record about to be written)."""
    f = _check()(rec)
    if f is not None:
        where = "/".join(str(p) for p in f.path) or "record"
        raise TaoError(f"job record rejected at {where}: {_words(f)}")
    if rec["platform"] not in registry.PACKAGES:  # the schema says a name; the registry says which
        raise TaoError(f"job record rejected at platform: unknown platform (one of {', '.join(registry.names())})")
    chain = _chain_problem(rec["state"], [t["state"] for t in rec["transitions"]])
    if chain:
        raise TaoError(f"job record rejected: {chain}")


__all__ = ["SCHEMA_FILE", "LINEAGE_FIELDS", "SWEEP_FIELDS", "schema", "damage", "validate"]
