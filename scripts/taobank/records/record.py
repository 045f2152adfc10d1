"""A job's record as typed values (:class:`Record`): what code reads instead of ``rec["..."]``."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Mapping

from .. import states
from ..states import State

#: The record format's version (the schema's ``record_version``).
RECORD_VERSION = 1


@dataclass(frozen=True)
class Record:
    """One job's record as typed values (the store keeps it as JSON: :meth:`of` reads that, :meth:`to_dict`
    writes it back); ``schemas/job-record.schema.json`` is the truth (tests/unit/test_record_type.py checks
    every property is a field, every field a property, and their types alike). Code reads attributes, never
    ``rec["..."]``."""

    # what the schema requires and a reader cannot do without
    id: str
    platform: str
    state: str
    image: str
    network_arch: str
    action: str
    #: the job's own results folder (a platform may keep a truer one in ``backend.results_dir``)
    results_dir: str
    backend: dict[str, Any]
    transitions: tuple[dict[str, Any], ...]
    attempt: int
    created_at: str
    updated_at: str
    # the schema requires these too; a mapping built by hand may lack them (these defaults stand in)
    storage_tier: str = "A"
    backend_ref: str | None = None
    err_class: str | None = None
    message: str | None = None
    retry_of: str | None = None
    record_version: int = RECORD_VERSION
    description: str | None = None
    #: lineage: the job whose results it uses (submit --parent) and the job it continues
    parent: str | None = None
    continues: str | None = None
    #: a sweep trial: its sweep id, index and overrides
    sweep: str | None = None
    trial: int | None = None
    overrides: dict[str, str] | None = None

    #: written only when set (a record without them is valid as it is)
    OPTIONAL: ClassVar[tuple[str, ...]] = ("parent", "continues", "sweep", "trial", "overrides")

    @classmethod
    def of(cls, rec: "Mapping[str, Any] | Record") -> "Record":
        """A stored record (a mapping the store read and checked) as typed values (a Record as it is)."""
        if isinstance(rec, Record):
            return rec
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: (tuple(v) if k == "transitions" else v) for k, v in rec.items() if k in known}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The record as the store writes it."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["transitions"] = [dict(t) for t in self.transitions]
        return {k: v for k, v in out.items() if not (k in self.OPTIONAL and v is None)}

    @property
    def terminal(self) -> bool:
        return self.state in states.TERMINAL

    @property
    def active(self) -> bool:
        return self.state in states.ACTIVE


def run_times(rec: Record) -> tuple[str | None, str | None]:
    """(started_at, ended_at) from the transitions: when the job was first seen RUNNING and when it reached
    its terminal state; None for what has not happened (or was never seen: a job may end between two polls)."""
    trs = [t for t in rec.transitions if isinstance(t, Mapping)]
    started = next((t.get("time") for t in trs if t.get("state") == State.RUNNING), None)
    ended = None
    if rec.terminal:
        ended = next((t.get("time") for t in reversed(trs) if t.get("state") == rec.state), None) \
            or rec.updated_at
    return started, ended


__all__ = ["Record", "RECORD_VERSION", "run_times"]
