"""A child job (``submit --parent``) reading its parent's results on Kubernetes: the same volume, mounted.

The parent's folder is on a volume the parent mounted (tier A). When no mount of the child covers
it, the parent's own mount of that volume (from its saved spec) is added read-only at the same
path, so ``{parent.results_dir}`` means the same folder in both pods.
"""
from __future__ import annotations

from .. import savedspec
from ..errors import TaoError
from ..paths import is_under


def reachable(spec: dict, parent: dict, folder: str) -> dict:
    """``spec`` whose pod sees ``folder``; one line when the parent's volume cannot be named."""
    mounts = list(spec.get("mounts") or [])
    if any(is_under(folder, m.get("mount_path", "")) for m in mounts):
        return spec
    try:
        pspec, _ = savedspec.load(parent["id"])
    except TaoError:
        pspec = {}
    under = [m for m in pspec.get("mounts") or [] if is_under(folder, m.get("mount_path", ""))]
    if not under:
        raise TaoError(f"--parent {parent['id']}: its results folder {folder} is on no volume this job mounts and "
                       "the bank cannot tell which volume holds it: mount it (--pvc-mount CLAIM:PATH); nothing was "
                       "submitted")
    src = max(under, key=lambda m: len(m["mount_path"]))
    if any(m.get("mount_path") == src["mount_path"] for m in mounts):
        raise TaoError(f"--parent {parent['id']}: this job mounts something else at {src['mount_path']}, where the "
                       "parent's results volume is: mount that volume there instead; nothing was submitted")
    return {**spec, "mounts": mounts + [{**src, "read_only": True}]}
