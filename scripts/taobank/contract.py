"""The typed values that pass between the core and a platform adapter.

The core owns the order of a submit (:meth:`taobank.core.platform.Platform.submit`);
an adapter only fills in what differs. These are the shapes both sides agree
on, so an adapter never receives a loose mapping of options.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, BinaryIO, Callable, ContextManager, Mapping, Protocol

from .jobspec import JobSpec
from .states import State


@dataclass(frozen=True)
class SubmitOptions:
    """How to submit, beyond the job spec itself (the same fields on every platform).

    A field a platform has no use for is ignored there (``namespace`` on SLURM,
    ``connection`` on Kubernetes); the CLI offers only the flags a platform reads.
    """

    #: a record opened earlier (``tao_job_record.py open``): finish that one, never a second job
    job_id: str | None = None
    description: str | None = None
    skip_nccl_probe: bool = False
    #: this submit is the NCCL probe itself: it needs no probe verdict and is never retried
    probe: bool = False
    require_free: bool = False
    #: credentials: names of variables of this process, and/or a mode-600 KEY=VALUE file
    secret_env: tuple[str, ...] = ()
    secrets_file: str | None = None
    ngc_pull_secret: bool = False
    #: a staged config file (action request, config mode): {"text", "mount_path", "key"?, "sha256"?}
    config: Mapping[str, Any] | None = None
    #: Kubernetes: where to submit (None: TAO_K8S_NAMESPACE / TAO_K8S_CONTEXT, or the record's own)
    namespace: str | None = None
    context: str | None = None
    #: SLURM: the settings (os.environ when None) and an open connection to reuse
    env: Mapping[str, str] | None = None
    connection: Any = None
    #: lineage (taobank.campaign.lineage): the job whose results this one uses / the job it continues
    parent: str | None = None
    continues: str | None = None
    #: check each TAO job's experiment spec and overrides against the pinned TAO's schema before anything is
    #: created (taobank.tao_spec_gate); False: --no-spec-check (a TAO the bank does not know, a site's own build)
    spec_check: bool = True
    #: False: a dry run without --check plans (its preview names the credentials, never shows them, and needs
    #: none set): a platform that would read a value to plan (SLURM's prefetch keys) leaves it unread
    credential_values: bool = True


@dataclass
class Plan:
    """What a submit decided before any cluster call; a platform subclasses it with its own facts."""

    #: the job's typed spec (the platform's :class:`taobank.jobspec.JobSpec`)
    spec: JobSpec
    image: str
    network_arch: str
    action: str
    storage_tier: str
    #: the job's own results folder; ``{id}`` stands for the job id until the record is opened
    results_dir: str
    nodes: int = 1
    #: the record's backend facts known before launch (namespace, partition ...)
    backend: dict[str, Any] = field(default_factory=dict)
    #: the id the record will get (minted up front so names can be rendered once), or None
    job_id: str | None = None
    #: files the platform keeps beside the record (name: text, secret-free), written by the core with the saved
    #: spec before the launch (the Kubernetes spec its logs and results readers mount the job's volumes by)
    kept: dict[str, str] = field(default_factory=dict)


@dataclass
class Gate:
    """What the read-only checks before a launch found: report lines and facts for the record."""

    lines: list[str] = field(default_factory=list)
    backend: dict[str, Any] = field(default_factory=dict)
    #: a dry run (``submit --dry-run``): the same read-only checks, but nothing that changes state (no pull, no
    #: login); what a check left out for that goes to ``skipped`` (said in the dry run's first line)
    dry_run: bool = False
    skipped: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "; ".join(line for line in self.lines if line)

    def notes(self) -> list[str]:
        """The lines a user must see even under --quiet/--json: ``queued: ...``, ``note: ...`` and ``warning: ...``."""
        return [line for line in self.lines if line.startswith(("queued: ", "note: ", "warning: "))]


def _no_checkpoint(job_id: str, message: str, backend: Mapping[str, Any]) -> None:
    return None


@dataclass
class Batch:
    """How the jobs of one launch run together; a single job is a batch of one."""

    #: how many of the jobs run at once (the others are created held, or the scheduler throttles them)
    max_concurrent: int = 1
    #: the sweep id the jobs share (labels, the array's name); None for a single job
    sweep: str | None = None
    #: the core's writer for what a launch has done before it ends (a SLURM job folder staged), so a
    #: launch that dies half-way leaves a record that can be finished: ``checkpoint(job_id, message, backend)``
    checkpoint: Callable[[str, str, Mapping[str, Any]], None] = _no_checkpoint
    #: a search's staging (:class:`taobank.campaign.search.bundle.Staging`), None for any other batch: the adapter stages
    #: ``search.files(sweep)`` in a folder every trial shares and runs ``search.wrap(argv, folder, trial)``
    search: Any = None


@dataclass
class Facts:
    """A platform's typed backend facts for the record, written out as the record's ``backend`` map by
    :meth:`to_dict` (field order; a field left :data:`UNSET` is left out, None is kept)."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: v for f in fields(self) for v in [getattr(self, f.name)] if v is not UNSET}


