"""``fetch``: a job's results downloaded under a local folder, each file verified.

The core's half of the verb (a platform's ``fetch_results`` only streams the folder's bytes into the
:class:`_Transfer` it is given):

* a download lands in the job's staging folder inside the destination (``.tao-fetch-<id>``), block by
  block, each block's digest checked against the one computed where it was read; a file is renamed to its
  final name (with the cluster's mtime) only when whole: a partial or corrupt file is never left under that
  name, and an existing file that differs is never replaced without ``force``;
* a rerun skips files already here (same size and mtime) and continues a half-fetched one from its last
  verified block (``state.json``); two fetches of one job into one folder both work;
* progress (bytes, rate, ETA) once a transfer has run for :data:`QUIET_S`, through the caller's ``emit``.
"""
from __future__ import annotations

import errno
import os
import posixpath
import shutil
import stat
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterator

from ..contract import ResultFile, ResultsLocation
from ..errors import NotInResults, TaoError, UsageError
from ..paths import rel_path
from ..core.platform import get, load_for
from .results_verbs import human
from ..run import signals_interrupt

if TYPE_CHECKING:
    from ..core.platform import Platform
    from ..records import Record

#: A transfer says nothing for this long (seconds), then shows bytes so far at most every EVERY_S.
QUIET_S = 10.0
EVERY_S = 2.0


class Meter:
    """Progress of one transfer: silent for ``quiet`` seconds, then one line at most every ``every`` seconds
    through ``emit`` (bytes so far, of the total when known). The clock is injected (tests never wait)."""

    def __init__(self, emit: Callable[[str], None] | None, *, clock: Callable[[], float] = time.monotonic,
                 quiet: float = QUIET_S, every: float = EVERY_S) -> None:
        self.emit, self.clock, self.quiet, self.every = emit, clock, quiet, every
        self.began = clock()
        self.total: int | None = None
        self.done = 0
        self.shown_at: float | None = None

    def text(self) -> str:
        of = f" of {human(self.total)} ({100 * self.done // max(self.total, 1)}%)" if self.total else ""
        rate = self.done / max(self.clock() - self.began, 1e-9)
        eta = ""
        if self.total and rate > 0 and self.done < self.total:
            left = int((self.total - self.done) / rate)
            eta = f", ETA {left // 3600}h{left // 60 % 60:02d}m" if left >= 3600 else f", ETA {left // 60}m{left % 60:02d}s"
        return f"fetched {human(self.done)}{of}, {human(rate)}/s{eta}"

    def advance(self, done: int) -> None:
        self.done = done
        if self.emit is None:
            return
        now = self.clock()
        if now - self.began < self.quiet or (self.shown_at is not None and now - self.shown_at < self.every):
            return
        self.shown_at = now
        self.emit(self.text())

    def finish(self) -> None:
        if self.emit is not None and self.shown_at is not None:  # only a transfer that showed progress
            self.emit(self.text())


@dataclass
class Fetched:
    """One downloaded file: the cluster's facts, where it now is, and what was checked."""

    file: ResultFile
    local: str
    verified: str
    #: bytes of it this run moved (less than its size when an interrupted fetch was resumed; 0: already here)
    moved: int = 0
    #: a symbolic link made again here: its target's path in the results folder (``file`` is the target's size)
    link_to: str | None = None

    def to_dict(self) -> dict:
        extra = {"link_to": self.link_to} if self.link_to else {}
        return {**self.file.to_dict(), "local": self.local, "verified": self.verified, "moved": self.moved, **extra}

    def line(self) -> str:
        from ..text import one_line

        if self.link_to:  # as ls -l shows the local link
            to = posixpath.relpath(self.link_to, posixpath.dirname(self.file.path) or ".")
            return one_line(f"{self.local} -> {to} ({self.verified})")
        return one_line(f"{self.local} ({human(self.file.size)}, {self.verified})")


