"""The typed record (taobank.records.Record) against schemas/job-record.schema.json, the on-disk truth: every
property is a field and every field a property; a stored record reads back as typed values and writes back as
it was stored."""
from __future__ import annotations

import json
import types
import typing
from dataclasses import FrozenInstanceError, fields
from pathlib import Path

import pytest

from taobank import records
from taobank.records import Record
from taobank.states import State

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "job-record.schema.json").read_text())


def stored(cls=Record) -> list:
    """The fields a record stores (``terminal`` and ``active`` are derived from its state, never stored)."""
    return [f for f in fields(cls) if f.init]


def test_every_schema_property_is_a_field_and_every_field_a_property():
    names = {f.name for f in stored()}
    assert names == set(SCHEMA["properties"])
    assert {f.name for f in fields(Record) if not f.init} == {"terminal", "active"}
    required = {f.name for f in stored() if f.default is f.default_factory}  # no default: must be given
    assert required <= set(SCHEMA["required"])
    assert set(Record.OPTIONAL) == set(SCHEMA["properties"]) - set(SCHEMA["required"]) - {"description"}


def _json_types(node: dict) -> set[str]:
    """The JSON types a schema node allows (through $ref, const, enum, oneOf)."""
    if "type" in node:
        return {node["type"]} if isinstance(node["type"], str) else set(node["type"])
    if "$ref" in node:
        return _json_types(SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[-1]])
    if "const" in node or "enum" in node:
        names = {str: "string", int: "integer", bool: "boolean", type(None): "null"}
        return {names[type(v)] for v in ([node["const"]] if "const" in node else node["enum"])}
    return set().union(*(_json_types(b) for b in node["oneOf"]))


def test_every_fields_type_is_the_schemas():
    """The dataclass and the schema say one shape: each field's Python type is its property's JSON type, and a
    field may be None exactly when the property may be null or absent (Record.OPTIONAL)."""
    python = {"string": str, "integer": int, "object": dict, "array": tuple}
    hints = typing.get_type_hints(Record)
    for f in stored():
        allowed = _json_types(SCHEMA["properties"][f.name])
        args = typing.get_args(hints[f.name]) if typing.get_origin(hints[f.name]) in (types.UnionType, typing.Union) \
            else (hints[f.name],)
        plain = {typing.get_origin(a) or a for a in args if a is not type(None)}
        assert plain == {python[t] for t in allowed - {"null"}}, f.name
        assert (type(None) in args) == ("null" in allowed or f.name in Record.OPTIONAL), f.name


def test_a_stored_record_reads_as_typed_values_and_writes_back_as_stored(state_dir):
    opened = records.open_record("slurm", "nvcr.io/x:1", "dino", "train", "A", "/lustre/results/{id}",
                                 description="first try", lineage={"parent": None},
                                 sweep=("sweep-0a1b2c3d", 2, {"train.optim.lr": "0.1"}))
    marked = records.mark(opened["id"], State.RUNNING, backend_ref="slurm:42", backend={"partition": "gpu"})
    rec = records.get(opened["id"])
    assert (rec.id, rec.state, rec.backend_ref, rec.attempt) == (opened["id"], "RUNNING", "slurm:42", 1)
    assert rec.backend["partition"] == "gpu" and rec.sweep == "sweep-0a1b2c3d" and rec.trial == 2
    assert rec.results_dir == f"/lustre/results/{opened['id']}" and rec.parent is None and not rec.terminal
    assert rec.to_dict() == marked  # the store's own JSON, field for field
    records.validate(rec.to_dict())
    with pytest.raises(FrozenInstanceError):
        rec.state = "COMPLETE"  # type: ignore[misc]  # the store alone changes a record (records.mark)


def test_a_record_written_by_hand_without_the_nullable_fields_still_reads(state_dir):
    """The store's read checks only what it must (its shape); the typed record does not ask for more."""
    rec = records.open_record("docker", "img:1", "custom", "run", "A", "/r/{id}")
    bare = {k: v for k, v in rec.items() if k not in ("storage_tier", "backend_ref", "err_class", "message",
                                                       "retry_of", "record_version", "description")}
    typed = Record.of(bare)
    assert (typed.storage_tier, typed.backend_ref, typed.message, typed.retry_of) == ("A", None, None, None)
