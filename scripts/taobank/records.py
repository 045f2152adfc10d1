"""The job-record store: one JSON file per job, the source of truth for a job.

* Location: ``$TAO_STATE_DIR`` or ``${XDG_STATE_HOME:-~/.local/state}/tao-skill-bank/jobs``;
  the folder is mode 700, every file 600 whatever the umask.
* Writes are atomic (temp file in the same folder, fsync, rename, fsync of the
  folder): a writer killed at any point leaves the old or the new record.
* A read-modify-write holds an exclusive ``fcntl`` lock on ``<id>.lock``, so
  concurrent marks from many processes lose no transition.
* Every write is validated against ``schemas/job-record.schema.json`` (by a
  hand check; jsonschema only words a refusal) and the transition table of
  :mod:`taobank.states`.
* A new id is linked into place with ``os.link`` (fails if the name exists), so
  a colliding id is minted again, never overwritten.
* Free text (``message``) passes through :func:`taobank.redact.redact_text`;
  a ``results_dir`` carrying credentials is refused.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping, TypeGuard, cast

from .states import State
from . import BANK_ROOT, fsio, names, registry, safeparse, states
from .errors import TaoError
from .redact import shown
from .taoargs import OVERRIDE_KEY, OVERRIDE_VALUE

STATE_DIR_ENV = "TAO_STATE_DIR"
SCHEMA_FILE = BANK_ROOT / "schemas" / "job-record.schema.json"
RECORD_VERSION = 1
STORAGE_TIERS = ("A", "C")
_MAX_MINT_TRIES = 32
_MAX_TEXT = 4096
_MAX_RECORD_BYTES = 4 * 1024 * 1024
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_META_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")



@dataclass(frozen=True)
class Record:
    """One job's record as typed values (the store keeps it as JSON: :meth:`of` reads that, :meth:`to_dict`
    writes it back); ``schemas/job-record.schema.json`` is the truth (tests/unit/test_record_type.py checks
    every property is a field and every field a property). Code reads attributes, never ``rec["..."]``."""

    # what every readable record holds (the store's read checks it: :func:`_shape_problem`)
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
    # every write holds these too; a record written by hand may lack them (these defaults stand in)
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


# ---------------------------------------------------------------- paths
def state_dir() -> Path:
    """The record folder: created mode 700 when new; an existing one is used as it is, never chmod-ed.

    Refused when another user owns it or when it is group/world-writable
    (anyone could then plant or swap records there, e.g. ``TAO_STATE_DIR=/tmp``).
    """
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        d = Path(env).expanduser()
    else:
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        d = Path(base) / "tao-skill-bank" / "jobs"
    d = d.absolute()
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


def _check_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not names.is_dns1035_label(job_id) or len(job_id) > names.MAX_ID_LEN:
        raise TaoError(f"{shown(job_id)} is not a job id: ids are printed by 'tao_job_record.py open' (see 'list')")
    return job_id


def record_path(job_id: str) -> Path:
    return state_dir() / f"{_check_id(job_id)}.json"


def artifact_dir(job_id: str) -> Path:
    """Mode-700 folder beside the record for saved logs and other artifacts of the job (never a symlink)."""
    load(job_id)  # only for jobs that exist
    d = state_dir() / f"{job_id}.d"
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


# ---------------------------------------------------------------- io
def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write_temp(d: Path, job_id: str, rec: dict[str, Any]) -> str:
    data = (json.dumps(rec, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    return fsio.write_temp(d, f".{job_id}.", data)


def _replace(job_id: str, rec: dict[str, Any]) -> None:
    validate(rec)
    d = state_dir()
    tmp = _write_temp(d, job_id, rec)
    try:
        os.replace(tmp, d / f"{job_id}.json")
    except BaseException:
        os.unlink(tmp)
        raise
    fsio.fsync_dir(d)


def _create(job_id: str, rec: dict[str, Any]) -> bool:
    """Put a new record in place unless the id exists (False then). Never overwrites."""
    validate(rec)
    d = state_dir()
    tmp = _write_temp(d, job_id, rec)
    try:
        os.link(tmp, d / f"{job_id}.json")
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    fsio.fsync_dir(d)
    return True


def _sweep_temps(job_id: str, min_age_s: float = 60.0) -> None:
    """Remove temp files of writers killed mid-write (called under the record's lock)."""
    import time

    cutoff = time.time() - min_age_s
    for tmp in state_dir().glob(f".{job_id}.*.tmp"):
        try:
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink()
        except FileNotFoundError:
            pass


def _locked(job_id: str) -> AbstractContextManager[None]:
    return state_lock(f"{job_id}.lock")


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


def _read(path: Path) -> dict[str, Any]:
    """A record file: a regular file (no symlink, no FIFO) holding a record-shaped JSON object."""
    try:
        raw = fsio.read_regular(path, "job record", max_bytes=_MAX_RECORD_BYTES, follow_links=False, missing_ok=True)
    except TaoError as exc:
        raise TaoError(f"{exc}: remove or restore it") from None
    if raw is None:
        raise TaoError(f"no job record {path.stem} in {path.parent}: see 'tao_jobs.py list'")
    try:
        rec = safeparse.json_value(raw, f"job record {path}")
    except TaoError as exc:
        raise TaoError(f"{exc}: restore it or remove it") from None
    problem = _shape_problem(rec, path.stem)
    if problem:
        raise TaoError(f"job record {path} is damaged ({problem}): restore it or remove it")
    return cast(dict[str, Any], rec)  # _shape_problem found a JSON object


def _shape_problem(rec: Any, job_id: str) -> str | None:
    """What makes ``rec`` unusable as a record (cheap: no schema import), or None."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("id") != job_id:
        return "its id does not match the file name"
    if rec.get("state") not in states.STATES:
        return "unknown state"
    if rec.get("platform") not in registry.names():
        return "unknown platform"
    if not isinstance(rec.get("backend"), dict):
        return "backend is not an object"
    trs = rec.get("transitions")
    if not isinstance(trs, list) or not trs or not all(isinstance(t, dict) and t.get("state") in states.STATES
                                                      for t in trs):
        return "transitions are not a list of states"
    chain = _chain_problem(rec["state"], [t["state"] for t in trs])
    if chain:
        return chain
    for key in ("image", "network_arch", "action", "results_dir", "created_at", "updated_at"):
        if not isinstance(rec.get(key), str):
            return f"{key} is not text"
    if not isinstance(rec.get("attempt"), int) or isinstance(rec.get("attempt"), bool):
        return "attempt is not a number"
    for key in ("message", "backend_ref", "retry_of", "err_class", "description", "parent", "continues"):
        if rec.get(key) is not None and not isinstance(rec.get(key), str):
            return f"{key} is not text"
    if any(k in rec for k in SWEEP_FIELDS) and not _sweep_ok(rec):
        return "its sweep fields are not a sweep id, a trial number and key=value overrides"
    for k, v in rec["backend"].items():
        if not isinstance(k, str) or (v is not None and type(v) not in (str, int, bool)):
            return f"backend {str(k)[:40]!r} is not text, a whole number or true/false"
        if k in _BACKEND_TEXT and v is not None and not isinstance(v, str):
            return f"backend {k} is not text"
    container = rec["backend"].get("container")
    if container is not None and not _CONTAINER.match(container):
        return "backend container is not a container name"
    return _folder_problem(rec)


def _chain_problem(state: str, chain: list[str]) -> str | None:
    """What :func:`validate` would refuse of the transitions, checked on every read too: a record a write would
    reject (hand-edited, restored from elsewhere) is damaged as it is read, never halfway through a status."""
    if chain[0] != states.INITIAL or chain[-1] != state:
        return f"its transitions run {chain[0]} .. {chain[-1]}, not {states.INITIAL} .. {state}"
    for a, b in zip(chain, chain[1:]):
        if not states.is_allowed(a, b):
            return f"its transition {a} -> {b} is not in the table"
    return None


#: A container name as the engines allow it: never an option, never a control character.
_CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")
#: Backend fields the platforms read as text (names, paths, hosts): a number there is damage.
_BACKEND_TEXT = frozenset(("engine", "engine_host", "container", "results_dir", "log_dir", "job_dir", "staged_dir",
                           "script", "namespace", "context", "job_name", "login_host"))


def _folder_problem(rec: Mapping[str, Any]) -> str | None:
    """A results folder no verb may list, fetch from or delete: the whole disk, or a ``backend.results_dir``
    that is neither the record's ``results_dir`` nor a folder named after the job."""
    top, own = rec["results_dir"], rec["backend"].get("results_dir")
    for folder in (top, own):
        if isinstance(folder, str) and folder.startswith("/") and not folder.strip("/"):
            return "its results folder is / (the whole disk)"
    if own is not None and own.rstrip("/") != top.rstrip("/") and own.rstrip("/").rsplit("/", 1)[-1] != rec["id"]:
        return "backend.results_dir is neither its results_dir nor a folder named after the job"
    if own is not None and not (own.startswith("/") or _URI.match(own)):
        return "backend.results_dir is not an absolute path"
    return None


# ---------------------------------------------------------------- validation
_REQUIRED = ("record_version", "id", "platform", "image", "network_arch", "action", "storage_tier", "results_dir",
             "backend_ref", "backend", "state", "err_class", "message", "transitions", "retry_of", "attempt",
             "created_at", "updated_at")
#: optional: lineage (taobank.lineage), absent on records that have none
LINEAGE_FIELDS = ("parent", "continues")
#: a sweep trial's fields (taobank.sweeps): absent on every other record
SWEEP_FIELDS = ("sweep", "trial", "overrides")
_FIELDS = frozenset(_REQUIRED + ("description",) + LINEAGE_FIELDS + SWEEP_FIELDS)
_TRANSITION_FIELDS = frozenset(("time", "state", "source", "message"))
_JOB_ID = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z\Z")
_RESULTS_DIR = re.compile(r"^(/|[A-Za-z][A-Za-z0-9+.-]*://)[^\u0000-\u001f\u007f]*\Z")
_BACKEND_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")


def _text(v: Any, lo: int, hi: int) -> TypeGuard[str]:
    return type(v) is str and lo <= len(v) <= hi


def _schema_ok(rec: Any) -> bool:
    """True only when ``rec`` satisfies schemas/job-record.schema.json, checked by hand (no jsonschema import:
    every mark of every poll writes a record, and the import is most of a helper's start-up).

    Stricter than the schema where that is simpler (``1.0`` for an integer): False sends the record to
    jsonschema, which decides and words the error. tests/unit/test_records.py holds the two to agreement.
    """
    if type(rec) is not dict or not _FIELDS.issuperset(rec) or not all(k in rec for k in _REQUIRED):
        return False
    r = rec
    if not (type(r["record_version"]) is int and r["record_version"] == 1
            and _text(r["id"], 0, 40) and _JOB_ID.search(r["id"])
            and r["platform"] in registry.names() and type(r["platform"]) is str
            and _text(r["image"], 1, 512) and _text(r["network_arch"], 1, 256) and _text(r["action"], 1, 256)
            and (r.get("description") is None or _text(r["description"], 0, 200))
            and type(r["storage_tier"]) is str and r["storage_tier"] in ("A", "C")
            and _text(r["results_dir"], 2, 4096) and _RESULTS_DIR.search(r["results_dir"])
            and (r["backend_ref"] is None or _text(r["backend_ref"], 1, 512))
            and type(r["state"]) is str and r["state"] in states.STATES
            and (r["err_class"] is None or (type(r["err_class"]) is str and r["err_class"] in states.ERR_CLASSES
                                            and r["state"] == "ERROR"))
            and (r["message"] is None or _text(r["message"], 0, 4096))
            and (r["retry_of"] is None or (_text(r["retry_of"], 0, 40) and _JOB_ID.search(r["retry_of"])))
            and all(r.get(k) is None or (_text(r[k], 0, 40) and _JOB_ID.search(r[k])) for k in LINEAGE_FIELDS)
            and type(r["attempt"]) is int and (r["attempt"] == 1 if r["retry_of"] is None else r["attempt"] >= 2)
            and _text(r["created_at"], 0, 1 << 30) and _TIME.search(r["created_at"])
            and _text(r["updated_at"], 0, 1 << 30) and _TIME.search(r["updated_at"])):
        return False
    if any(k in r for k in SWEEP_FIELDS) and not _sweep_ok(r):
        return False
    backend = r["backend"]
    if type(backend) is not dict or not all(type(k) is str and _BACKEND_KEY.search(k) and
                                            (v is None or type(v) in (str, int, bool)) for k, v in backend.items()):
        return False
    trs = r["transitions"]
    return type(trs) is list and len(trs) >= 1 and all(
        type(t) is dict and t.keys() == _TRANSITION_FIELDS
        and _text(t["time"], 0, 1 << 30) and _TIME.search(t["time"])
        and type(t["state"]) is str and t["state"] in states.STATES
        and type(t["source"]) is str and t["source"] in states.SOURCES
        and (t["message"] is None or _text(t["message"], 0, 4096)) for t in trs)


#: A trial's override keys and values: the one rule is taobank.taoargs' (``match``, anchored by ``\Z``).
_OVERRIDE_KEY, _OVERRIDE_VALUE = OVERRIDE_KEY, OVERRIDE_VALUE


def _sweep_ok(r: Mapping[str, Any]) -> bool:
    """The sweep fields as the schema has them (all three together on a trial)."""
    sweep, trial, ov = r.get("sweep"), r.get("trial"), r.get("overrides")
    return (_text(sweep, 1, 40) and bool(_JOB_ID.search(sweep)) and type(trial) is int and trial >= 0
            and type(ov) is dict and len(ov) <= 64
            and all(_text(k, 1, 256) and _OVERRIDE_KEY.match(k) and _text(v, 1, 256) and _OVERRIDE_VALUE.match(v)
                    for k, v in ov.items()))


def validate(rec: Mapping[str, Any]) -> None:
    """Schema plus the rules a schema cannot say; TaoError naming the first problem."""
    if not _schema_ok(rec):
        from .spec import first_error

        err = first_error(rec, SCHEMA_FILE.name)
        if err is not None:
            where = "/".join(str(p) for p in err.absolute_path) or "record"
            raise TaoError(f"job record rejected at {where}: {err.message[:200]}")
    if not registry.known(rec["platform"]):  # the schema says a name; the registry says which
        raise TaoError(f"job record rejected at platform: {str(rec['platform'])[:40]!r} is not one of "
                       f"{', '.join(registry.names())}")
    chain = _chain_problem(rec["state"], [t["state"] for t in rec["transitions"]])
    if chain:
        raise TaoError(f"job record rejected: {chain}")


def check_results_dir(value: str) -> str:
    """An absolute path or a ``scheme://`` URI without credentials; anything else is refused."""
    from urllib.parse import urlsplit

    from .redact import shown

    v = str(value).strip()
    if not v:
        raise TaoError("results_dir is empty: give an absolute path or a URI such as s3://bucket/prefix")
    if any(ord(c) < 32 or ord(c) == 127 for c in v):
        raise TaoError("results_dir contains a control character: give a plain path or URI")
    if _URI.match(v):
        parts = urlsplit(v)
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise TaoError("results_dir carries credentials (user@ or user:pass@): give the bare URI and keep credentials in the environment")
        if parts.query or parts.fragment or "?" in v:
            raise TaoError("results_dir has a query string (presigned URLs carry credentials): give the bare URI, e.g. s3://bucket/prefix")
        if not (parts.netloc or parts.path.strip("/")):
            raise TaoError(f"results_dir {shown(v)} names no location: add the bucket/volume and prefix")
    elif not v.startswith("/"):
        hint = "expand ~ first" if v.startswith("~") else "relative paths are refused"
        raise TaoError(f"results_dir {shown(v)} is not absolute ({hint}): give /abs/path or a URI such as s3://bucket/prefix")
    if ".." in v.split("/"):
        raise TaoError(f"results_dir {shown(v)} contains '..': give the resolved path")
    from .redact import lint_text

    if lint_text(v, "results_dir"):
        raise TaoError("results_dir looks like it carries a credential: give the bare path or URI")
    return v


def _encodable(text: str, what: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise TaoError(f"{what} holds characters that are not valid text (lone surrogates): give plain UTF-8") from None
    return text


def _clean_text(text: str | None) -> str | None:
    if text is None:
        return None
    from .redact import redact_text
    from .text import valid_text

    text = redact_text(valid_text(str(text)))  # a byte of a cluster's answer that was not UTF-8: U+FFFD
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def _clean_backend(backend: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not backend:
        return out
    from .redact import is_credential_name, redact_text

    for k, v in backend.items():
        if not isinstance(k, str) or not _META_KEY.match(k):
            raise TaoError(f"backend metadata key {k!r} is invalid: use letters, digits, _ . - (max 64)")
        if v is not None and not isinstance(v, (str, int, bool)):
            raise TaoError(f"backend metadata {k} must be a string, integer or boolean")
        if isinstance(v, str):  # a cluster's answer with a byte that is not UTF-8: one line, never a crash mid-write
            _encodable(v, f"backend metadata {k}")
        if is_credential_name(k) and isinstance(v, str) and v:  # flags such as staged_secrets=true are fine
            raise TaoError(f"backend metadata {k} is named like a credential: never store secrets in a record")
        # the value alone: token shapes, user:pass@, signed URLs (keys are ours, e.g. cred_secret=tao-creds-x)
        if isinstance(v, str) and redact_text(v) != v:
            raise TaoError(f"backend metadata {k} looks like a credential: never store secrets in a record")
        out[k] = v
    return out


def _description(value: str | None) -> str | None:
    """Free text naming the job (submit --name): one line, at most 200 characters, no credential."""
    if value is None or not str(value).strip():
        return None
    text = " ".join(str(value).split())
    if len(text) > 200:
        raise TaoError("the job name/description is longer than 200 characters: shorten it")
    if _clean_text(text) != text:
        raise TaoError("the job name/description looks like it carries a credential: refused")
    return text


def _required(name: str, value: Any) -> str:
    text = _encodable("" if value is None else str(value).strip(), name)
    if not text:
        raise TaoError(f"{name} is required: pass a non-empty value")
    if any(ord(c) < 32 for c in text):
        raise TaoError(f"{name} contains a control character: refused")
    return text


# ---------------------------------------------------------------- API
#: In ``results_dir`` given to :func:`open_record`, replaced by the minted id.
ID_PLACEHOLDER = "{id}"
#: The ``results_dir`` of a job told to keep no results (``--no-results``): shown as "no results".
NO_RESULTS_DIR = "/dev/null"


def open_record(
    platform: str,
    image: str,
    network_arch: str,
    action: str,
    storage_tier: str,
    results_dir: str,
    *,
    retry_of: str | None = None,
    backend: Mapping[str, Any] | None = None,
    description: str | None = None,
    job_id: str | None = None,
    lineage: Mapping[str, str | None] | None = None,
    sweep: tuple[str, int, Mapping[str, str]] | None = None,
    check_folder: bool = True,
) -> dict[str, Any]:
    """Mint an id and store a PENDING record; returns it (``rec["id"]``).

    ``job_id`` is an id minted up front (:func:`names.mint_job_id`, so a
    platform can render names from it before the record exists); it is refused
    if a record already has it.

    ``results_dir`` may hold :data:`ID_PLACEHOLDER` (``/results/{id}``): it
    becomes the minted id, so the record names the job's own folder.

    ``retry_of`` links a retry to a finished parent (attempt = parent's + 1);
    retrying a job that is still active is refused (it would run twice).

    ``lineage`` (``parent``, ``continues``: job ids, checked by :mod:`taobank.lineage`) is stored as given.

    ``check_folder``: refuse a results folder inside another record's folder, or holding one
    (:func:`refuse_nested`); a sweep checks all its trials' folders in one pass and passes False.
    """
    tier = _required("storage_tier", storage_tier).upper()
    if tier not in STORAGE_TIERS:
        raise TaoError(f"storage tier {storage_tier!r} is unknown: use A (mounted volume) or C (S3 staging)")
    attempt = 1
    if retry_of is not None:
        parent = load(retry_of)
        if parent["platform"] != registry.canonical(platform):
            raise TaoError(f"job {retry_of} is a {parent['platform']} job: a retry runs on the same platform")
        if parent["state"] not in states.TERMINAL:
            raise TaoError(f"job {retry_of} is {parent['state']}: mark it ERROR or CANCELED before opening a retry")
        attempt = parent["attempt"] + 1
    now = _now()
    rec: dict[str, Any] = {
        "record_version": RECORD_VERSION,
        "id": "",
        "platform": registry.canonical(platform),
        "image": _required("image", image),
        "network_arch": _required("network_arch", network_arch),
        "action": _required("action", action),
        "description": _description(description),
        "storage_tier": tier,
        "results_dir": check_results_dir(results_dir),
        "backend_ref": None,
        "backend": _clean_backend(backend),
        "state": states.INITIAL.value,  # plain strings in the store (the enum is for code)
        "err_class": None,
        "message": None,
        "transitions": [{"time": now, "state": states.INITIAL.value, "source": "agent", "message": "opened"}],
        "retry_of": retry_of,
        "attempt": attempt,
        "created_at": now,
        "updated_at": now,
    }
    for key, value in (lineage or {}).items():
        if key not in LINEAGE_FIELDS:
            raise TaoError(f"lineage field {key!r} is unknown: use {' or '.join(LINEAGE_FIELDS)}")
        if value is not None:
            rec[key] = _check_id(value)
    if sweep is not None:  # a sweep trial (taobank.sweeps): its sweep id, index and overrides
        rec.update(sweep=sweep[0], trial=int(sweep[1]), overrides=dict(sweep[2]))
    if "@" in rec["image"].split("/", 1)[0]:  # user:password@registry/...; a digest's @ comes after a /
        raise TaoError("image carries credentials (user@ or user:pass@ before the registry): give the bare image "
                       "reference and use a pull secret")
    for field in ("image", "network_arch", "action"):  # stored as given (and arch/action shape the id)
        if _clean_text(rec[field]) != rec[field]:
            raise TaoError(f"{field} looks like it carries a credential: give the bare value, never a secret")
    template = rec["results_dir"]
    if check_folder and retry_of is None:  # a retry carries on in its parent's folder, checked when that opened
        new_id = job_id or "new-job"
        refuse_nested([(template.replace(ID_PLACEHOLDER, new_id), new_id)], rec["platform"])
    for _ in range(1 if job_id else _MAX_MINT_TRIES):
        rec["id"] = _check_id(job_id) if job_id else names.mint_job_id(rec["network_arch"], rec["action"])
        rec["results_dir"] = template.replace(ID_PLACEHOLDER, rec["id"])  # one folder per job, named by its id
        if _create(rec["id"], rec):
            return rec
    if job_id:
        raise TaoError(f"a record {job_id} exists already in {state_dir()}: submit again (a new id is minted)")
    raise TaoError(f"could not mint a free job id after {_MAX_MINT_TRIES} tries in {state_dir()}: check the folder")


# ---------------------------------------------------------------- results folders of many records
def folder_of(rec: Mapping[str, Any]) -> str:
    """The folder a record's job writes: ``backend.results_dir`` (where a platform keeps the job's own folder)
    or ``results_dir``; "" for a job that keeps none."""
    b = rec.get("backend")
    v = b.get("results_dir") if isinstance(b, dict) else None
    folder = v if isinstance(v, str) and v else rec.get("results_dir")
    return folder.rstrip("/") or "/" if isinstance(folder, str) and folder != NO_RESULTS_DIR else ""


def within(path: str, root: str) -> bool:
    """``path`` is ``root`` or inside it: absolute paths by :func:`taobank.paths.is_under`, URIs by prefix."""
    from .paths import is_under

    if not path or not root:
        return False
    if path.startswith("/") and root.startswith("/"):
        return is_under(path, root)
    a, b = path.rstrip("/"), root.rstrip("/")
    return _URI.match(a) is not None and (a == b or a.startswith(b + "/"))


def refuse_nested(folders: list[tuple[str, str]], platform: str) -> None:
    """A new job's results folder (``(folder, job id)``) may neither lie inside another record's folder nor hold
    one: ``prune`` of the outer job would delete the inner job's results (one pass over the records for all
    ``folders``). Only a folder named after its job can be pruned, so only such an outer folder counts."""
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


def load(job_id: str) -> dict[str, Any]:
    """The record of ``job_id`` (TaoError if there is none)."""
    return _read(record_path(job_id))


def get(job_id: str) -> Record:
    """The record of ``job_id`` as typed values (TaoError if there is none)."""
    return Record.of(load(job_id))


def find(platform: str | None = None, state: str | None = None, active: bool = False,
         problems: list[str] | None = None, sweep: str | None = None) -> list[Record]:
    """:func:`list_records` as typed values."""
    return [Record.of(r) for r in list_records(platform, state, active, problems, sweep)]


def mark(
    job_id: str,
    state: str,
    *,
    backend_ref: str | None = None,
    source: str = "agent",
    message: str | None = None,
    err_class: str | None = None,
    backend: Mapping[str, Any] | None = None,
    rebind: bool = False,
) -> dict[str, Any]:
    """Move a record to ``state`` under the transition table; returns the stored record.

    ``rebind``: ``backend_ref`` may change (a job that resubmitted itself under the same record:
    the ref follows the live backend job); otherwise a bound ref never changes.

    Same state on an active record: updates backend_ref/backend/message only
    (nothing is written when none of them changes).
    Same state on a terminal record: no-op. Anything outside the table: TaoError.
    """
    new = states.canonical_state(state)
    src = states.canonical_source(source)
    cls = states.canonical_err_class(err_class) if err_class else None
    if cls and new != State.ERROR:
        raise TaoError(f"err_class {cls} is only allowed with --state ERROR (got {new})")
    meta = _clean_backend(backend)
    msg = _clean_text(message)
    ref = None if backend_ref is None else _required("backend_ref", backend_ref)
    if ref is not None and _clean_text(ref) != ref:
        raise TaoError("backend_ref looks like it carries a credential: refused")
    path = record_path(job_id)
    with _locked(job_id):
        rec = _read(path)
        cur = rec["state"]
        if cur in states.TERMINAL:
            if new == cur:
                return rec  # repeating a final mark (poller + agent) changes nothing
            raise TaoError(f"job {job_id} is {cur} (terminal) and cannot become {new}: {states.allowed_text(cur)}")
        if new != cur and not states.is_allowed(cur, new):
            raise TaoError(f"illegal transition {cur} -> {new} for job {job_id}: {states.allowed_text(cur)}")
        before = json.dumps(rec, sort_keys=True)
        if ref is not None:
            if rec["backend_ref"] not in (None, ref) and not rebind:
                raise TaoError(f"job {job_id} is bound to backend_ref {rec['backend_ref']!r}: it cannot change to {ref!r}")
            rec["backend_ref"] = ref
        rec["backend"].update(meta)
        if new == cur and (msg is None or msg == rec["message"]) and json.dumps(rec, sort_keys=True) == before:
            return rec  # a poll that learnt nothing new writes nothing (and skips the schema import)
        now = _now()
        if msg is not None:
            rec["message"] = msg
        if new != cur:
            rec["state"] = new.value
            rec["transitions"].append({"time": now, "state": new.value, "source": src, "message": msg})
            if new == State.ERROR:
                rec["err_class"] = cls
        rec["updated_at"] = now
        _replace(job_id, rec)
        _sweep_temps(job_id)
        return rec


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


def list_records(platform: str | None = None, state: str | None = None, active: bool = False,
                 problems: list[str] | None = None, sweep: str | None = None) -> list[dict[str, Any]]:
    """Records, oldest first, filtered by platform, state and/or activity.

    A damaged or foreign file never hides the other jobs: it is skipped and,
    when ``problems`` is given, described there (one line each).
    """
    plat = registry.canonical(platform) if platform else None
    st = states.canonical_state(state) if state else None
    out = []
    for f in state_dir().glob("*.json"):
        if not names.is_dns1035_label(f.stem):
            continue
        try:
            rec = _read(f)
        except TaoError as exc:
            if f.exists() or f.is_symlink():  # not merely removed while listing
                if problems is not None:
                    problems.append(str(exc))
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


__all__ = ["Record", "get", "find", "state_dir", "open_record", "mark", "load", "folder_of", "refuse_nested", "records_inside", "list_records", "run_times", "artifact_dir", "check_results_dir",
           "validate", "record_path", "STATE_DIR_ENV"]