@dataclass
class Launch:
    """What a platform created: the core binds it to the record."""

    backend_ref: str
    #: the record's backend facts: a platform's typed :class:`Facts`, or a map of a few keys
    backend: dict[str, Any] | Facts
    message: str
    #: facts to show with the new job (uid, reconciled, job_dir ...)
    details: dict[str, Any] = field(default_factory=dict)
    #: the job exists and the record is bound to it, but it cannot run as it is: what to do (raised after binding)
    error: str | None = None

    def facts(self) -> dict[str, Any]:
        """The backend facts as the record keeps them."""
        return self.backend.to_dict() if isinstance(self.backend, Facts) else self.backend


class _Unset:
    """The value of a :class:`Shown` field the platform did not set (None is a value: it is shown)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass
class Shown:
    """What a job's view shows from one poll or stop beyond its record, never stored (the same fields on every
    platform). A field set replaces the view's own (None included); one left :data:`UNSET` leaves it. The core
    lays it over the view (:mod:`taobank.core.track`): the view's fields by name, the others into its extra facts, in
    this order."""

    observed: str | None = UNSET
    reason: str | None = UNSET
    message: str | None = UNSET
    exit_code: int | None = UNSET
    #: how the training goes (:func:`taobank.core.training.progress_of`)
    progress: dict[str, Any] | None = UNSET
    #: Kubernetes: the pods' summaries, the pods run so far
    pods: list[dict[str, Any]] = UNSET
    pod_attempts: int = UNSET
    #: a stop: whether the job's object was deleted
    deleted: bool = UNSET

    def items(self) -> list[tuple[str, Any]]:
        """The fields set, by name, in field order."""
        return [(f.name, getattr(self, f.name)) for f in fields(self) if getattr(self, f.name) is not UNSET]


@dataclass(frozen=True)
class TaoEnd:
    """How the latest run in TAO's status file ended: its last word."""

    #: "SUCCESS" (TAO's "<Action> finished successfully." or "<NAME> <action> completed successfully" line) or
    #: "FAILURE"
    status: str
    message: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"status": self.status, "message": self.message}


@dataclass
class Observation:
    """What the backend says of one job, mapped to the bank's states (the same type on every platform).

    An adapter only reads the platform and says what it saw; the core applies the one transition rule
    (:func:`taobank.states.next_move`), writes the record, and opens an infrastructure retry when ``retry``
    says so (:mod:`taobank.core.track`)."""

    state: State
    message: str = ""
    err_class: str | None = None
    #: the backend's short why (a Kubernetes condition reason, a SLURM pending reason)
    reason: str | None = None
    #: the backend's own state word (SLURM: RUNNING, TIMEOUT ...; Kubernetes: None, ``reason`` says it)
    observed: str | None = None
    exit_code: int | None = None
    #: the signal that ended the program, when the backend tells it
    signal: int | None = None
    #: an infrastructure failure worth a resubmit
    retry: bool = False
    #: the verdict may change once the job's log tail is read
    needs_log: bool = False
    #: Kubernetes: the pod whose failure decided it, the pods' summaries, the pods run so far
    failed_pod: str | None = None
    pods: list[dict[str, Any]] = field(default_factory=list)
    pod_attempts: int = 0
    #: the job (record id) this is about; set by the adapter's ``observe`` for the core
    job_id: str | None = None
    #: backend facts the core merges into the record (None values are dropped)
    backend: dict[str, Any] = field(default_factory=dict)
    #: the backend reference the record now follows (a job that resubmitted itself under the same record)
    backend_ref: str | None = None
    #: what the view shows beyond the record (pods, progress, the backend's own reason ...), never stored
    view: Shown = field(default_factory=Shown)
    #: False: the platform could not be asked about this job; the record stays as it is, ``view`` says why
    asked: bool = True
    #: keep the recorded message while the state holds when it contains this text (see ``states.next_move``)
    keep_if: str | None = None
    #: the job ended because it was cut short, not by itself: "time limit" or "preempted" (``states.CUT_SHORT``);
    #: the core adds the one ``continue`` hint to the record's message (``states.continue_hint``)
    cut_short: str | None = None
    #: how TAO's status file says the run ended, when the adapter read it (:func:`taobank.core.training.tao_end`):
    #: TAO's last word decides a clean exit (:mod:`taobank.core.track`)
    tao_end: TaoEnd | None = None

    @property
    def exit_status(self) -> str | None:
        """``rc:signal`` as SLURM's accounting writes it (what a SLURM record keeps), or None."""
        return None if self.exit_code is None else f"{self.exit_code}:{self.signal or 0}"


