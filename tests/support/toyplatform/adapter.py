"""The toy's side of the contract: jobs are entries of :data:`JOBS`; a test moves them on with :func:`finish`."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

from taobank.contract import Batch, Gate, Launch, Observation, Plan, Stop, SubmitOptions
from taobank.jobspec import JobSpec
from taobank.core.platform import Logs, Platform
from taobank.records import Record
from taobank.states import State

from . import INFO, flags

#: the toy's cluster: job id -> its state
JOBS: dict[str, State] = {}


def finish(job_id: str, state: str = "COMPLETE") -> None:
    """What the toy's scheduler does by itself: the job ends."""
    JOBS[job_id] = State(state)


@dataclass
class ToySpec(JobSpec):
    """Every shared field, checked by the toy's own schema (beside this file)."""

    SCHEMA: ClassVar[str] = str(Path(__file__).with_name("toy-job-spec.schema.json"))


class Toy(Platform[ToySpec, Plan]):
    info = INFO
    flags = flags
    spec_type = ToySpec
    holds_trials = False

    def plan(self, spec: ToySpec, opts: SubmitOptions, rec: Record | None) -> Plan:
        return Plan(spec=spec, image=spec.image or "toy:1", network_arch=spec.network_arch or "custom",
                    action=spec.action or "run", storage_tier="A", results_dir="/toy/{id}",
                    job_id=rec.id if rec else None)

    def cluster_key(self, plan: Plan) -> str:
        return "toy"

    def check(self, plans: list[Plan], gate: Gate, batch: Batch) -> None:
        gate.lines.append(f"toy: room for {len(plans)} job(s)")

    def launch(self, plans: list[Plan], recs: list[Record], batch: Batch) -> list[Launch]:
        out = []
        for rec in recs:
            JOBS[rec.id] = State.RUNNING
            out.append(Launch(backend_ref=f"toy/{rec.id}", backend={}, message=f"{rec.id} runs in memory"))
        return out

    def preview(self, spec: ToySpec, opts: SubmitOptions) -> str:
        return json.dumps(spec.to_dict(), sort_keys=True)

    def observe(self, recs: list[Record], *, context: dict[str, Any]) -> list[Observation]:
        return [Observation(job_id=rec.id, state=JOBS[rec.id]) for rec in recs if rec.id in JOBS]

    def stop(self, recs: list[Record], context: dict[str, Any]) -> list[Stop]:
        for rec in recs:
            JOBS[rec.id] = State.CANCELED
        return [Stop(job_id=rec.id) for rec in recs]

    def read_logs(self, rec: Record, *, tail: int | None) -> Logs:
        return Logs(rec.id, {"toy": f"{rec.id} is {JOBS.get(rec.id, 'gone')}\n"})

    def follow_logs(self, rec: Record, *, tail: int | None, emit: Callable[[str, str], None]) -> int:
        emit("toy", self.read_logs(rec, tail=tail).sections["toy"])
        return 0


PLATFORM = Toy()
