"""A Docker job reading another job's results (``submit --parent``, ``continue``): a read-only bind mount.

The parent's results folder is a folder of this host, and the bank names it by its host path
(``{parent.results_dir}``, the checkpoint a ``continue`` resumes from). The child sees it at the same
path: the folder is bind-mounted read-only at its own host path unless a mount of the child already
shows it there.
"""
from __future__ import annotations

import posixpath
from dataclasses import replace

from ...errors import TaoError
from ...paths import is_under
from ...records import Record
from .spec import DockerSpec


def _same_path(folder: str, mount: dict) -> bool:
    """The mount shows ``folder`` at ``folder`` (host and container paths agree below it)."""
    host, target = mount.get("host", ""), mount.get("container", "")
    return is_under(folder, host) and is_under(folder, target) and \
        posixpath.normpath(host) == posixpath.normpath(target)


def reachable(spec: DockerSpec, parent: Record, folder: str) -> DockerSpec:
    """``spec`` whose container sees ``folder`` (read-only) at its host path; one line when a mount is in the way."""
    mounts = list(spec.mounts or [])
    out = with_folder(mounts, parent, folder)
    return spec if out is mounts else replace(spec, mounts=out)


def with_folder(mounts: list[dict], parent: Record, folder: str) -> list[dict]:
    """``mounts`` (as they are when one shows ``folder`` at its host path already) with ``folder`` bind-mounted
    read-only at its host path; one line when a mount is in the way."""
    if any(_same_path(folder, m) for m in mounts):
        return mounts
    for m in mounts:
        target = m.get("container", "")
        if is_under(folder, target) or is_under(target, folder):
            raise TaoError(f"job {parent.id}'s results folder {folder} would be mounted at the same path, where "
                           f"this job mounts {m.get('host')} at {target}: mount it elsewhere; nothing was submitted")
    return mounts + [{"host": folder, "container": folder, "read_only": True}]
