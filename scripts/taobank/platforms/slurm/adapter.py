"""SLURM's side of the platform contract: the hooks, over one module per verb and one SSH connection."""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from ...contract import Batch, Gate, Launch, Observation, Stop, SubmitOptions, SweepPreview
from ...errors import TaoError, UsageError
from .spec import SlurmSpec
from ...core.platform import JobView, Logs, Platform, ResultsAccess
from . import INFO, flags, facts, resources, submit
from .submit import SlurmPlan
from ...records import Record

DEFAULT_TAIL = 200


class Slurm(Platform[SlurmSpec, SlurmPlan]):
    info = INFO
    flags = flags

    @property
    def results_access(self) -> ResultsAccess:  # artifacts / fetch / prune (the verbs: taobank.campaign.results_verbs)
        from . import results_access

        return results_access


    def view(self, rec: Record) -> JobView:
        seen: dict = {}
        try:
            b = facts.SlurmFacts.of(rec)
        except TaoError:  # a damaged record is still shown (status of it says what is wrong)
            b = facts.SlurmFacts()
        if b.walltime_chain:  # the wall-time chain: the attempt and the run time of the attempts before it
            seen = {"attempt": b.chain_attempt, "chain_seconds": b.chain_seconds, "max_attempts": b.max_attempts}
        return JobView.of_backend(rec, "slurm_state", **seen)

    def observe(self, recs: list[Record], *, context: dict) -> list[Observation]:
        from . import observe

        return observe.observe(recs, context)

    def ended(self, recs: list[Record], context: dict, *, carried_on: frozenset[str] = frozenset()) -> dict[str, str]:
        from . import observe

        return observe.ended(recs, context, carried_on)

    def max_retries(self) -> int:
        return facts.max_retries()

    def retry_backend(self, failed: Record, job_id: str, context: dict) -> dict:
        from . import observe

        return observe.retry_backend(failed, job_id, context)

    def relaunch(self, job_id: str, context: dict) -> Launch | None:
        from . import observe

        return observe.relaunch(job_id, context)

    def read_logs(self, rec: Record, *, tail: int | None) -> Logs:
        from . import logs

        out = logs.logs(rec.id, lines=tail or DEFAULT_TAIL)
        d = out["log_dir"]
        sections = {f"{d}/main.out": out["main.out"], f"{d}/main.err": out["main.err"]}
        if out.get("convert_log"):  # the image conversion job it waited for
            sections = {out["convert_log"]: out["convert"], **sections}
        if out.get("prefetch_log"):  # the CPU-only prefetch job it waited for
            sections = {out["prefetch_log"]: out["prefetch"], **sections}
        return Logs(rec.id, sections)

    def follow_logs(self, rec: Record, *, tail: int | None, emit: Callable[[str, str], None]) -> int:
        from . import logs

        logs.follow(rec.id, on_chunk=emit, tail=tail)
        return 0  # like kubectl logs -f: the logs were read (status says how the job ended)

    progress_in_sweep = True  # the one sweep command reads every job's status files
    runs_searches = True  # the sweep's folder on the shared filesystem holds the study (taobank.platforms.slurm.sweep)

    def read_status_files(self, rec: Record, *, live: bool) -> dict[str, str]:
        from . import logs

        return logs.status_files(rec)

    def read_search_file(self, rec: Record, path: str) -> str:
        from . import logs

        return logs.search_file(rec, path)

    def stop(self, recs: list[Record], context: dict) -> list[Stop]:
        from . import cancel, observe

        return cancel.stop(recs, observe.connection(context))

    # -- submit hooks (the order is the core's: Platform.submit)
    spec_type = SlurmSpec

    def typed_spec(self, mapping: Mapping[str, Any]) -> SlurmSpec:
        from .spec import typed

        return typed(mapping)

    def plan(self, spec: SlurmSpec, opts: SubmitOptions, rec: Record | None) -> SlurmPlan:
        if rec is not None:
            raise UsageError(f"to finish an interrupted SLURM submit run tao_slurm.py resume {rec.id}")
        if opts.continues:  # the same spec files as the job it continues, or a refusal
            from . import continued

            continued.check(spec, opts.continues)
        return submit.plan_submit(spec, os.environ if opts.env is None else opts.env, opts.connection,
                                  need_secrets=opts.credential_values)

    def cluster_key(self, plan: SlurmPlan) -> str:
        assert plan.decided is not None
        return resources.cluster_key(plan.decided.spec, plan.env)

    def check(self, plans: list[SlurmPlan], gate: Gate, batch: Batch) -> None:
        submit.check(plans, gate)
        if batch.search is not None:
            from . import sweep

            sweep.check_search_site(plans[0], gate, batch.search)

    def launch(self, plans: list[SlurmPlan], recs: list[Record], batch: Batch) -> list[Launch]:
        """One job: its folder staged and sbatched; a sweep: ONE job array over every trial's staged script."""
        if batch.sweep is None and len(plans) == 1:
            return [submit.launch_one(plans[0], recs[0], batch)]
        from . import sweep

        return sweep.launch(plans, recs, batch)

    def with_time_limit(self, spec: SlurmSpec, minutes: float) -> SlurmSpec:
        from dataclasses import replace

        # the wall time, one spelling; an explicit in-job timeout goes back to its default share of it
        return replace(spec, time=None, time_hours=None, time_minutes=minutes,
                       timeout_hours=None if spec.timeout_hours else spec.timeout_hours)

    def spec_text(self, spec: SlurmSpec, path: str, opts: SubmitOptions) -> str | None:
        """The local file of an upload the command names as ``{specs}/NAME`` (``spec_files``)."""
        from ... import tao_spec_gate
        from .uploads import PLACEHOLDER

        name = path[len(PLACEHOLDER) + 1:] if path.startswith(PLACEHOLDER + "/") else None
        local = (spec.spec_files or {}).get(name) if name else None
        return tao_spec_gate.local_file(str(local)) if local else None

    def lineage_access(self, spec: SlurmSpec, parent: Record, folder: str) -> SlurmSpec:
        from .lineage_access import reachable

        return reachable(spec, parent, folder)

    def preview(self, spec: SlurmSpec, opts: SubmitOptions) -> str:
        if opts.continues:
            from . import continued

            continued.check(spec, opts.continues)
        return submit.preview(spec, opts.job_id or "preview-job", opts.env)

    def preview_sweep(self, specs: list[SlurmSpec], opts: SubmitOptions, ids: list[str], batch: Batch) -> SweepPreview:
        from . import sweep

        array, trials, folders = sweep.preview(specs, ids, batch, opts.env)
        shared = [("array.sbatch (sbatch --parsable; SLURM runs at most "
                   f"{batch.max_concurrent} tasks at once)", array)]
        if batch.search is not None:  # staged beside the array with it (the bundle's bytes are not shown)
            shared.append(("search/study.json (beside search/search.pyz, the runner and Optuna)",
                           batch.search.settings_text(batch.sweep)))
        return SweepPreview(shared=shared, trials=[[t] for t in trials], results_dirs=folders)


PLATFORM = Slurm()
