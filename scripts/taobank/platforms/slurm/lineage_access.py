"""A child job (``submit --parent``) reading its parent's results on SLURM: the parent's folder read-only.

The parent's folder is under the same shared filesystem (and usually the same results base the child
writes to, which Pyxis mounts read-write). Pyxis applies ``--container-mounts`` in order and the
derived list puts parents before children, so a later ``FOLDER:FOLDER:ro`` bind of the parent's folder
covers that one folder read-only inside the read-write results base: the child can read the parent's
checkpoints and cannot change them. Without a container (``container_runtime: none``) the job runs
as the user on the host and nothing can be made read-only for it; the mount is then unused.
"""
from __future__ import annotations

from dataclasses import replace

from . import mounts, resources
from ...records import Record
from .spec import SlurmSpec


def reachable(spec: SlurmSpec, parent: Record, folder: str) -> SlurmSpec:
    """``spec`` with the parent's ``folder`` mounted read-only at its own path (a mount the user gave there wins)."""
    given = spec.container_mounts or resources.defaults()["container_mounts"]
    extra = mounts.parse(given)
    ro = mounts.parse(f"{folder}:{folder}:ro")[0]  # the one path rule (no ',' ':' or spaces: Pyxis splits on them)
    if any(m.dst == ro.dst for m in extra):
        return spec
    return replace(spec, container_mounts=",".join(m.text() for m in [*extra, ro]))
