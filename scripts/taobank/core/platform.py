"""The platform contract: what a platform supplies, and the verbs the core runs over it.

Kubernetes and SLURM differ in how a job is launched, observed, read and
stopped; everything else is common and lives here, once:

* loading a record for a verb (another platform's record is refused in one line),
* choosing the records of a verb (ids given, ``--all``, or every active one),
* the watch loop (backoff, retry chains followed, one progress line per job change),
* terminal-state handling and the exit-code rule; what an observation or a stop does to a record is
  :mod:`taobank.core.track`'s (adapters never write records).

* the order of a submit: plan, NCCL gate, checks, open the record, launch, mark.

A platform is a :class:`Platform` subclass that fills in the hooks: for
submit ``plan`` (``plan_all``: a launch's jobs at once, by default each planned alone), ``check``, ``launch``
(and ``adopt``, ``cluster_key``,
``preview``), then ``observe`` (and ``ended``, ``relaunch`` for retries), ``read_logs``, ``follow_logs``
and ``stop``, and for a job's results ``results_location``, ``list_results``,
``fetch_results`` and ``remove_results`` (answered by default from the module a
platform names as ``results_access``; those verbs are :mod:`taobank.campaign.results_verbs`).
The values they exchange are typed (:mod:`taobank.contract`).
:func:`get` routes a platform name to its adapter through the one registry (:mod:`taobank.registry`),
imported only when used (a SLURM verb never imports the Kubernetes code).
"""
from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Generic, Mapping, Protocol, Sequence, TypeVar

from ..states import State
from .. import records, registry, states
from ..text import one_line
from .record_selection import by_platform as by_platform, last_id as last_id, load_for as load_for, select as select
from ..contract import (Batch, Gate, Launch, Observation, Plan, ResultFile, ResultsListing, ResultsLocation, Stop,
                        SubmitOptions, SweepPreview, Transfer)
from ..errors import EXIT_FAILED, EXIT_OK, TaoError, UsageError
from ..jobspec import Declarations
from ..jobspec import JobSpec
from ..records import Record
from ..registry import PlatformInfo


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