@dataclass
class SweepPreview:
    """What a sweep's submit would send, rendered by the adapter contacting nothing: the documents sent once
    for the whole sweep (an array script, one Job, a start command) and each trial's own (its manifest, script
    or run command; none when the shared ones carry every trial), as ``(name, text)``, and where each trial's
    results would go."""

    shared: list[tuple[str, str]]
    trials: list[list[tuple[str, str]]]
    results_dirs: list[str]


#: What stopping one job did (``Stop.outcome``): the core marks CANCELED, or the real end for ``ended``.
STOP_OUTCOMES = ("stopped", "gone", "never_launched", "ended")


@dataclass
class Stop:
    """What an adapter's ``stop`` did to one job; the core marks the record (:func:`taobank.core.track.cancel`)."""

    job_id: str
    #: stopped / gone (already gone) / never_launched / ended (it really ended first: ``state`` says how)
    outcome: str = "stopped"
    #: the record's message
    message: str = ""
    #: ``ended`` only: COMPLETE or ERROR (and its err_class)
    state: State | None = None
    err_class: str | None = None
    #: backend facts the core merges into the record
    backend: dict[str, Any] = field(default_factory=dict)
    #: the cancel line's message when it says more than the record's (a cleanup note), else None
    said: str | None = None
    #: what the view shows beyond the record (``deleted`` ...)
    view: Shown = field(default_factory=Shown)
    #: stopping failed: one line a user can act on; the record stays as it is
    error: str | None = None

    @property
    def final(self) -> State:
        """The state the record gets."""
        if self.outcome == "ended" and self.state is not None:
            return self.state
        return State.CANCELED


@dataclass(frozen=True)
class Finding:
    """One preflight check's result (the same on every platform): ``level`` is OK, INFO, WARN or MISSING;
    a MISSING finding fails the preflight."""

    level: str
    check: str
    message: str
    #: lines that follow the first one in the text output (commands to run, one node per line ...)
    details: tuple[str, ...] = ()
    #: the same facts, structured, for ``--json``
    data: Any = None

    def line(self) -> str:
        return f"{self.level}: {self.message}"

    def lines(self) -> list[str]:
        """The finding as printed: its one line, then each detail indented."""
        return [self.line(), *(f"  {d}" for d in self.details)]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"level": self.level, "check": self.check, "message": self.message}
        if self.details:
            out["details"] = list(self.details)
        if self.data is not None:
            out["data"] = self.data
        return out


def preflight_ok(findings: list[Finding]) -> bool:
    """A preflight passes when nothing is MISSING."""
    return not any(f.level == "MISSING" for f in findings)


# ------------------------------------------------------------------ a job's results (artifacts, fetch, prune)
#: The one variable that names a job's own results folder inside its container, on every platform. TAO's own
#: pair (``TAO_API_RESULTS_DIR`` the parent, ``TAO_API_JOB_ID`` the folder's name) is set beside it as an alias.
RESULTS_VAR = "RESULTS_DIR"

#: What counts as a checkpoint in a results folder (by file name ending, case-insensitive): the one list.
CHECKPOINT_SUFFIXES = (".pth", ".ckpt", ".pt", ".tlt", ".hdf5", ".onnx", ".engine")


def is_checkpoint(path: str) -> bool:
    return path.lower().endswith(CHECKPOINT_SUFFIXES)


