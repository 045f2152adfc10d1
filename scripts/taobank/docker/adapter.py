"""Docker's side of the platform contract: the hooks, over one module per verb and the engine's CLI."""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..contract import Gate, Launch, SubmitOptions
from ..platform import JobView, Logs, Platform
from . import cancel, facts, logs, observe, results_access, submit
from .submit import DockerPlan


def view(rec: Mapping[str, Any], **seen: Any) -> JobView:
    b = rec.get("backend") or {}
    code = b.get("exit_code")
    if b.get("results_dir"):
        seen.setdefault("results_dir", b["results_dir"])
    out = JobView.from_record(rec, observed=b.get("container_state"), reason=b.get("reason"),
                              exit_code=code if isinstance(code, int) else None, **seen)
    out.extra.setdefault("container", facts.container_of(rec))
    return out


class Docker(Platform):
    name = facts.PLATFORM
    helper = "tao_docker.py"
    results_access = results_access
    progress_in_sweep = True  # the results folder is local: the sweep reads every job's status files
    #: the engine chosen on the command line (--engine); None: $TAO_DOCKER_ENGINE or docker
    engine: str | None = None

    def view(self, rec: Mapping[str, Any]) -> JobView:
        return view(rec)

    def observe(self, recs: list[dict], *, retry: bool = True) -> list[JobView]:
        return [view(r) for r in observe.refresh(recs)]

    def read_logs(self, rec: dict, *, tail: int | None) -> Logs:
        sections, source = logs.read(rec, tail or int(facts.default("logs_tail")))
        return Logs(rec["id"], sections, source=source)

    def follow_logs(self, rec: dict, *, tail: int | None, emit: Callable[[str, str], None]) -> int:
        return logs.follow(rec, tail, emit)

    def read_status_files(self, rec: dict, *, live: bool) -> dict[str, str]:
        return observe.status_files(rec)

    def cancel_one(self, rec: dict, context: dict) -> JobView:
        return view(cancel.cancel(rec))

    # -- submit hooks (the order is the core's: Platform.submit)
    def plan(self, spec: dict, opts: SubmitOptions, rec: dict | None) -> DockerPlan:
        return submit.plan_submit(spec, opts, engine=self.engine, job_id=rec["id"] if rec else None)

    def cluster_key(self, plan: DockerPlan) -> str:  # type: ignore[override]
        return f"docker:{plan.host or 'local'}"

    def check(self, plan: DockerPlan, gate: Gate) -> None:  # type: ignore[override]
        submit.check(plan, gate)

    def adopt(self, plan: DockerPlan, rec: dict, gate: Gate) -> Launch | None:  # type: ignore[override]
        return submit.adopt(plan, rec, gate)

    def launch(self, plan: DockerPlan, rec: dict) -> Launch:  # type: ignore[override]
        return submit.launch(plan, rec)

    def preview(self, spec: dict, opts: SubmitOptions) -> str:
        return submit.preview(spec, opts, engine=self.engine)


PLATFORM = Docker()