@dataclass
class JobView:
    """One job as every verb reports it, whatever the platform (``--json`` prints ``to_dict()``)."""

    id: str
    platform: str
    state: str
    err_class: str | None = None
    message: str | None = None
    backend_ref: str | None = None
    attempt: int = 1
    retry_of: str | None = None
    #: lineage: the job whose results it uses (submit --parent), the job it continues (continue ID)
    parent: str | None = None
    continues: str | None = None
    network_arch: str = ""
    action: str = ""
    description: str | None = None
    results_dir: str | None = None
    created_at: str = ""
    updated_at: str = ""
    #: when the job was first seen RUNNING / reached its end (run_times); the table's DURATION
    started_at: str | None = None
    ended_at: str | None = None
    #: what the backend said this time (None when it was not asked)
    observed: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    backend: dict[str, Any] = field(default_factory=dict)
    #: how the training goes (epoch, ETA, latest KPIs; ``line`` its short form), when TAO's status file was read
    progress: dict[str, Any] | None = None
    #: platform facts worth showing (pods, saved_logs, ...), merged into to_dict()
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_record(cls, rec: Record | Mapping[str, Any], **seen: Any) -> "JobView":
        r = rec if isinstance(rec, Record) else Record.of(rec)
        return cls._built(r, run_times(r), seen)

    @classmethod
    def _built(cls, r: Record, times: tuple[str | None, str | None], seen: Mapping[str, Any]) -> "JobView":
        """The view of ``r`` (``times``: its :func:`run_times`) with ``seen`` laid over it."""
        started, ended = times
        view = cls(
            id=r.id, platform=r.platform, state=r.state, err_class=r.err_class, message=r.message,
            backend_ref=r.backend_ref, attempt=int(r.attempt or 1), retry_of=r.retry_of, parent=r.parent,
            continues=r.continues, network_arch=r.network_arch, action=r.action, description=r.description,
            results_dir=r.results_dir, created_at=r.created_at, updated_at=r.updated_at, started_at=started,
            ended_at=ended, backend=dict(r.backend), progress=None)
        for key, value in seen.items():
            if hasattr(view, key) and key != "extra":
                setattr(view, key, value)
            else:
                view.extra[key] = value
        return view

    @classmethod
    def of_backend(cls, rec: Record | Mapping[str, Any], observed_key: str, **seen: Any) -> "JobView":
        """The view where the record's ``backend`` keeps what the platform last said (``observed_key``), the
        exit code (a number, or accounting's ``rc:signal``) and the job's own results folder."""
        return cls.of_backends([rec], observed_key, [seen])[0]

    @classmethod
    def of_backends(cls, recs: Sequence[Record | Mapping[str, Any]], observed_key: str,
                    seen: Sequence[Mapping[str, Any]] | None = None) -> list["JobView"]:
        """:meth:`of_backend` of several records (``seen``: each one's facts), in one step for all."""
        typed = [r if isinstance(r, Record) else Record.of(r) for r in recs]
        times = [run_times(r) for r in typed]
        out = []
        for r, when, facts in zip(typed, times, seen if seen is not None else [{} for _ in typed]):
            b = r.backend or {}
            code = b.get("exit_code")
            if isinstance(code, str) and code.partition(":")[0].isdigit():
                code = int(code.partition(":")[0])
            shown = {"observed": b.get(observed_key), "exit_code": code if isinstance(code, int) else None, **facts}
            if b.get("results_dir"):  # the job's own folder (records made before it was the top-level value kept the parent)
                shown.setdefault("results_dir", b["results_dir"])
            out.append(cls._built(r, when, shown))
        return out

    @property
    def terminal(self) -> bool:
        return self.state in states.TERMINAL

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "extra"}
        out.update(self.extra)
        return out

    def line(self) -> str:
        """The one-line text form: ``ID STATE (ERR_CLASS) observed=X: message``."""
        extra = f" ({self.err_class})" if self.err_class else ""
        obs = f" observed={self.observed}" if self.observed and self.observed != self.state else ""
        att = f" attempt={self.attempt}" if self.attempt > 1 else ""
        ref = f" ref={self.backend_ref}" if self.backend_ref else ""
        where = self._where()
        text = f"{self.id} {self.state}{extra}{att}{ref}{obs}{where}: {self.message or ''}".rstrip(": ").rstrip()
        if self.progress and self.progress.get("line"):
            text += f" [{self.progress['line']}]"
        return one_line(text)

    def _where(self) -> str:
        """Where a finished job left its results; a job run with --no-results says so instead of /dev/null."""
        if self.state != State.COMPLETE:
            return ""
        folder = self.extra.get("results") or self.results_dir
        if folder == records.NO_RESULTS_DIR:
            return " (no results)"
        return f" results={folder}" if folder else ""


@dataclass
class Logs:
    """What ``logs`` returns: named sections (one per pod set or per stream) in order."""

    id: str
    sections: dict[str, str]
    source: str = "live"  # or "saved" when read from the copy kept after the job ended

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "sections": self.sections}


class ResultsAccess(Protocol):
    """What a platform's results module (``Platform.results_access``) has; ``list_results_many`` and
    ``remove_files`` are optional (looked up by name)."""

    def location(self, rec: Record) -> ResultsLocation: ...

    def list_results(self, rec: Record, loc: ResultsLocation, *, status: bool) -> ResultsListing: ...

    def fetch_results(self, rec: Record, loc: ResultsLocation, paths: list[str], into: Path,
                      transfer: Transfer) -> list[ResultFile]: ...

    def remove_results(self, rec: Record, loc: ResultsLocation) -> str: ...


SpecT = TypeVar("SpecT", bound=JobSpec)
PlanT = TypeVar("PlanT", bound=Plan)