@dataclass(frozen=True)
class ResultFile:
    """One regular file in a job's results folder, as the cluster saw it."""

    #: relative to the job's results folder ("train/model_epoch_004.pth")
    path: str
    size: int
    #: modification time, seconds since the epoch (UTC)
    mtime: float
    #: computed on the cluster when asked (fetch); None in a plain listing
    sha256: str | None = None
    #: S3 only: the object's ETag when it is a plain MD5 (single-part upload), for verification
    md5: str | None = None

    @property
    def checkpoint(self) -> bool:
        return is_checkpoint(self.path)

    def to_dict(self) -> dict[str, Any]:
        from datetime import datetime, timezone

        when = datetime.fromtimestamp(self.mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        out: dict[str, Any] = {"path": self.path, "size": self.size, "mtime": self.mtime, "modified": when,
                     "checkpoint": self.checkpoint}
        if self.sha256 is not None:
            out["sha256"] = self.sha256
        return out


@dataclass(frozen=True)
class ResultsLocation:
    """Where a job's results are, as the platform reads it from the record (no cluster call)."""

    #: as a user sees it: the folder in the pod or on the cluster, or the s3:// URI
    folder: str
    #: the job's own folder, named after its id: prune may delete it
    own: bool
    #: when not ``own``: why prune refuses (one clause)
    why_not_own: str = ""


@dataclass
class ResultsListing:
    """A results folder read in one remote command: its files and TAO's status files (for the best checkpoint)."""

    folder: str
    files: list[ResultFile] = field(default_factory=list)
    #: relative path -> text of status.json / <action>/status.json (empty unless asked)
    status_files: dict[str, str] = field(default_factory=dict)
    #: False when the folder does not exist (not written yet, or pruned)
    exists: bool = True
    #: False for a folder prune --yes deletes without listing it first (its files are not known)
    listed: bool = True
    #: symbolic links whose target is a regular file inside the folder: link path -> target path (both relative)
    links: dict[str, str] = field(default_factory=dict)
    #: files whose names no line or local path may carry (a newline, backslash or control character): not listed,
    #: but said (a newline or backslash shown as "?")
    left_out: list[str] = field(default_factory=list)


class Transfer(Protocol):
    """What the core hands a platform's fetch: told the files before any byte moves, then each file's bytes,
    block by verified block (written under a temp name, renamed when whole: a rerun resumes)."""

    def start(self, files: list[ResultFile], links: dict[str, str] | None = None) -> None:
        """The files the cluster is about to send (with its sizes): the core refuses here, before the transfer
        (an existing file without --force, nothing to fetch). ``links``: the folder's symbolic links among the
        paths asked (link path -> target path, both relative; TAO's ``*_latest.pth``), made again here."""

    def have(self, file: ResultFile) -> int | None:
        """Verified bytes of ``file`` kept from an earlier run (send from there); None: it is here whole already."""

    def part(self, file: ResultFile, offset: int) -> ContextManager[BinaryIO]:
        """The file's temp copy, cut to ``offset`` and open for writing there."""

    def verified(self, file: ResultFile, upto: int) -> None:
        """Bytes [0, upto) of the temp copy match what was read on the cluster (a rerun resumes there)."""

    def link(self, file: ResultFile, source: str, source_fd: int) -> bool:
        """The file's temp copy made a hard link to ``source``, which must still be the open ``source_fd`` (a
        finished job's file on this host: the same bytes, none copied); False when the filesystem refuses or the
        path now leads to another file (copy it instead)."""

    def finish(self, file: ResultFile, how: str) -> None:
        """The whole file arrived verified (``how``: what was checked): it gets its final name."""

    def discard(self, file: ResultFile) -> None:
        """Nothing of the file is kept (it changed while being fetched)."""

    def note(self, text: str) -> None:
        """Something the user should know that does not stop the fetch."""

    def advance(self, done: int) -> None:
        """Bytes of file content received so far in this run (the progress line)."""


__all__ = ["RESULTS_VAR", "SubmitOptions", "SweepPreview", "Plan", "Gate", "Facts", "Launch", "UNSET", "Shown", "Observation", "STOP_OUTCOMES", "Stop", "Finding", "preflight_ok", "CHECKPOINT_SUFFIXES", "is_checkpoint", "ResultFile",
           "ResultsLocation", "ResultsListing", "Transfer"]
