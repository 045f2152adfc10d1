"""Docker's side of artifacts, fetch and prune: the results folder is a local bind mount, so the shared
scripts of :mod:`taobank.results_shell` run in a local ``sh`` (the same rules as on the clusters)."""
from __future__ import annotations

import errno
import os
import posixpath
import stat
from pathlib import Path
from typing import BinaryIO, ContextManager

from ... import results_shell
from ...contract import ResultFile, ResultsListing, ResultsLocation, Transfer
from ...errors import TaoError
from ...paths import abs_path
from ...fsio import CHUNK
from ...run import Result, pipe, run
from ...records import Record
from . import engine as eng


class _Local:
    """This host as a :class:`taobank.results_shell.Shell`."""

    def text(self, script: str, args: list[str], *, what: str) -> Result:
        return run(["sh", "-c", script, "tao", *args], check=False, timeout=results_shell.TEXT_TIMEOUT_S, what=what)

    def stream(self, script: str, args: list[str], *, stdin: str, what: str) -> ContextManager[BinaryIO]:
        return pipe(["sh", "-c", script, "tao", *args], stdin=stdin, what=what)


def location(rec: Record) -> ResultsLocation:
    folder = abs_path(eng.DockerFacts.of(rec).folder, "the record's results_dir")
    if posixpath.basename(folder) != rec.id:  # every Docker job writes <base>/<id>: anything else is damage
        raise TaoError(f"job {rec.id}: its record names {folder} as its results folder, which is not named "
                       "after the job: refused (restore the record, or read the folder yourself)")
    return ResultsLocation(folder, True)


def list_results(rec: Record, loc: ResultsLocation, *, status: bool) -> ResultsListing:
    return results_shell.list_folder(_Local(), loc.folder, status=status)


def fetch_results(rec: Record, loc: ResultsLocation, paths: list[str], into: Path,
                  transfer: Transfer) -> list[ResultFile]:
    """The listing by the shared script (the same refusals as on a cluster), then each file: a finished job's big
    file (:data:`LINK_MIN`) as a reflink where the filesystem makes one, else a hard link where it allows (and the
    user did not ask for copies), else a local copy: ``copy_file_range`` (no byte through this process)."""
    facts = results_shell.read_facts(_Local(), loc.folder, paths, transfer)
    done = 0
    changed: list[str] = []
    for f in facts:
        have = transfer.have(f)
        if have is None:
            continue
        try:
            src = open_inside(loc.folder, f.path)
        except OSError as exc:
            raise TaoError(f"{f.path} in {loc.folder} cannot be read ({exc.strerror}): it is gone, or a link "
                           "leads out of the folder: refused") from None
        try:
            st = os.fstat(src)
            if not stat.S_ISREG(st.st_mode):
                raise TaoError(f"{f.path} in {loc.folder} is no longer a regular file: refused")
            if (st.st_size, int(st.st_mtime)) != (f.size, int(f.mtime)):
                f, have = ResultFile(f.path, st.st_size, float(int(st.st_mtime))), 0
            cloned = False
            if rec.terminal and not have and f.size >= LINK_MIN:
                # a reflink is an independent copy for free (btrfs, XFS); else a hard link: the same file
                with transfer.part(f, 0) as w:
                    cloned = _clone(src, w)
                if not cloned and transfer.link(f, posixpath.join(loc.folder, f.path), src):
                    done += f.size
                    transfer.advance(done)
                    transfer.finish(f, "a hard link to the finished job's file (same disk, nothing copied)")
                    continue
            if cloned:
                done += f.size
                transfer.advance(done)
            else:
                with transfer.part(f, have) as w:
                    done = _copy(src, w, have, f.size, done, transfer)
            after = os.fstat(src)
        finally:
            os.close(src)
        if (after.st_size, int(after.st_mtime)) != (f.size, int(f.mtime)):
            transfer.discard(f)
            changed.append(f.path)
            continue
        transfer.verified(f, f.size)
        transfer.finish(f, "size+mtime (a local copy)")
    if changed:
        raise TaoError(f"{', '.join(changed)} changed while being fetched (a training still writing it): nothing of "
                       "it was kept; the other files were fetched; fetch it again once it is written")
    return facts


#: A finished job's file this big is fetched as a hard link where --to is on the same filesystem: checkpoints and
#: exported models, which nothing rewrites in place (smaller files, logs and status files are copied).
LINK_MIN = 64 << 20
#: Bytes per copy_file_range call (the progress line moves at least this often).
COPY_STEP = 64 << 20
#: FICLONE (linux/fs.h): the destination shares the source's blocks until either is written (btrfs, XFS).
_FICLONE = 0x40049409


def open_inside(folder: str, rel: str) -> int:
    """``folder/rel`` opened for reading without following a link at any step below ``folder`` (a training
    cannot swap a part for a link that leads out between the listing and the copy)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        parts = rel.split("/")
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=fd)
    finally:
        os.close(fd)


def _clone(src: int, w) -> bool:
    """``w`` made a reflink of ``src`` (FICLONE); False where the filesystem cannot."""
    import fcntl

    w.flush()
    try:
        fcntl.ioctl(w.fileno(), _FICLONE, src)
    except OSError:
        return False
    return True


def _copy(src: int, w, offset: int, size: int, done: int, transfer: Transfer) -> int:
    """Bytes [offset, size) of ``src`` into ``w`` at ``offset``; bytes moved in this run so far."""
    if offset == 0 and size and _clone(src, w):
        os.lseek(w.fileno(), size, os.SEEK_SET)
        transfer.advance(done + size)
        return done + size
    w.flush()
    dst = w.fileno()
    pos = offset
    kernel = hasattr(os, "copy_file_range")
    while pos < size:
        n = 0
        if kernel:
            try:
                n = os.copy_file_range(src, dst, min(COPY_STEP, size - pos), pos, pos)
            except OSError as exc:  # another filesystem or kernel: plain reads and writes
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                kernel = False
        if not kernel:
            n = os.pwrite(dst, os.pread(src, min(CHUNK, size - pos), pos), pos)
        if n == 0:
            break  # the file shrank: the size check after the copy says so
        pos += n
        done += n
        transfer.advance(done)
    return done


def remove_results(rec: Record, loc: ResultsLocation) -> str:
    return results_shell.remove_folder(_Local(), loc.folder, rec.id)


def remove_files(rec: Record, loc: ResultsLocation, delete: list[str], keep: dict[str, int]) -> list[ResultFile]:
    return results_shell.remove_files(_Local(), loc.folder, rec.id, delete, keep)


def list_results_many(recs: list[Record], locs: list[ResultsLocation], *, status: bool) -> list[ResultsListing | TaoError]:
    """A sweep's folders in ONE local ``sh`` (the same script as SLURM's one remote command)."""
    return results_shell.list_folders(_Local(), [loc.folder for loc in locs], status=status)