class Platform(ABC, Generic[SpecT, PlanT]):
    """The hooks a platform implements; the core verbs below do the rest. ``SpecT``: its typed job spec;
    ``PlanT``: what its ``plan`` decides, which its ``check``, ``launch`` and ``adopt`` read."""

    #: who the platform is (its package's ``INFO``: name, helper, aliases, host client)
    info: PlatformInfo

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A platform that says who it is in its class body (``info = INFO``) has its ``name`` as a plain class
        attribute (read per record by the core: no call each time); one that sets ``info`` later keeps
        :attr:`name` below."""
        super().__init_subclass__(**kwargs)
        info = cls.__dict__.get("info")
        if isinstance(info, PlatformInfo):
            setattr(cls, "name", info.name)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def helper(self) -> str:
        """The helper a user runs for this platform (named in hints)."""
        return self.info.helper

    def view(self, rec: Record) -> JobView:
        """The view of a record as stored (no backend call); platforms add their facts."""
        return JobView.from_record(rec)

    def views(self, recs: Sequence[Record]) -> list[JobView]:
        """:meth:`view` of each record (a status's batch); a platform may build them in one step."""
        return [self.view(rec) for rec in recs]

    @abstractmethod
    def observe(self, recs: list[Record], *, context: dict[str, Any]) -> list[Observation]:
        """Ask the backend about the active ``recs`` (one batched query) and say what it saw, one
        :class:`Observation` per job it could tell something about (``job_id`` set); never write a record.
        ``context`` is shared with the ``ended``/``relaunch`` calls of the same status (an open connection,
        what the query found that the cleanup needs)."""

    def ended(self, recs: list[Record], context: dict[str, Any], *, carried_on: frozenset[str] = frozenset()) -> dict[str, str]:
        """Clean up after the jobs of one status that have just ended (as the core marked them): save their
        final logs, release what they held, in as few calls as the platform can; a note per job id for its
        status line. ``carried_on``: ids whose infrastructure retry goes on with what they staged. Default:
        nothing to do."""
        return {}

    def max_retries(self) -> int:
        """How many infrastructure retries a job may get (``Observation.retry``); 0: the platform has none."""
        return 0

    def retry_backend(self, failed: Record, job_id: str, context: dict[str, Any]) -> dict[str, Any]:
        """The backend facts the retry record ``job_id`` of ``failed`` opens with (what ``relaunch`` reads)."""
        raise TaoError(f"{self.name} jobs are not resubmitted after an infrastructure failure")

    def relaunch(self, job_id: str, context: dict[str, Any]) -> Launch | None:
        """Launch the record ``job_id`` whose job does not exist yet: an infrastructure retry the core opened,
        or a submit whose answer was lost (``resume``). Looks before it creates anything, never twice; None
        when the job exists already. The core binds the launch to the record."""
        raise TaoError(f"{self.name} jobs are not relaunched by the bank (no resume, no infrastructure retry)")

    @abstractmethod
    def read_logs(self, rec: Record, *, tail: int | None) -> Logs:
        """The last ``tail`` lines (platform default when None) of the job's output."""

    @abstractmethod
    def follow_logs(self, rec: Record, *, tail: int | None, emit: Callable[[str, str], None]) -> int:
        """Stream output as it comes (``emit(section, text)``) until the job ends; the exit code."""

    @abstractmethod
    def stop(self, recs: list[Record], context: dict[str, Any]) -> list[Stop]:
        """Stop the active ``recs`` (one job, or a sweep's trials in as few calls as the platform can) and say
        per job what happened; never write a record (the core marks CANCELED, or the real end). ``context``
        is shared by the calls of one ``cancel``. A failure of one job is its ``Stop.error``."""

    #: whether ``observe`` reads TAO's status files in its one batched query (progress for every job at no cost)
    progress_in_sweep: bool = False

    def read_status_files(self, rec: Record, *, live: bool) -> dict[str, str]:
        """The job's TAO status files, ``{path relative to its results folder: text}`` (empty: none yet).
        ``live``: only if the running job can be asked cheaply (one call); else by any means the platform has
        (a finished job's volume, say). Raise TaoError with what is needed when it cannot be read."""
        raise TaoError(f"reading training progress is not supported on {self.name}")

    def read_search_file(self, rec: Record, path: str) -> str:
        """The text of one file of the search ``rec`` is a trial of (``path``: absolute, in the folder its trials
        share, ``rec.backend["search_dir"]``): the study's journal; "" when it does not exist yet. One call."""
        raise TaoError(f"reading a search's study is not supported on {self.name}")

    def clean_finished(self, rec: Record, context: dict[str, Any]) -> str | None:
        """Remove what a finished job still holds (its credentials) when ``cancel`` names it; a note for the
        cancel line, or None when there was nothing to do. The default holds nothing."""
        return None

    def release_pruned(self, rec: Record) -> str | None:
        """What ``prune`` releases of a finished job once its results went: what :meth:`clean_finished` does, and
        on Docker its exited container (a call per job, so not on every cancel of a finished sweep)."""
        return self.clean_finished(rec, {})

    def lineage_access(self, spec: SpecT, parent: Record, folder: str) -> SpecT:
        """``spec`` of a child job (``submit --parent``) able to read the parent's results ``folder`` (as the
        parent saw it). Default: unchanged (the folder is on storage every job of the platform sees)."""
        return spec

    def lineage_fetch(self, spec: SpecT, job: Record, folder: str, files: dict[str, str],
                      replaces: Sequence[str] = ()) -> tuple[SpecT, dict[str, str]]:
        """``job``'s results are in object storage (``folder`` is an ``s3://`` prefix, no job can mount it):
        ``spec`` of a new job that downloads ``files`` (name -> path inside ``folder``) before it runs, and
        where each lands as that job sees it; an earlier download to a path in ``replaces`` (the checkpoint
        a continued job resumed from) is dropped. Default: refused in one line."""
        raise TaoError(f"job {job.id} keeps its results in {folder}, and {self.name} jobs cannot download them: "
                       "fetch the checkpoint (tao_jobs.py fetch) and put it where the job can read it")

    def spec_text(self, spec: SpecT, path: str, opts: SubmitOptions) -> str | None:
        """The text of the TAO spec file the job's command names as ``path`` (``-e path``), read where this
        machine can read it, for the core's spec check (:mod:`taobank.tao_spec_gate`); None when it cannot (a path
        inside the container). Default: None."""
        return None

    # -------------------------------------------------------------- submit: the core owns the order

    def submit(self, mapping: dict[str, Any], opts: SubmitOptions) -> JobView:
        """One job: the core's one submit order (:func:`taobank.core.pipeline.submit`) over a batch of one. ``mapping``:
        the spec as given (flags, a file, a saved spec), typed by that order after its spec check (the one edge
        where a mapping enters: :meth:`typed_specs`)."""
        from . import pipeline

        done = pipeline.submit(self, [mapping], opts)
        view: JobView = done.views[0]
        view.extra["gate"] = done.gate.text()
        view.extra["gate_notes"] = done.gate.notes()
        return view

    #: the platform's typed spec (:mod:`taobank.jobspec`)
    spec_type: type[SpecT]
    #: its submit flags as data (its ``flags`` module: :mod:`taobank.jobspec`), which the command line reads
    flags: Declarations

    def typed_spec(self, mapping: Mapping[str, Any]) -> SpecT:
        """A spec as stored or given (a file, flags, a sweep trial) checked and typed: the edge where it enters
        the contract (:func:`taobank.core.pipeline.submit`, a preview). Default: the schema's check, then the type.
        Every other hook takes and returns the typed spec; ``to_dict()`` gives the mapping back."""
        return self.spec_type.parse(mapping, "job spec")

    def typed_specs(self, mappings: Sequence[Mapping[str, Any]]) -> list[SpecT]:
        """:meth:`typed_spec` of each spec of one launch (a sweep's trials), in order, refused at the first spec
        it refuses. Default: one by one; an adapter may check them all in one pass."""
        return [self.typed_spec(mapping) for mapping in mappings]

    @abstractmethod
    def plan(self, spec: SpecT, opts: SubmitOptions, rec: Record | None) -> PlanT:
        """Decide everything a submit can without a cluster call for the typed ``spec`` (:meth:`typed_spec`
        checked it; ``rec``: the record being finished, or None)."""

    def plan_all(self, specs: list[SpecT], opts: SubmitOptions, rec: Record | None) -> list[PlanT]:
        """The plans of every job of one launch (a sweep's trials), in order. Default: :meth:`plan` of each; an
        adapter whose jobs share most of their plan (trials differ in their overrides) decides that part once."""
        return [self.plan(spec, opts, rec) for spec in specs]

    def adopt(self, plan: PlanT, rec: Record, gate: Gate) -> Launch | None:
        """A record being finished whose job exists already (an earlier submit died after creating it):
        its launch, so nothing is created twice (what was done goes to ``gate``); None when there is none.
        Default: never."""
        return None

    @abstractmethod
    def cluster_key(self, plan: PlanT) -> str:
        """Which cluster (and partition) the job would run on: the NCCL probe verdicts are kept per key."""

    @abstractmethod
    def check(self, plans: list[PlanT], gate: Gate, batch: Batch) -> None:
        """The read-only cluster checks before any record (capacity, permissions, paths) of the jobs of one
        launch (a sweep's trials differ only in their overrides): raise to refuse, add report lines and
        record facts to ``gate``; a platform may bind each job to a slot of ``batch.max_concurrent``."""

    @abstractmethod
    def launch(self, plans: list[PlanT], recs: list[Record], batch: Batch) -> list[Launch]:
        """Create the jobs of the opened records (``recs[i]`` is ``plans[i]``'s; one job or a sweep alike),
        at most ``batch.max_concurrent`` running at once; one Launch each. On failure remove what was made,
        then raise. Never writes a record: facts to keep before it ends go to ``batch.checkpoint``."""

    def with_secret(self, spec: SpecT, opts: SubmitOptions, name: str) -> tuple[SpecT, SubmitOptions]:
        """``spec`` and ``opts`` with one more secret the job's processes get by ``name`` (as ``--secret-env
        name`` would give it): the spec's ``secrets`` list here (SLURM, Docker); Kubernetes keeps secrets in
        ``opts.secret_env``."""
        return replace(spec, secrets=list(dict.fromkeys([*(spec.secrets or []), name]))), opts

    def with_time_limit(self, spec: SpecT, minutes: float) -> SpecT:
        """``spec`` with its run-time limit set to ``minutes`` (``continue --time-*``: more time for a job that
        ran out of it). Default: refused, the platform has no limit to set."""
        raise TaoError(f"{self.name} jobs have no time limit: continue without --time-hours/--time-minutes")

    def with_queue(self, spec: SpecT, queue: str) -> SpecT:
        """``spec`` sent to the scheduler's queue ``queue`` (``continue --queue``). Default: refused, the platform
        has no queues the bank names."""
        raise UsageError(f"--queue is not an option of {self.name} jobs (Kubernetes' Kueue queues are)")

    def resume(self, job_id: str) -> JobView:
        """``resume``: :meth:`relaunch`, and the record bound to what it found or made (by the core)."""
        from . import pipeline

        view: JobView = pipeline.relaunch(self, job_id)
        return view

    @abstractmethod
    def preview(self, spec: SpecT, opts: SubmitOptions) -> str:
        """What submit would send (manifest or script text), contacting nothing."""

    def preview_sweep(self, specs: list[SpecT], opts: SubmitOptions, ids: list[str], batch: Batch) -> SweepPreview:
        """What a sweep's submit would send for the trials ``specs`` (ids ``ids``, ``batch.sweep`` the sweep's),
        rendered by the functions its launch uses, contacting nothing; refused as that submit would be. The
        trial table is the core's (:func:`taobank.campaign.sweeps.preview`)."""
        raise TaoError(f"a sweep preview is not available on {self.name}: submit one trial with --dry-run")

    # -------------------------------------------------------------- sweeps (the verbs: taobank.campaign.sweeps)
    #: trials are created held and released by the core as slots free (else the platform limits them itself)
    holds_trials: bool = False
    #: held trials are started by a detached supervisor on this machine (the machine the jobs run on)
    supervises_sweeps: bool = False
    #: a sweep's launch stages ``Batch.search`` in a folder its trials share and wraps their commands
    #: (``submit --search``: taobank.campaign.search)
    runs_searches: bool = False
    def release_trials(self, recs: list[Record]) -> None:
        """Let these held trials run (one call for all); only for ``holds_trials`` platforms."""
        raise TaoError(f"{self.name} does not hold sweep trials")

    def read_status_many(self, recs: list[Record]) -> dict[str, dict[str, str]]:
        """TAO's status files of several running jobs, ``{id: {path: text}}``, in as few calls as the platform
        can (default: one read per job)."""
        return {Record.of(rec).id: self.read_status_files(rec, live=True) for rec in recs}

    # -------------------------------------------------------------- results: artifacts, fetch, prune
    # The verbs (validation, best checkpoint, verification, temp + rename, confirmation) are the core's:
    # taobank.campaign.results_verbs. A platform only reads, streams and removes the folder, in a module of its own
    # with the functions location, list_results, fetch_results and remove_results (``results_access``).
    @property
    def results_access(self) -> ResultsAccess | None:
        """The platform's results module (None: its jobs keep no results the bank reads); a property, so the
        module is imported only by the verbs that read results."""
        return None

    def _results(self, rec: Record, what: str) -> ResultsAccess:
        if self.results_access is None:
            raise TaoError(f"job {Record.of(rec).id}: {what} is not available for {self.name or 'this platform'} jobs")
        return self.results_access

    def results_location(self, rec: Record) -> ResultsLocation:
        """Where the job's results are (no cluster call); TaoError when it keeps none that can be read."""
        return self._results(rec, "reading results").location(rec)

    def list_results(self, rec: Record, loc: ResultsLocation, *, status: bool) -> ResultsListing:
        """Every regular file of the folder, in ONE remote command; with ``status`` TAO's status files too."""
        return self._results(rec, "listing results").list_results(rec, loc, status=status)

    def list_results_many(self, recs: list[Record], locs: list[ResultsLocation], *,
                          status: bool) -> list[ResultsListing | TaoError]:
        """Several jobs' folders (a sweep's trials), in order; a folder that could not be listed is its TaoError.
        One command where the platform's results module can (``list_results_many``), else one per folder."""
        many = getattr(self._results(recs[0], "listing results"), "list_results_many", None) if recs else None
        if many is not None:
            listed: list[ResultsListing | TaoError] = many(recs, locs, status=status)
            return listed
        out: list[ResultsListing | TaoError] = []
        for rec, loc in zip(recs, locs):
            try:
                out.append(self.list_results(rec, loc, status=status))
            except TaoError as exc:
                out.append(exc)
        return out

    def fetch_results(self, rec: Record, loc: ResultsLocation, paths: list[str], into: Path,
                      transfer: Transfer) -> list[ResultFile]:
        """Download the regular files under ``paths`` (relative, checked; [] = all) into the empty private
        folder ``into``: ``transfer.start(files)`` once the cluster has listed them, ``transfer.advance(n)``
        as bytes arrive. Returns the cluster's facts of each file (size, sha256 or md5), which the core
        verifies against what arrived."""
        return self._results(rec, "fetching results").fetch_results(rec, loc, paths, into, transfer)

    def remove_results(self, rec: Record, loc: ResultsLocation) -> str:
        """Delete the job's own folder after checking on the cluster that it is a folder named as recorded;
        a note for the prune line."""
        return self._results(rec, "pruning results").remove_results(rec, loc)

    def remove_files(self, rec: Record, loc: ResultsLocation, delete: list[str], keep: dict[str, int]) -> list[ResultFile]:
        """``prune --keep``: delete the files ``delete`` (relative) of the job's own folder in ONE command, after
        checking on the cluster that each ``keep`` file is there at its listed size (else nothing is deleted);
        the kept files' facts (size, sha256) read after the deletion."""
        remove = getattr(self._results(rec, "pruning checkpoints"), "remove_files", None)
        if remove is None:
            raise TaoError(f"job {Record.of(rec).id}: deleting single checkpoints is not available for {self.name} results")
        kept: list[ResultFile] = remove(rec, loc, delete, keep)
        return kept

#: The adapter of platform ``name`` (``k8s`` is accepted for kubernetes): the registry's own look-up.
get = registry.adapter


def status(platform: str | None, ids: list[str] | None = None, *, retry: bool = True) -> list[JobView]:
    """Refresh the chosen records (terminal ones are shown as stored) with one query per platform."""
    return refresh(select(platform, ids, "status"), retry=retry)


def refresh(recs: list[Record], *, retry: bool = True) -> list[JobView]:
    """Observe the active ``recs`` (one query per platform) and apply what was seen (:func:`taobank.core.track.refresh`);
    their views in order, retries opened now after them. One platform that cannot be asked does not hide the
    others: its jobs are shown as stored with the reason."""
    from . import track

    recs = [r if isinstance(r, Record) else Record.of(r) for r in recs]
    views: dict[str, JobView] = {}
    groups = by_platform(recs)
    for name, group in groups.items():
        adapter = get(name)
        ended = {r.id for r in group if r.terminal}
        active = [r for r in group if r.id not in ended]
        for view in adapter.views([r for r in group if r.id in ended]) if ended else ():  # as stored; an active
            views[view.id] = view  # one's is the refresh's
        if active:
            try:
                seen = track.refresh(adapter, active, retry=retry)
            except TaoError as exc:
                if len(groups) == 1:
                    raise
                seen = [JobView.from_record(r, reason="QueryFailed", message=str(exc)) for r in active]
            for view in seen:
                views[view.id] = view
    order = [r.id for r in recs]
    return [views[i] for i in order] + [v for i, v in views.items() if i not in set(order)]


def superseded(view: JobView, views: list[JobView]) -> bool:
    """A failed attempt whose retry is among ``views`` (the chain goes on)."""
    return any(v.retry_of == view.id for v in views)


def finished(views: list[JobView]) -> bool:
    return all(v.terminal for v in views if not superseded(v, views))


def changed_lines(views: list[JobView], shown: dict[str, str]) -> list[str]:
    """The watch progress: the line of each job whose line changed since it was last shown (``shown``,
    id -> line, is updated), so several jobs print one line per job change, never a bare count."""
    now = {v.id: v.line() for v in views} if views else {"": "no active jobs"}
    fresh = [line for key, line in now.items() if shown.get(key) != line]
    shown.update(now)
    return fresh


def watch(platform: str | None, ids: list[str] | None, *, on_line: Callable[[str], None], retry: bool = True,
          first: float = 5.0, cap: float = 60.0, sleep: Callable[[float], None] = time.sleep,
          max_unknown: int = 10, deadline: float | None = None,
          poll: Callable[..., list[JobView]] | None = None) -> list[JobView]:
    """Poll until every watched job is terminal; no overall time cap (queue waits are normal).

    The delay starts at ``first`` seconds and doubles up to ``cap`` while
    nothing changes; a change resets it. Retries are followed. A job the
    backend cannot see for ``max_unknown`` polls in a row ends the watch
    (it is reported, never marked, so the record stays the source of truth).
    ``deadline`` (seconds) bounds the watch for callers that must give up
    (the NCCL probe); the views are returned as they are then. ``poll(platform, ids, retry=)``: what refreshes
    the jobs (:func:`status` unless a campaign layer adds to it).
    """
    poll = poll or status
    end = None if deadline is None else time.monotonic() + deadline
    if not (math.isfinite(first) and math.isfinite(cap) and first > 0 and cap > 0):
        raise UsageError("--interval must be a positive number of seconds")
    cap = max(cap, first)  # never poll faster than asked
    watched = _with_retries([r.id for r in select(platform, ids, "status")], platform)
    shown: dict[str, str] = {}  # id -> the line last printed for it
    delay, unknown_polls = first, 0
    while True:
        views = poll(platform, watched, retry=retry)
        for v in views:  # follow retry chains
            if v.retry_of in watched and v.id not in watched:
                watched.append(v.id)
        views = [v for v in views if v.id in watched]
        fresh = changed_lines(views, shown)
        for line in fresh:
            on_line(line)
        delay = first if fresh else min(cap, delay * 2)
        if finished(views):
            return views
        live = [v for v in views if not superseded(v, views) and not v.terminal]
        unknown_polls = unknown_polls + 1 if live and all(_unseen(v) for v in live) else 0
        if unknown_polls >= max_unknown:
            on_line(f"stopped watching: the backend has not seen {', '.join(v.id for v in live)} for "
                    f"{unknown_polls} polls (never launched, job gone, or cluster unreachable); check it "
                    "(tao_jobs.py status ID) and finish or cancel it")
            return views
        if end is not None and time.monotonic() >= end:
            return views
        sleep(delay if end is None else max(0.0, min(delay, end - time.monotonic())))


#: What a backend says of a job that is still there, only waiting (an UNKNOWN record stays UNKNOWN then).
_WAITING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED"}


def _unseen(view: JobView) -> bool:
    """The backend cannot tell us anything about this job: it vanished, or was never launched."""
    return not view.backend_ref or (view.state == State.UNKNOWN and view.observed not in _WAITING)


def _with_retries(ids: list[str], platform: str | None) -> list[str]:
    """``ids`` plus every retry descending from them (a poll before the watch may have resubmitted one)."""
    children: dict[str, list[str]] = {}
    for rec in records.find(platform=platform):
        if rec.retry_of:
            children.setdefault(rec.retry_of, []).append(rec.id)
    out = list(ids)
    for jid in out:  # grows while iterating: follows whole chains
        out += [c for c in children.get(jid, []) if c not in out]
    return out


def watch_exit_code(views: list[JobView]) -> int:
    """1 when a watched job ended in ERROR (and no retry took over) or was left unresolved; else 0."""
    for v in views:
        if superseded(v, views):
            continue
        if v.state == State.ERROR or not v.terminal:
            return EXIT_FAILED
    return EXIT_OK


def _check_tail(tail: int | None) -> None:
    if tail is not None and tail < 1:
        raise UsageError("--tail must be a positive number of lines")


def logs(platform: str | None, job_id: str, *, tail: int | None = None) -> Logs:
    _check_tail(tail)
    rec = load_for(job_id, platform, "logs")
    return get(rec.platform).read_logs(rec, tail=tail)


def follow(platform: str | None, job_id: str, *, tail: int | None, emit: Callable[[str, str], None]) -> int:
    _check_tail(tail)
    rec = load_for(job_id, platform, "logs")
    return get(rec.platform).follow_logs(rec, tail=tail, emit=emit)


def cancel(platform: str | None, ids: list[str] | None, *, all_active: bool = False,
           batch: bool = False) -> tuple[list[JobView], list[str]]:
    """Cancel the given jobs (or every active one with ``all_active``); (views, one-line errors). ``batch``: the
    active ones of each platform in one adapter ``stop`` (a sweep's trials), else one by one.

    A job already terminal is reported as it is; one failure does not stop
    the others (its error line is returned and the verb exits 1).
    """
    from . import track

    if not ids and not all_active:
        raise UsageError("cancel needs job ids or --all")
    recs = select(platform, ids, "cancel", all_active=all_active)
    if ids:  # a retry carries on for a failed job: cancelling the job stops the whole chain
        chosen = {r.id for r in recs}
        recs += [r for i in _with_retries(list(chosen), platform) if i not in chosen
                 for r in [records.get(i)] if not r.terminal]
    views: list[JobView] = []
    errors: list[str] = []
    contexts: dict[str, dict[str, Any]] = {}
    active: dict[str, list[Record]] = {}
    for rec in recs:
        try:
            adapter = get(rec.platform)
            if rec.terminal:
                views.append(track.already_ended(adapter, rec, contexts.setdefault(rec.platform, {})))
                continue
            active.setdefault(rec.platform, []).append(rec)
        except TaoError as exc:
            errors.append(f"{rec.id}: {exc}")
    for name, group in active.items():  # one batch per platform (a sweep's trials: one scancel, one delete)
        seen, failed = track.stop(get(name), group, contexts.setdefault(name, {}), batch=batch)
        views += seen
        errors += failed
    order = {r.id: i for i, r in enumerate(recs)}
    views.sort(key=lambda v: order.get(v.id, len(order)))
    return views, errors
