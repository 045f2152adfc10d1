"""Private, atomic file writes: the one way the bank writes a file of its own state.

A temp file in the same folder (created mode 600 whatever the umask), written
and fsynced, then renamed over the target and the folder fsynced: a writer
killed at any point leaves the old file or the new one, never a torn one.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


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


def write_private(path: Path | str, text: str) -> None:
    """Replace ``path`` atomically with ``text`` (UTF-8), mode 600."""
    path = Path(path)
    tmp = write_temp(path.parent, f".{path.name}.", text.encode("utf-8"))
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    fsync_dir(path.parent)
