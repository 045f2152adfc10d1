"""SLURM's side of the platform contract: the hooks, over :mod:`.verbs` and one SSH connection."""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..platform import JobView, Logs, Platform
from . import verbs

DEFAULT_TAIL = 200


def view(rec: Mapping[str, Any], **seen: Any) -> JobView:
    b = rec.get("backend") or {}
    code = b.get("exit_code")
    if isinstance(code, str) and code.partition(":")[0].isdigit():
        code = int(code.partition(":")[0])  # sacct's "rc:signal"
    if b.get("results_dir"):
        seen.setdefault("results", b["results_dir"])  # the job's own folder (the record keeps the parent)
    return JobView.from_record(rec, observed=b.get("slurm_state"),
                               exit_code=int(code) if isinstance(code, int) else None, **seen)


class Slurm(Platform):
    name = verbs.PLATFORM

    def view(self, rec: Mapping[str, Any]) -> JobView:
        return view(rec)

    def observe(self, recs: list[dict], *, retry: bool = True) -> list[JobView]:
        return [view(r) for r in verbs.refresh(recs, retry=retry)]

    def read_logs(self, rec: dict, *, tail: int | None) -> Logs:
        out = verbs.logs(rec["id"], lines=tail or DEFAULT_TAIL)
        d = out["log_dir"]
        sections = {f"{d}/main.out": out["main.out"], f"{d}/main.err": out["main.err"]}
        if out.get("convert_log"):  # the image conversion job it waited for
            sections = {out["convert_log"]: out["convert"], **sections}
        return Logs(rec["id"], sections)

    def follow_logs(self, rec: dict, *, tail: int | None, emit: Callable[[str, str], None]) -> int:
        verbs.follow(rec["id"], on_chunk=emit, tail=tail)
        return 0  # like kubectl logs -f: the logs were read (status says how the job ended)

    def cancel_one(self, rec: dict, context: dict) -> JobView:
        if "conn" not in context:
            from .ssh import Connection

            context["conn"] = Connection()
        return view(verbs.cancel(rec["id"], conn=context["conn"]))

    def submit(self, spec: dict, options: Mapping[str, Any]) -> JobView:
        rec = verbs.submit(spec, description=options.get("description"),
                           skip_nccl_probe=bool(options.get("skip_nccl_probe")))
        b = rec["backend"]
        return view(rec, job_dir=b.get("job_dir"), log_dir=b.get("log_dir"))

    def preview(self, spec: dict, options: Mapping[str, Any]) -> str:
        return verbs.preview(spec, options.get("job_id") or "preview-job")

    def resume(self, job_id: str) -> JobView:
        from .ssh import Connection

        rec = verbs.resumable(job_id)  # refused before any connection when there is nothing to resume
        if (rec.get("backend") or {}).get("slurm_job_id"):
            return view(rec, message="already submitted: nothing to resume")
        return view(verbs.sbatch_record(Connection(), job_id))


PLATFORM = Slurm()