class _Transfer:
    """The core's side of a platform's fetch: refuses before any byte moves, keeps each file's verified bytes in
    the staging folder (``state.json`` says how many), renames a file to its final name once whole."""

    def __init__(self, dest: Path, force: bool, meter: Meter, note: Callable[[str], None] | None = None,
                 staging: Path | None = None, *, links: bool = True) -> None:
        self.dest, self.force, self.meter, self.links = dest, force, meter, links
        self.staging = staging or dest
        self.files: list[ResultFile] = []
        self.cluster_links: dict[str, str] = {}  # the folder's symbolic links (made again once fetched)
        self.fetched: dict[str, Fetched] = {}
        self._note = note
        self._have: dict[str, int | None] = {}
        self._from: dict[str, int] = {}
        self._linked: set[str] = set()
        self._state: dict[str, dict] = _read_state(self.staging)

    def note(self, text: str) -> None:
        """Something the user should know that does not stop the fetch (an unreadable subfolder)."""
        if self._note is not None:
            self._note(text)

    def start(self, files: list[ResultFile], links: dict[str, str] | None = None) -> None:
        self.cluster_links = dict(links or {})
        if not files:
            raise TaoError("nothing to fetch: the paths hold no regular file")
        for f in files:
            have = self._kept(f)
            if have is not None:
                _final_target(self.dest, f.path, self.force)
            else:
                self.fetched[f.path] = Fetched(f, str(self.dest / f.path), "already here (same size and mtime)")
            self._have[f.path] = have
        self.files = list(files)
        self.meter.total = sum(f.size - (self._have[f.path] or 0) for f in files if self._have[f.path] is not None)

    def _kept(self, f: ResultFile) -> int | None:
        target = self.dest / f.path
        try:
            st = target.lstat()
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode) and (st.st_size, int(st.st_mtime)) == (f.size, int(f.mtime)):
            return None  # fetched whole by an earlier run (its mtime is the cluster's)
        kept = self._state.get(f.path) or {}
        part = self.staging / f.path
        if (kept.get("size"), kept.get("mtime")) != (f.size, int(f.mtime)) or part.is_symlink():
            return 0
        try:
            return min(int(kept.get("have") or 0), part.stat().st_size)
        except (OSError, ValueError):
            return 0

    def have(self, file: ResultFile) -> int | None:
        return self._have.get(file.path, 0)

    @contextmanager
    def part(self, file: ResultFile, offset: int) -> Iterator[BinaryIO]:
        path = self.staging / file.path
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        if not offset:
            # a new file, never one truncated to 0: ext4 writes a file truncated to 0 out to disk when it is
            # closed (its guard for rewrite-in-place), which costs a second or more per GiB fetched
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            flags |= os.O_EXCL
        fd = os.open(path, flags, 0o600)
        if offset and os.fstat(fd).st_nlink > 1:  # never write into a file another name shares (a job's own)
            os.close(fd)
            path.unlink()
            self._state.pop(file.path, None)
            _write_state(self.staging, self._state)
            raise TaoError(f"{file.path}: its partial copy shared its data with another file, so it was dropped: "
                           "run the fetch again")
        with os.fdopen(fd, "wb") as fh:
            if offset:
                fh.truncate(offset)
                fh.seek(offset)
            self._state[file.path] = {"size": file.size, "mtime": int(file.mtime), "have": offset}
            _write_state(self.staging, self._state)
            if not offset or file.path not in self._from:  # a resumed stream keeps where this run began
                self._from[file.path] = offset
            yield fh

    def verified(self, file: ResultFile, upto: int) -> None:
        self._state[file.path] = {"size": file.size, "mtime": int(file.mtime), "have": upto}
        _write_state(self.staging, self._state)

    def link(self, file: ResultFile, source: str, source_fd: int) -> bool:
        if not self.links:
            return False
        path = self.staging / file.path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        try:
            os.link(source, path, follow_symlinks=False)
            made, opened = os.lstat(path), os.fstat(source_fd)
        except (OSError, NotImplementedError):
            return False
        if (made.st_dev, made.st_ino) != (opened.st_dev, opened.st_ino):  # the path was swapped since it was opened
            path.unlink()
            return False
        self._linked.add(file.path)
        self._from[file.path] = file.size  # nothing moved
        self._state.pop(file.path, None)
        _write_state(self.staging, self._state)
        return True

    def finish(self, file: ResultFile, how: str) -> None:
        part = self.staging / file.path
        if not part.exists():  # an empty file: no block was sent
            part.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600))
        size = part.stat().st_size
        if size != file.size:
            self.discard(file)
            raise TaoError(f"{file.path} arrived with {size} bytes, the cluster has {file.size}: run the fetch again")
        if file.path not in self._linked:  # a link is the job's own file: its mode and time stay as they are
            os.chmod(part, 0o644)
            os.utime(part, (file.mtime, file.mtime))
        target = _place(self.staging, self.dest, file.path, self.force)
        self._state.pop(file.path, None)
        _write_state(self.staging, self._state)
        self.fetched[file.path] = Fetched(file, str(target), how, file.size - self._from.get(file.path, 0))

    def discard(self, file: ResultFile) -> None:
        try:
            (self.staging / file.path).unlink()
        except OSError:
            pass
        self._state.pop(file.path, None)
        _write_state(self.staging, self._state)

    def advance(self, done: int) -> None:
        self.meter.advance(done)


