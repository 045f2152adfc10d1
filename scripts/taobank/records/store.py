"""Where records live and how they are read and written: one JSON file per job in the state folder, read as
typed values (:class:`Record`, what code reads instead of ``rec["..."]``).

* Location: ``$TAO_STATE_DIR`` or ``${XDG_STATE_HOME:-~/.local/state}/tao-skill-bank/jobs``;
  the folder is mode 700, every file 600 whatever the umask.
* Writes are atomic (temp file in the same folder, fsync, rename, fsync of the
  folder): a writer killed at any point leaves the old or the new record.
* A read-modify-write holds an exclusive ``fcntl`` lock on ``<id>.lock`` (:func:`state_lock`), so
  concurrent marks from many processes lose no transition.
* Every write and every read is checked by :mod:`.shape` (the schema and the transition table).
* One job's results folder against the other records' (a prune of one job must never delete another's):
  :func:`refuse_nested` when a job opens, :func:`records_inside` when one is pruned.
* A new id is linked into place with ``os.link`` (fails if the name exists), so
  a colliding id is minted again, never overwritten.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping, Sequence, cast

from .. import fsio, names, registry, states
from ..errors import TaoError
from ..redact import shown
from ..states import State
from . import shape
from .shape import folder_of, within

STATE_DIR_ENV = "TAO_STATE_DIR"
_MAX_RECORD_BYTES = 4 * 1024 * 1024
#: each record file's text as last read and found whole, or as written after the same verdict: a verb reads a
#: record several times (status, its sweep, its view), and the same bytes need no second check
_WHOLE: dict[str, bytes] = {}


# ---------------------------------------------------------------- the record as typed values (what a read gives)
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

    #: derived from ``state`` when the record is made (not stored): it has ended / it may still change
    terminal: bool = field(init=False, repr=False, compare=False)
    active: bool = field(init=False, repr=False, compare=False)

    #: written only when set (a record without them is valid as it is)
    OPTIONAL: ClassVar[tuple[str, ...]] = ("parent", "continues", "sweep", "trial", "overrides")

    @classmethod
    def of(cls, rec: "Mapping[str, Any] | Record") -> "Record":
        """A stored record (a mapping the store read and checked) as typed values (a Record as it is)."""
        if isinstance(rec, Record):
            return rec
        known = {f.name for f in fields(cls) if f.init}
        values: dict[str, Any] = {k: (tuple(v) if k == "transitions" else v) for k, v in rec.items() if k in known}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The record as the store writes it."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        out["transitions"] = [dict(t) for t in self.transitions]
        return {k: v for k, v in out.items() if not (k in self.OPTIONAL and v is None)}

    def __post_init__(self) -> None:
        object.__setattr__(self, "terminal", self.state in states.TERMINAL)
        object.__setattr__(self, "active", self.state in states.ACTIVE)


# ---------------------------------------------------------------- paths
def _state_path() -> Path:
    """Where the record folder is (``$TAO_STATE_DIR``, else under ``$XDG_STATE_HOME``), made or not."""
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env).expanduser().absolute()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return (Path(base) / "tao-skill-bank" / "jobs").absolute()


def state_dir() -> Path:
    """The record folder: created mode 700 when new; an existing one is used as it is, never chmod-ed.

    Refused when another user owns it or when it is group/world-writable
    (anyone could then plant or swap records there, e.g. ``TAO_STATE_DIR=/tmp``).
    """
    d = _state_path()
    try:
        if not d.exists():
            d.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            d.mkdir(mode=0o700, exist_ok=True)
        st = d.stat()
    except OSError as exc:
        raise TaoError(f"cannot use state directory {d}: {exc.strerror}: set {STATE_DIR_ENV} to a writable folder") from None
    if not stat.S_ISDIR(st.st_mode):
        raise TaoError(f"state directory {d} is not a folder: set {STATE_DIR_ENV} to a folder of your own")
    if st.st_uid != os.getuid():
        raise TaoError(f"state directory {d} belongs to another user: set {STATE_DIR_ENV} to a folder of your own")
    if st.st_mode & 0o022:
        raise TaoError(f"state directory {d} is writable by others (mode {oct(st.st_mode & 0o777)}): "
                       f"chmod 700 {d}, or set {STATE_DIR_ENV} to a private folder")
    return d


class UnknownJob(TaoError):
    """No job of this machine's records goes by ``word``: no record has that id (:class:`NoRecord`), or the word is
    no job id at all (:class:`NotAJobId`). A verb that knows what it was asked may say what the word is instead
    (a sweep's id, a job's backend id: :func:`taobank.core.record_selection.explained`)."""

    def __init__(self, message: str, word: str) -> None:
        super().__init__(message)
        self.word = word


class NoRecord(UnknownJob):
    """The word is a job id, but no record of the state folder has it."""


class NotAJobId(UnknownJob):
    """The word is not a job id (a DNS-1035 label of at most :data:`names.MAX_ID_LEN`)."""


#: Where a user finds a job's id (what an unknown id's line says).
WHERE_IDS_ARE = "a job's id is the one submit printed (dino-train-1a2b3c4d), and tao_jobs.py list shows each job's under ID"


def check_id(job_id: str) -> str:
    """``job_id`` when it is a job id (a DNS-1035 label of at most :data:`names.MAX_ID_LEN`); else :class:`NotAJobId`."""
    if not isinstance(job_id, str) or not names.JOB_ID.match(job_id):
        raise NotAJobId(f"{shown(job_id)} is not a job id: {WHERE_IDS_ARE}", str(job_id))
    return job_id


def record_path(job_id: str) -> Path:
    return state_dir() / f"{check_id(job_id)}.json"


def artifact_dir(job: str | Record) -> Path:
    """Mode-700 folder beside the record for saved logs and other artifacts of the job (never a symlink); a job
    given by its id has its record read first (a folder only for a job that exists), a Record in hand does not."""
    got = artifact_dirs([job])[0]
    if isinstance(got, TaoError):
        raise got
    return got


def artifact_dirs(jobs: Sequence[str | Record]) -> list[Path | TaoError]:
    """:func:`artifact_dir` of each job in order (a sweep's trials), the records of those given by id read in
    one pass; the list ends at the first job :func:`artifact_dir` refuses, with its one-line TaoError."""
    ids = [j for j in jobs if isinstance(j, str)]
    read = iter(get_each(ids) if ids else [])  # only for jobs that exist
    out: list[Path | TaoError] = []
    for job in jobs:
        try:
            got = next(read) if isinstance(job, str) else job
            if isinstance(got, TaoError):
                raise got
            out.append(_artifact_dir(state_dir() / f"{got.id}.d"))
        except TaoError as exc:
            out.append(exc)
            break
    return out


def _artifact_dir(d: Path) -> Path:
    try:
        d.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise TaoError(f"{d} is not a plain folder (a symlink or a file): remove it; the bank never follows links there")
    if st.st_mode & 0o077:
        os.chmod(d, 0o700)  # our own folder (checked above): keep its logs private
    return d


# ---------------------------------------------------------------- the lock
@contextmanager
def state_lock(name: str) -> Iterator[None]:
    """Held (an exclusive ``flock``) across every process on this machine while the block runs: the lock file
    ``name`` in the state folder, a plain file the bank made (never a link)."""
    path = state_dir() / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise TaoError(f"{path} is a symlink: remove it; the bank never follows links in its state folder") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TaoError(f"{path} is not a plain file: remove it")
    try:
        os.fchmod(fd, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def locked(job_id: str) -> AbstractContextManager[None]:
    """The lock every read-modify-write of ``job_id``'s record holds."""
    return state_lock(f"{job_id}.lock")


@contextmanager
def locked_each(job_ids: list[str]) -> Iterator[None]:
    """:func:`locked` of every one of ``job_ids`` at once (a batch's read-modify-write), taken in the order of
    the ids: two processes that lock batches that overlap never wait on each other in a circle."""
    with ExitStack() as stack:
        for job_id in sorted(set(job_ids)):
            stack.enter_context(locked(job_id))
        yield


# ---------------------------------------------------------------- writes
def now() -> str:
    """A record's time stamp (UTC, microseconds)."""
    return datetime.now(timezone.utc).strftime(_STAMP)


_STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"


def stamps(n: int) -> list[str]:
    """``n`` time stamps as :func:`now` gives them, each later than the one before: the records of a batch,
    stamped together, keep their order when sorted by time (as records stamped one by one did)."""
    out: list[str] = []
    last = None
    for _ in range(n):
        at = datetime.now(timezone.utc)
        if last is not None and at <= last:
            at = last + timedelta(microseconds=1)
        out.append(at.strftime(_STAMP))
        last = at
    return out


def _encoded(rec: dict[str, Any]) -> bytes:
    return (json.dumps(rec, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def replace(job_id: str, rec: dict[str, Any]) -> None:
    """Write ``rec`` over the record of ``job_id`` (checked first; atomic; the caller holds :func:`locked`)."""
    replace_each([(job_id, rec)])


def replace_each(recs: list[tuple[str, dict[str, Any]]]) -> None:
    """:func:`replace` of each ``(job id, record)`` in order (the caller holds their locks): all checked in one
    call, then written in one call; a record the check rejects raises once the ones before it are written."""
    _, refused = _write_each(recs, new=False)
    if refused is not None:
        raise refused


def create(job_id: str, rec: dict[str, Any]) -> bool:
    """Put a new record in place unless the id exists (False then). Never overwrites."""
    made, refused = _write_each([(job_id, rec)], new=True)
    if refused is not None:
        raise refused
    return made == 1


def create_each(recs: list[dict[str, Any]]) -> tuple[int, TaoError | None]:
    """:func:`create` of each record under its id, in order, never over a record that exists: (how many were put in
    place, the one-line TaoError of the record the check rejected). All checked in one call, then written in one
    call, up to the first record whose id exists or that the check rejects (None: the batch stopped at an id that
    exists, or made all)."""
    return _write_each([(rec["id"], rec) for rec in recs], new=True)


def _write_each(recs: list[tuple[str, dict[str, Any]]], *, new: bool) -> tuple[int, TaoError | None]:
    if not recs:
        return 0, None
    verdicts = shape.validate_each([(rec, job_id) for job_id, rec in recs])
    good = next((n for n, v in enumerate(verdicts) if isinstance(v, TaoError)), len(recs))
    d = state_dir()
    datas = [_encoded(rec) for _, rec in recs[:good]]
    made = fsio.write_each(d, [(f"{job_id}.json", f".{job_id}.", data) for (job_id, _), data in zip(recs, datas)],
                           new=new)
    for (job_id, _), data, whole in zip(recs[:made], datas, verdicts):
        if whole:  # these bytes were checked as a read checks them: a read of them by this process needs no second check
            _WHOLE[str(d / f"{job_id}.json")] = data
    bad = verdicts[good] if made == good and good < len(recs) else None
    return made, bad if isinstance(bad, TaoError) else None


def sweep_temps(job_id: str, min_age_s: float = 60.0) -> None:
    """Remove temp files of writers killed mid-write (called under the record's lock)."""
    import time

    cutoff = time.time() - min_age_s
    for tmp in state_dir().glob(f".{job_id}.*.tmp"):
        try:
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink()
        except FileNotFoundError:
            pass


# ---------------------------------------------------------------- reads
def read(path: Path) -> dict[str, Any]:
    """A record file: a regular file (no symlink, no FIFO) holding a whole record (:func:`shape.damage`)."""
    got = read_each([path])[0]
    if isinstance(got, TaoError):
        raise got
    return got


def read_each(paths: list[Path]) -> list[dict[str, Any] | TaoError]:
    """:func:`read` of each record file (a batch's), one call: the record, or the one-line TaoError a read of
    it alone raises."""
    return _wholes(fsio.read_json_each(paths, "job record", max_bytes=_MAX_RECORD_BYTES, follow_links=False,
                                       missing_ok=True))


def _wholes(reads: list[tuple[Path, fsio.JsonRead | TaoError]]) -> list[dict[str, Any] | TaoError]:
    """The records :func:`fsio.read_json_each` read (path, what it read), each checked (those not already found whole
    in these very bytes by the shape's check, all in one call): the record, or a TaoError naming what is wrong."""
    out: list[dict[str, Any] | TaoError] = []
    todo: list[tuple[int, bytes]] = []  # (where in out, the bytes read)
    for path, got in reads:
        if isinstance(got, TaoError):
            out.append(TaoError(f"{got}: remove or restore it"))
            continue
        raw, rec, unparsed = got
        if raw is None:
            out.append(NoRecord(f"no job record {path.stem} in {path.parent}: see 'tao_jobs.py list'", path.stem))
        elif _WHOLE.get(str(path)) == raw:  # these very bytes were found whole already: no second check
            out.append(cast(dict[str, Any], rec))
        elif unparsed is not None:
            out.append(TaoError(f"{unparsed}: restore it or remove it"))
        else:
            todo.append((len(out), raw))
            out.append(cast(dict[str, Any], rec))  # the schema found a JSON object (checked just below)
    problems = shape.damage_each([(out[k], reads[k][0].stem) for k, _ in todo]) if todo else []
    for (k, raw), problem in zip(todo, problems):
        path = reads[k][0]
        if problem:
            out[k] = TaoError(f"job record {path} is damaged ({problem}): restore it or remove it")
        else:
            _WHOLE[str(path)] = raw
    return out


def load(job_id: str) -> dict[str, Any]:
    """The record of ``job_id`` (TaoError if there is none)."""
    return read(record_path(job_id))


def get(job_id: str) -> Record:
    """The record of ``job_id`` as typed values (TaoError if there is none)."""
    return Record.of(load(job_id))


def get_each(job_ids: list[str]) -> list[Record | TaoError]:
    """:func:`get` of each job (a batch's), its records read in one pass: the record, or the one-line TaoError
    :func:`get` of it raises."""
    paths: list[Path | TaoError] = []
    for job_id in job_ids:
        try:
            paths.append(record_path(job_id))
        except TaoError as exc:
            paths.append(exc)
    read = iter(read_each([p for p in paths if isinstance(p, Path)]))
    out: list[Record | TaoError] = []
    for p in paths:
        got = p if isinstance(p, TaoError) else next(read)
        out.append(got if isinstance(got, TaoError) else Record.of(got))
    return out


def list_records(platform: str | None = None, state: str | None = None, active: bool = False,
                 problems: list[str] | None = None, sweep: str | None = None) -> list[dict[str, Any]]:
    """Records, oldest first, filtered by platform, state and/or activity.

    A damaged or foreign file never hides the other jobs: it is skipped and,
    when ``problems`` is given, described there (one line each).
    """
    plat = (platform if platform in registry.PACKAGES else registry.canonical(platform)) if platform else None
    st = states.canonical_state(state) if state else None
    out = []
    files = [f for f in state_dir().glob("*.json") if names.DNS1035_LABEL.match(f.stem)]
    # every file read in one call (the same checks as read(): a regular file, no link, bounded)
    for f, rec in zip(files, _wholes(fsio.read_json_each(files, "job record", max_bytes=_MAX_RECORD_BYTES,
                                                         follow_links=False, missing_ok=True))):
        if isinstance(rec, TaoError):
            if f.exists() or f.is_symlink():  # not merely removed while listing
                if problems is not None:
                    problems.append(str(rec))
            continue
        if plat and rec.get("platform") != plat:
            continue
        if st and rec.get("state") != st:
            continue
        if active and rec.get("state") not in states.ACTIVE:
            continue
        if sweep and rec.get("sweep") != sweep:
            continue
        out.append(rec)
    out.sort(key=lambda r: (r.get("created_at", ""), r.get("id", "")))
    return out


def find(platform: str | None = None, state: str | None = None, active: bool = False,
         problems: list[str] | None = None, sweep: str | None = None) -> list[Record]:
    """:func:`list_records` as typed values."""
    return [Record.of(r) for r in list_records(platform, state, active, problems, sweep)]



# ---------------------------------------------------------------- results folders against the other records
def refuse_nested(folders: list[tuple[str, str]], platform: str) -> None:
    """A new job's results folder (``(folder, job id)``) may neither lie inside another record's folder nor hold
    one: ``prune`` of the outer job would delete the inner job's results (one pass over the records for all
    ``folders``). Only a folder named after its job can be pruned, so only such an outer folder counts. No record
    folder yet: no record, nothing to refuse (and none is made: a dry run checks this, and makes nothing)."""
    if not _state_path().exists():
        return
    others = [(r, folder_of(r)) for r in list_records(platform=platform)]
    for new, new_id in folders:
        for r, old in others:
            if not old or new.rstrip("/") == old:
                continue  # the same folder: a retry carries on in its parent's
            if within(new, old) and old.rsplit("/", 1)[-1] == r["id"]:
                raise TaoError(f"results folder {new} lies inside job {r['id']}'s folder {old}: pruning that job "
                               "would delete it; choose a folder outside every job's folder")
            if within(old, new) and new.rstrip("/").rsplit("/", 1)[-1] == new_id:
                raise TaoError(f"results folder {new} holds job {r['id']}'s folder {old}: choose a folder that holds "
                               "no other job's results")


def records_inside(folder: str, platform: str, besides: str) -> list[dict[str, Any]]:
    """The records (other than ``besides``) whose results lie in ``folder`` (inside it, or the same folder)."""
    return [r for r in list_records(platform=platform) if r["id"] != besides and within(folder_of(r), folder)]


__all__ = ["STATE_DIR_ENV", "state_dir", "check_id", "record_path", "artifact_dir", "artifact_dirs", "state_lock", "locked",
           "locked_each", "now", "stamps", "replace", "replace_each", "create", "create_each", "sweep_temps", "read",
           "read_each", "load", "get", "get_each", "list_records", "find",
           "refuse_nested", "records_inside", "Record", "RECORD_VERSION", "UnknownJob", "NoRecord", "NotAJobId"]
