"""Writing the regular files of an untrusted tar stream under one folder, and nothing else.

A results folder is written by the training container, so every member of
the tar a cluster sends is untrusted. :func:`extract` never calls
``tarfile.extractall``: it reads the stream once (``r|``, no seeking, so a
pipe works), accepts only the regular files it was told to expect, refuses
links, devices, FIFOs, absolute names and ``..`` in one line, and writes each
file itself (``O_EXCL | O_NOFOLLOW`` under a fresh folder), hashing it as it
goes. It works the same on every Python the bank supports (3.10 has no
extraction filters before 3.10.12).
"""
from __future__ import annotations

import os
import posixpath
import tarfile
from pathlib import Path
from typing import BinaryIO, Callable, Mapping

from .errors import TaoError
from .paths import is_member

CHUNK = 1 << 20


def member_name(raw: str) -> str | None:
    """A member's name relative to the folder (``./a/b`` -> ``a/b``), or None when it is not one."""
    name = raw[2:] if raw.startswith("./") else raw
    name = name.rstrip("/") if name.endswith("/") else name
    return name if is_member(name) and posixpath.normpath(name) == name else None


def _kind(m: tarfile.TarInfo) -> str:
    for test, word in ((m.issym, "a symbolic link"), (m.islnk, "a hard link"), (m.ischr, "a character device"),
                       (m.isblk, "a block device"), (m.isfifo, "a FIFO")):
        if test():
            return word
    return "not a regular file"


def write_file(src: BinaryIO, into: Path, name: str, advance: Callable[[int], None], done: int,
               limit: int | None = None) -> int:
    """Copy ``src`` to the new file ``into/name`` (never through a link, never over a file); bytes so far.
    ``limit``: the size the cluster listed; not one byte more is written (a longer source is refused)."""
    target = into / name
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    written = 0
    with os.fdopen(fd, "wb") as out:
        while True:
            chunk = src.read(CHUNK if limit is None else min(CHUNK, limit - written + 1))
            if not chunk:
                break
            if limit is not None and written + len(chunk) > limit:
                raise TaoError(f"{name}: more bytes arrived than the {limit} the cluster listed: it changed during "
                               "the download; run the fetch again")
            out.write(chunk)
            written += len(chunk)
            done += len(chunk)
            advance(done)
    return done


def extract(stream: BinaryIO, into: Path, expected: Mapping[str, int], advance: Callable[[int], None],
            *, what: str = "the download") -> set[str]:
    """Write the expected regular files of the tar ``stream`` under the empty folder ``into``; their names.

    ``expected``: each file's name and the size the cluster listed. Folders in the stream are skipped (they
    are made for the files); a link, device, FIFO, absolute or ``..`` name, a file not expected, or one whose
    size differs from the listed one (checked before a byte is written), is refused.
    ``advance(bytes so far)`` follows the content.
    """
    wanted = dict(expected)
    got: set[str] = set()
    done = 0
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for m in tar:
                name = member_name(m.name)
                if name is None:
                    raise TaoError(f"{what}: refused member {m.name!r}: an absolute or '..' name, or one with "
                                   "control characters")
                if m.isdir():
                    continue
                if not m.isreg():
                    raise TaoError(f"{what}: refused {name!r}: {_kind(m)} (only regular files are fetched)")
                if name not in wanted:
                    raise TaoError(f"{what}: refused {name!r}: not one of the files the cluster listed")
                if name in got:
                    raise TaoError(f"{what}: refused {name!r}: it came twice")
                if m.size != wanted[name]:
                    raise TaoError(f"{what}: refused {name!r}: it holds {m.size} bytes, the cluster listed "
                                   f"{wanted[name]}: it changed during the download; run the fetch again")
                src = tar.extractfile(m)
                assert src is not None
                done = write_file(src, into, name, advance, done, limit=wanted[name])
                got.add(name)
    except tarfile.TarError as exc:
        raise TaoError(f"{what} is not a complete tar stream ({exc}): run it again") from None
    return got
