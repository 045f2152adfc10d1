"""Small local files to the cluster over the verb's one SSH connection.

Two uses, one rule set:

* ``spec_files`` of a job spec (``{name: local path}``, the TAO experiment
  spec and configs): packed into the job's staging bundle, unpacked into
  ``<job_dir>/specs/`` (mode 600), their sha256 recorded and checked on the
  cluster; the command names them as ``{specs}/<name>``.
* ``tao_slurm.py stage FILE... --dest lustre:///abs/dir``: small inputs
  (a checkpoint, a label map) copied into a cluster folder, checked the same way.

Names are plain file names (no folders, no ``..``), files are regular files
read on this machine (a symlink is followed, a folder refused), and sizes are
capped (versions.yaml ``slurm.uploads``): training data belongs on the shared
filesystem already, not in an SSH stream. ``stage`` also takes a folder
(:func:`collect_tree`): every file under it keeps its relative path, links
are refused, the folder's total is capped, and a ``<folder>.sha256``
manifest goes next to it.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from ... import fsio, pins
from ...errors import TaoError
from ...redact import shown

#: The token a command uses for the uploaded spec folder: ``-e {specs}/train.yaml``.
PLACEHOLDER = "{specs}"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}\Z")
RESERVED_NAMES = ("spec.json",)  # the staged TAO spec object keeps its file


@dataclass(frozen=True)
class Upload:
    name: str
    data: bytes
    sha256: str


def limits() -> dict[str, int]:
    return {k: int(v) for k, v in dict(pins.resolve("slurm.uploads")).items()}


def _mib(n: int) -> str:
    return f"{n / 1048576:g} MiB"


def check_name(name: str, what: str = "file name") -> str:
    name = str(name)
    if not _NAME.match(name) or name in (".", ".."):
        raise TaoError(f"{what} {shown(name)} must be a plain file name (letters, digits, '._-'; no folder, "
                       "no '..', not starting with '.' or '-')")
    return name


def read(name: str, local: str, *, max_file: int) -> Upload:
    """One local regular file, size-capped."""
    path = Path(os.path.expanduser(str(local)))
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise TaoError(f"{shown(str(local))} does not exist on this machine: give the path of a local file") from None
    if not real.is_file():
        raise TaoError(f"{shown(str(local))} is not a regular file: upload files one by one (folders are refused)")
    size = real.stat().st_size
    if size > max_file:
        raise TaoError(f"{shown(str(local))} is {_mib(size)}, over the {_mib(max_file)} upload limit: put it on the "
                       "shared filesystem with your site's copy tools and pass its lustre:// path")
    data = fsio.read_regular(real, "upload", max_bytes=max_file) or b""  # swapped for a FIFO meanwhile: refused
    return Upload(check_name(name), data, hashlib.sha256(data).hexdigest())


def collect(files: Mapping[str, str] | Iterable[tuple[str, str]], *, what: str) -> list[Upload]:
    """Read ``{name: local path}`` (or pairs); names unique, totals capped."""
    lim = limits()
    pairs = list(files.items()) if isinstance(files, Mapping) else list(files)
    out: list[Upload] = []
    seen: set[str] = set()
    for name, local in pairs:
        name = check_name(name, f"{what} name")
        if name in seen or name in RESERVED_NAMES:
            raise TaoError(f"{what} name {name} is used twice or reserved: give each file its own name")
        seen.add(name)
        out.append(read(name, local, max_file=lim["max_file_bytes"]))
    total = sum(len(u.data) for u in out)
    if total > lim["max_total_bytes"]:
        raise TaoError(f"{what}: {_mib(total)} in all, over the {_mib(lim['max_total_bytes'])} limit: put large "
                       "files on the shared filesystem and pass their lustre:// paths")
    return out


def collect_tree(local: str, *, what: str) -> list[Upload]:
    """Every regular file under the local folder ``local`` as ``<folder>/<relative path>`` (each part a plain
    name), no links, the folder's total capped (``max_folder_bytes``); plus the ``<folder>.sha256`` manifest
    (``sha256sum -c`` lines) that goes next to it."""
    lim = limits()
    root = Path(os.path.expanduser(str(local)))
    if root.is_symlink() or not root.is_dir():
        raise TaoError(f"{shown(str(local))} is not a folder on this machine (links are not followed)")
    top = check_name(root.resolve().name, f"{what} folder name")
    out: list[Upload] = []
    total = 0
    for here, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        rel_dir = Path(here).relative_to(root).as_posix()
        for name in sorted(files) + [d for d in dirs if (Path(here) / d).is_symlink()]:
            path = Path(here) / name
            shown_rel = f"{top}/{'' if rel_dir == '.' else rel_dir + '/'}{name}"
            if path.is_symlink() or not path.is_file():
                raise TaoError(f"{what}: {shown(shown_rel)} is a link or not a regular file: stage regular files only")
            parts = [check_name(p, f"{what} path part") for p in (rel_dir.split("/") if rel_dir != "." else [])]
            total += path.stat().st_size
            if total > lim["max_folder_bytes"]:
                raise TaoError(f"{what}: folder {top} holds more than {_mib(lim['max_folder_bytes'])}: put large "
                               "data on the shared filesystem with your site's copy tools")
            data = path.read_bytes()
            out.append(Upload("/".join([top, *parts, check_name(name, f"{what} file name")]), data,
                              hashlib.sha256(data).hexdigest()))
    if not out:
        raise TaoError(f"{what}: folder {shown(str(local))} holds no file")
    manifest = "".join(f"{u.sha256}  {u.name}\n" for u in out).encode()
    return out + [Upload(f"{top}.sha256", manifest, hashlib.sha256(manifest).hexdigest())]


def checksums(uploads: Iterable[Upload]) -> list[str]:
    """``sha256sum -c`` lines (``<hex>  <name>``), checked on the cluster after unpacking."""
    return [f"{u.sha256}  {u.name}" for u in uploads]


def substitute(argv: list[str], specs_dir: str, names: Iterable[str], *, shell: bool = False) -> list[str]:
    """``{specs}`` -> the job's spec folder in every argument; a ``{specs}/X`` naming no upload is refused.

    ``shell``: the arguments are shell text (a string command run by ``bash -c``), so the folder goes in
    shell-quoted: a results base with spaces stays one word.
    """
    known = set(names)
    out = []
    for arg in argv:
        if PLACEHOLDER in arg:
            for m in re.finditer(re.escape(PLACEHOLDER) + r"/([^\s/'\"]+)", arg):
                if m.group(1) not in known:
                    raise TaoError(f"the command names {PLACEHOLDER}/{m.group(1)} but spec_files has no "
                                   f"{m.group(1)}: add it (spec_files: {{{m.group(1)}: ./{m.group(1)}}})")
            arg = arg.replace(PLACEHOLDER, shlex.quote(specs_dir) if shell else specs_dir)
        out.append(arg)
    return out
