"""Docker's side of the platform contract: the hooks, over one module per verb and the engine's CLI."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from ...contract import Batch, Gate, Launch, Observation, Stop, SubmitOptions, SweepPreview
from .spec import DockerSpec
from ...core.platform import JobView, Logs, Platform, ResultsAccess
from . import INFO, flags, submit
from . import engine as eng
from .submit import DockerPlan
from ...records import Record


class Docker(Platform[DockerSpec, DockerPlan]):
    info = INFO
    flags = flags

    @property
    def results_access(self) -> ResultsAccess:  # artifacts / fetch / prune (the verbs: taobank.campaign.results_verbs)
        from . import results_access

        return results_access

    progress_in_sweep = True  # the results folder is local: the sweep reads every job's status files
    #: the engine chosen on the command line (--engine); None: $TAO_DOCKER_ENGINE or docker
    engine: str | None = None
    spec_type = DockerSpec

    def typed_spec(self, mapping: Mapping[str, Any]) -> DockerSpec:
        from .spec import typed

        return typed(mapping)

    def typed_specs(self, mappings: Sequence[Mapping[str, Any]]) -> list[DockerSpec]:
        from .spec import typed_all

        return typed_all(mappings)

    def view(self, rec: Record) -> JobView:
        return self.views([rec])[0]

    def views(self, recs: Sequence[Record]) -> list[JobView]:
        facts = [eng.DockerFacts.of(r) for r in recs]
        out = JobView.of_backends(recs, "container_state", [{"reason": f.reason} for f in facts])
        for view, f in zip(out, facts):
            view.extra.setdefault("container", f.container)
        return out

    def observe(self, recs: list[Record], *, context: dict) -> list[Observation]:
        from . import observe

        return observe.observe(recs, context)

    def ended(self, recs: list[Record], context: dict, *, carried_on: frozenset[str] = frozenset()) -> dict[str, str]:
        from . import observe

        return observe.ended(recs, context)

    def read_logs(self, rec: Record, *, tail: int | None) -> Logs:
        from . import logs

        sections, source = logs.read(rec, tail or int(eng.default("logs_tail")))
        return Logs(rec.id, sections, source=source)

    def follow_logs(self, rec: Record, *, tail: int | None, emit: Callable[[str, str], None]) -> int:
        from . import logs

        return logs.follow(rec, tail, emit)

    def read_status_files(self, rec: Record, *, live: bool) -> dict[str, str]:
        """TAO's status files of the job's local results folder (the same reader script as the other platforms);
        read here, beside the record's facts, so a sweep's status walks through no more files than it must."""
        from ... import records
        from ...progress.remote import read_argv, split_files
        from ...run import run

        folder = eng.DockerFacts.of(rec).folder
        if not folder or folder == records.NO_RESULTS_DIR:
            return {}
        res = run(read_argv(folder), check=False, timeout=30, what="reading status files")
        return split_files(res.stdout) if res.ok else {}

    def read_search_file(self, rec: Record, path: str) -> str:
        from . import search

        return search.read_search_file(rec, path)

    def stop(self, recs: list[Record], context: dict) -> list[Stop]:
        from . import cancel

        return cancel.stop(recs)

    def release_pruned(self, rec: Record) -> str | None:
        from . import cancel

        return cancel.remove_finished(rec)

    def spec_text(self, spec: DockerSpec, path: str, opts: SubmitOptions) -> str | None:
        """The host file a bind mount (``--mount HOST:CONTAINER``) puts at the container's ``path``."""
        from ... import tao_spec_gate

        for mount in spec.mounts or []:
            inside, host = str(mount.get("container") or "").rstrip("/"), str(mount.get("host") or "")
            if inside and host and (path == inside or path.startswith(inside + "/")):
                return tao_spec_gate.local_file(host.rstrip("/") + path[len(inside):])
        return None

    def lineage_access(self, spec: DockerSpec, parent: Record, folder: str) -> DockerSpec:
        from .lineage_access import reachable

        return reachable(spec, parent, folder)

    # -- submit hooks (the order is the core's: Platform.submit)
    def plan(self, spec: DockerSpec, opts: SubmitOptions, rec: Record | None) -> DockerPlan:
        engine, host = self.engine, None
        if opts.continues:  # carry on where the job ran, reading its folder (the checkpoint is a host path in it)
            engine, host, spec = _continuing(spec, opts.continues, engine)
        return submit.plan_submit(spec, opts, engine=engine, job_id=rec.id if rec else None, engine_host=host)

    def plan_all(self, specs: list[DockerSpec], opts: SubmitOptions, rec: Record | None) -> list[DockerPlan]:
        if opts.continues or rec is not None:
            return super().plan_all(specs, opts, rec)
        return submit.plan_all(specs, opts, engine=self.engine)  # a sweep's trials share most of their plan

    def cluster_key(self, plan: DockerPlan) -> str:
        return f"docker:{plan.host or 'local'}"

    def check(self, plans: list[DockerPlan], gate: Gate, batch: Batch) -> None:
        if batch.sweep:  # each trial with a folder and GPUs of its own
            from . import sweep

            sweep.check(plans, batch.max_concurrent, gate)
        submit.check(plans, gate)
        if batch.search is not None and batch.sweep:  # after the image is there: its python3 is run once
            from . import search

            search.check_search(plans, gate, batch.sweep, batch.search)

    def adopt(self, plan: DockerPlan, rec: Record, gate: Gate) -> Launch | None:
        return submit.adopt(plan, rec, gate)

    def launch(self, plans: list[DockerPlan], recs: list[Record], batch: Batch) -> list[Launch]:
        return submit.launch(plans, recs, batch)

    def preview(self, spec: DockerSpec, opts: SubmitOptions) -> str:
        if opts.continues:
            _, _, spec = _continuing(spec, opts.continues, self.engine)
        return submit.preview(spec, opts, engine=self.engine)

    def preview_sweep(self, specs: list[DockerSpec], opts: SubmitOptions, ids: list[str], batch: Batch) -> SweepPreview:
        creates, start, folders, gpus = submit.preview_sweep(specs, ids, batch, opts, engine=self.engine)
        held = len(ids) - batch.max_concurrent
        then = (f"; the {held} held trial(s) are started by the sweep's detached supervisor (python3 -m taobank "
                "supervise) as slots free" if held > 0 else "")
        mine = "; each running trial gets GPUs of its own, read from the host at submit" if gpus else ""
        shared = [(f"start (after every create){then}{mine}", start)]
        if batch.search is not None and batch.sweep:
            shared.append(("search/study.json (beside search/search.pyz, the runner and Optuna; the folder mounted "
                           "at /tao-search)", batch.search.settings_text(batch.sweep)))
        return SweepPreview(shared=shared, trials=[[("create", c)] for c in creates], results_dirs=folders)

    # -- sweeps (the verbs: taobank.campaign.sweeps): a container per trial, the extra ones created and held
    holds_trials = True
    supervises_sweeps = True  # one host: a detached supervisor starts held trials (taobank.core.sweepsupervisor)
    runs_searches = True  # the search's folder on this host, mounted in every trial's container (docker.sweep)

    def release_trials(self, recs: list[Record]) -> None:
        from . import sweep

        sweep.release(recs)


def _continuing(spec: DockerSpec, job_id: str, engine: str | None) -> tuple[str | None, str | None, DockerSpec]:
    """(engine, its address, spec) of a job continuing ``job_id``: its engine unless --engine names one, and its
    results folder mounted, since the checkpoint the core resumes from is a path in it."""
    from ... import records
    from .lineage_access import with_folder

    rec = records.get(job_id)
    facts = eng.DockerFacts.of(rec)
    folder = facts.folder
    if folder and folder != records.NO_RESULTS_DIR:
        mounts = list(spec.mounts or [])
        reaching = with_folder(mounts, rec, folder)
        if reaching is not mounts:
            spec = replace(spec, mounts=reaching)
    if engine and eng.engine_name(engine) != eng.engine_of(rec):  # another engine: this shell's address
        return engine, None, spec
    return eng.engine_of(rec), facts.engine_host or None, spec


PLATFORM = Docker()