#: In the staging folder: per file being fetched, the cluster's size and mtime and the bytes verified so far.
STATE_FILE = "state.json"


def _read_state(staging: Path) -> dict[str, dict]:
    import json

    try:
        data = json.loads((staging / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _write_state(staging: Path, state: dict[str, dict]) -> None:
    import json

    tmp = staging / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, staging / STATE_FILE)


def _way_clear(dest: Path, rel: str) -> Path:
    """``dest / rel``, once no folder on the way there is a file or a link (a write would land elsewhere)."""
    target = dest / rel
    for parent in list(target.parents)[: len(Path(rel).parts) - 1]:
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            raise TaoError(f"{parent} is in the way of {rel} (a file or a link, not a folder): move it or pick "
                           "another --to")
    return target


def _final_target(dest: Path, rel: str, force: bool) -> Path:
    """Where ``rel`` goes under ``dest``; refused when a file is there (without ``force``) or the way is blocked."""
    target = _way_clear(dest, rel)
    if target.is_symlink() or target.is_dir():
        raise TaoError(f"{target} exists and is not a plain file: move it or pick another --to")
    if target.exists() and not force:
        raise TaoError(f"{target} exists: pass --force to replace it, or pick another --to")
    return target


def _place(staged: Path, dest: Path, rel: str, force: bool) -> Path:
    """Move one verified file from the temp folder to its final name: never over a file without ``force``."""
    target = _final_target(dest, rel, force)
    target.parent.mkdir(parents=True, exist_ok=True)
    src = staged / rel
    if force:
        os.replace(src, target)
        return target
    try:
        os.link(src, target)  # fails if the name exists: no window to replace a file that appeared meanwhile
    except FileExistsError:
        raise TaoError(f"{target} exists: pass --force to replace it, or pick another --to") from None
    except OSError:  # a filesystem without hard links
        if target.exists():
            raise TaoError(f"{target} exists: pass --force to replace it, or pick another --to") from None
        os.rename(src, target)
        return target
    os.unlink(src)
    return target


def fetch(platform: str | None, job_id: str, paths: list[str], to: str | Path, *, force: bool = False,
          emit: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic,
          note: Callable[[str], None] | None = None, links: bool = True) -> list[Fetched]:
    """Download ``paths`` (all when empty) of the job's results under ``to``, each verified, then renamed.
    ``note``: told what the user should know that does not stop the fetch (an unreadable subfolder);
    ``links``: a local platform may hard-link a finished job's big files (:meth:`_Transfer.link`)."""
    try:  # a PATH outside the folder is a usage error, found before any record or cluster is read
        wanted = list(dict.fromkeys(rel_path(p, "PATH") for p in paths))
    except TaoError as exc:
        raise UsageError(str(exc)) from None
    if not str(to):
        raise UsageError("--to needs a folder")
    rec = load_for(job_id, platform, "fetch")
    adapter = get(rec.platform)
    loc = adapter.results_location(rec)
    dest = Path(to)
    made_dest = not dest.exists() and not dest.is_symlink()
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise TaoError(f"--to {dest} exists and is not a folder") from None
    if not dest.is_dir():
        raise TaoError(f"--to {dest} is not a folder")
    meter = Meter(emit, clock=clock)
    try:
        return _fetch_into(rec, adapter, loc, wanted, dest, force, meter, note, links)
    except BaseException:
        if made_dest:  # a refused fetch leaves no empty --to behind (nor a staging folder with nothing to resume)
            try:
                dest.rmdir()
            except OSError:
                pass
        raise


def _fetch_into(rec: Record, adapter: Platform, loc: ResultsLocation, wanted: list[str], dest: Path, force: bool,
                meter: Meter, note: Callable[[str], None] | None, links: bool) -> list[Fetched]:
    with signals_interrupt(), _staging(dest, rec.id) as (staging, shared):  # kill: verified bytes stay
        transfer = _Transfer(dest, force, meter, note, staging, links=links)
        try:
            try:
                facts = adapter.fetch_results(rec, loc, wanted, staging, transfer)
            except NotInResults as exc:
                raise TaoError(f"{exc}: see tao_jobs.py artifacts {rec.id}") from None
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            shutil.rmtree(staging, ignore_errors=True)
            raise TaoError(f"--to {dest}: the disk is full ({exc.strerror}): the partial files were removed; free "
                           "space there or pick another --to, and fetch again") from None
        except BaseException:
            if not any((v or {}).get("have") for v in _read_state(staging).values()):
                shutil.rmtree(staging, ignore_errors=True)  # nothing verified to resume from: leave no folder
            raise
        meter.finish()
        if not facts:
            raise TaoError("nothing to fetch: the paths hold no regular file")
        missing = [f.path for f in facts if f.path not in transfer.fetched]
        if missing:
            raise TaoError(f"{missing[0]} did not arrive: run the fetch again")
        if shared:  # every file placed: nothing to resume
            shutil.rmtree(staging, ignore_errors=True)
        made = _make_links(dest, transfer.cluster_links, transfer.fetched, force, transfer.note)
        return [transfer.fetched[f.path] for f in facts] + made


def _make_links(dest: Path, links: dict[str, str], fetched: dict[str, Fetched], force: bool,
                note: Callable[[str], None]) -> list[Fetched]:
    """The cluster's links to fetched files made again under ``dest``, relative as TAO makes its ``*_latest.pth``
    (the folder can move); one already here is kept; one whose target was not fetched, or whose name is taken
    (without ``force``), is said and not made."""
    out = []
    for name, target in links.items():
        if target not in fetched:
            note(f"{name} is a link to {target}, which was not fetched: the link was not made (fetch {target} too)")
            continue
        path, to = dest / name, os.path.relpath(target, os.path.dirname(name) or ".")
        try:
            _way_clear(dest, name)
            same = path.is_symlink() and os.readlink(path) == to  # made by an earlier fetch
            if path.is_dir() and not path.is_symlink():
                raise TaoError(f"{path} is a folder")
            if (path.exists() or path.is_symlink()) and not force and not same:
                raise TaoError(f"{path} exists (pass --force to replace it)")
        except TaoError as exc:
            note(f"the link {name} -> {target} was not made: {exc}")
            continue
        if not same:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tao-link")
            tmp.unlink(missing_ok=True)
            os.symlink(to, tmp)
            os.replace(tmp, path)
        f = fetched[target].file
        out.append(Fetched(ResultFile(name, f.size, f.mtime), str(path), "a link, as in the results folder",
                           link_to=target))
    return out


@contextmanager
def _staging(dest: Path, job_id: str) -> Iterator[tuple[Path, bool]]:
    """The job's staging folder under ``dest`` (kept on failure: a rerun resumes from it), locked; when another
    fetch of the job into ``dest`` holds it, a private one removed at the end (both fetches work)."""
    import fcntl

    shared = dest / f".tao-fetch-{job_id}"
    try:
        shared.mkdir(mode=0o700, exist_ok=True)
        if shared.is_symlink() or not shared.is_dir():
            raise TaoError(f"{shared} is in the way (not a folder): remove it")
        fd = os.open(shared / "lock", os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        raise TaoError(f"--to {dest}: cannot write there ({exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        private = Path(tempfile.mkdtemp(prefix=f".tao-fetch-{job_id}-", dir=dest))
        try:
            yield private, False
        finally:
            shutil.rmtree(private, ignore_errors=True)
        return
    try:
        yield shared, True
    finally:
        os.close(fd)
