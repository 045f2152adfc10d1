"""Private, atomic file writes and bounded reads: the one way the bank writes and reads a file.

A temp file in the same folder (created mode 600 whatever the umask), written
and fsynced, then renamed over the target and the folder fsynced: a writer
killed at any point leaves the old file or the new one, never a torn one.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable

#: Bytes per read of a local copy (a fetch from Docker or S3): large enough for C speed, small enough for memory.
CHUNK = 1 << 20


def write_temp(folder: Path, prefix: str, data: bytes) -> str:
    """``data`` in a new mode-600 temp file of ``folder`` (fsynced); its path."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_private(path: Path | str, text: str | bytes) -> None:
    """Replace ``path`` atomically with ``text`` (UTF-8, or bytes as they are), mode 600."""
    path = Path(path)
    tmp = write_temp(path.parent, f".{path.name}.", text if isinstance(text, bytes) else text.encode("utf-8"))
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    fsync_dir(path.parent)


#: Largest file the bank reads whole: specs, records, caches, env files and logs are far smaller.
MAX_READ_BYTES = 16 * 1024 * 1024


def read_cache(path: Path | str, what: str, *, max_bytes: int = 1024 * 1024) -> dict:
    """A small JSON object the bank keeps as a cache (its own file, never followed through a link): {} when it is
    missing, unreadable, damaged or not an object, which only costs what the cache saves."""
    from . import bounded_parse
    from .errors import TaoError

    try:
        raw = read_regular(path, what, max_bytes=max_bytes, follow_links=False, missing_ok=True)
        data = bounded_parse.json_value(raw, what) if raw else {}
    except TaoError:
        return {}
    return data if isinstance(data, dict) else {}


def read_regular(path: Path | str, what: str, *, max_bytes: int = MAX_READ_BYTES, follow_links: bool = True,
                 missing_ok: bool = False) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes``; else one-line TaoError.

    The one way the bank reads a file: a FIFO, a device (``/dev/zero``) or a
    socket never blocks or exhausts memory, because the file is opened
    non-blocking and checked with ``fstat`` before any read. ``follow_links``
    False (the bank's own state files) refuses a symlink. ``missing_ok``: a
    missing file gives None.
    """
    from .errors import TaoError

    p = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise TaoError(f"cannot read {what} {p}: no such file", exit_code=2) from None
    except OSError as exc:
        why = "a symlink (never followed here)" if exc.errno in (errno.ELOOP, errno.EMLINK) else exc.strerror
        raise TaoError(f"cannot read {what} {p}: {why}", exit_code=2) from None
    except ValueError:  # a NUL in the path: no file can have that name
        raise TaoError(f"cannot read {what} {str(p)!r}: a path cannot hold a NUL character", exit_code=2) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise TaoError(f"{what} {p} is a directory: give the file", exit_code=2)
        if not stat.S_ISREG(st.st_mode):
            raise TaoError(f"{what} {p} is not a regular file (a FIFO, device or socket): give a plain file", exit_code=2)
        if st.st_size > max_bytes:
            raise TaoError(f"{what} {p} is larger than {max_bytes} bytes: that is not a {what}", exit_code=2)
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise TaoError(f"cannot read {what} {p}: {exc.strerror}", exit_code=2) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise TaoError(f"{what} {p} is larger than {max_bytes} bytes: that is not a {what}", exit_code=2)
    return data


def read_each(paths: Iterable[Path], what: str, **kwargs: object) -> list[tuple[Path, bytes | None, Exception | None]]:
    """:func:`read_regular` of each path, one call for a folder's files (a list of records): ``(path, its bytes
    or None, None)``, or ``(path, None, the one-line TaoError)`` for a file that cannot be read."""
    from .errors import TaoError

    out: list[tuple[Path, bytes | None, Exception | None]] = []
    for p in paths:
        try:
            out.append((p, read_regular(p, what, **kwargs), None))  # type: ignore[arg-type]
        except TaoError as exc:
            out.append((p, None, exc))
    return out

def read_text(path: Path | str, what: str, **kwargs: object) -> str | None:
    """:func:`read_regular` decoded as UTF-8 (one-line TaoError when it is not)."""
    from .errors import TaoError

    data = read_regular(path, what, **kwargs)  # type: ignore[arg-type]
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TaoError(f"{what} {path} is not UTF-8 text: save it as UTF-8") from None


def flag_yaml(path: str, flag: str, what: str, max_bytes: int) -> object:
    """The YAML of a file a flag names (``--sweep-file``, ``--space-file``): a regular file under ``max_bytes`` (a
    FIFO or /dev/zero refused, never waited on), parsed bounded with unique keys at every level; a problem is the
    user's, one line (UsageError)."""
    from . import bounded_parse
    from .errors import TaoError, UsageError

    try:
        text = read_text(path, what, max_bytes=max_bytes) or ""
        return bounded_parse.yaml_value(text, f"{flag} {path}", unique_keys=True)
    except TaoError as exc:
        raise UsageError(str(exc)) from None
