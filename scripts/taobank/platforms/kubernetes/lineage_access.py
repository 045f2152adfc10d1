"""A child job (``submit --parent``) reading its parent's results on Kubernetes: the same volume, mounted.

The parent's folder is on a volume the parent mounted (tier A). When a mount of the child covers it, that
mount must show the same folder of the same volume (the same PVC, or NFS server and export, and the same
place in it after ``sub_path``): a different volume at the same path would make ``{parent.checkpoint}``
name a file the parent never wrote, so it is refused. When no mount of the child covers it, the parent's
own mount of that volume (from its saved spec) is added read-only at the same path, so
``{parent.results_dir}`` means the same folder in both pods.

A parent that kept its results in S3 (tier C) has no folder to mount: the child, itself tier C, downloads
the files it names (the checkpoint) in its fetch init container, as ``s3_inputs`` into its staging folder.
"""
from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import Sequence

from ...core import jobfiles
from ...errors import TaoError
from ...paths import is_under
from .render import staging_dir
from .spec import KubernetesSpec
from ...records import Record


def _parent_spec(parent: Record) -> dict:
    from .logs import saved_spec  # the spec the parent's pods (and the results reader) ran with

    spec = saved_spec(parent)
    if spec is None:
        try:
            spec, _ = jobfiles.load_spec(parent.id)
        except TaoError:
            spec = {}
    return spec


def _covering(mounts: list, folder: str) -> dict | None:
    under = [m for m in mounts if isinstance(m, dict) and is_under(folder, str(m.get("mount_path") or ""))]
    return max(under, key=lambda m: len(m["mount_path"])) if under else None


def _volume(m: dict) -> tuple:
    if m.get("pvc"):
        return ("pvc", m["pvc"])
    nfs = m.get("nfs") or {}
    return ("nfs", nfs.get("server"), posixpath.normpath(str(nfs.get("path") or "/")))


def _place(m: dict, folder: str) -> str:
    """Where ``folder`` is inside the volume ``m`` mounts (its ``sub_path`` applied)."""
    inside = posixpath.relpath(folder, m["mount_path"])
    return posixpath.normpath(posixpath.join("/", str(m.get("sub_path") or ""), inside))


def _named(m: dict) -> str:
    vol = _volume(m)
    text = f"PVC {vol[1]}" if vol[0] == "pvc" else f"NFS {vol[1]}:{vol[2]}"
    return text + (f" (sub_path {m['sub_path']})" if m.get("sub_path") else "")


def reachable(spec: KubernetesSpec, parent: Record, folder: str) -> KubernetesSpec:
    """``spec`` whose pod sees ``folder`` of the parent's volume; one line when it would see another volume there,
    or when the parent's volume cannot be named."""
    mounts = list(spec.mounts or [])
    src = _covering(list(_parent_spec(parent).get("mounts") or []), folder)
    mine = _covering(mounts, folder)
    if mine is not None:
        if src is None:
            raise TaoError(f"--parent {parent.id}: the bank kept no spec naming the volume of its results folder "
                           f"{folder}, so it cannot tell that this job's mount at {mine['mount_path']} shows it; "
                           "nothing was submitted")
        if _volume(mine) != _volume(src) or _place(mine, folder) != _place(src, folder):
            raise TaoError(f"--parent {parent.id}: this job mounts {_named(mine)} at {mine['mount_path']}, but the "
                           f"parent's results folder {folder} is on {_named(src)} at {src['mount_path']}: mount that "
                           "volume there, or elsewhere and let the bank add it read-only; nothing was submitted")
        return spec
    if src is None:
        raise TaoError(f"--parent {parent.id}: its results folder {folder} is on no volume this job mounts and "
                       "the bank cannot tell which volume holds it: mount it (--pvc-mount CLAIM:PATH); nothing was "
                       "submitted")
    if any(m.get("mount_path") == src["mount_path"] for m in mounts):
        raise TaoError(f"--parent {parent.id}: this job mounts something else at {src['mount_path']}, where the "
                       "parent's results volume is: mount that volume there instead; nothing was submitted")
    return replace(spec, mounts=mounts + [{**src, "read_only": True}])


def fetched(spec: KubernetesSpec, job: Record, folder: str, files: dict[str, str],
            replaces: Sequence[str] = ()) -> tuple[KubernetesSpec, dict[str, str]]:
    """``spec`` downloading ``files`` (name -> path inside the S3 ``folder`` of ``job``) into its staging
    folder before the command runs (``s3_inputs``), and their paths there; the entries that downloaded to a
    path in ``replaces`` go (a continued job's old checkpoint). One line when ``spec`` is not tier C."""
    staging = staging_dir(spec)
    if staging is None:
        raise TaoError(f"job {job.id} keeps its results in S3 ({folder}): a job reads them only as a tier C job, "
                       "whose fetch step downloads them: give it storage_tier C, an s3:// results_dir and the S3 "
                       "credentials (--secret-env AWS_ACCESS_KEY_ID ...); nothing was submitted")
    inputs = [i for i in spec.s3_inputs or [] if i.get("path") not in replaces]
    where: dict[str, str] = {}
    for name, rel in files.items():
        local = posixpath.join(staging, f"from-{job.id}", rel)
        if not any(i.get("path") == local for i in inputs):
            inputs.append({"uri": f"{folder.rstrip('/')}/{rel}", "path": local})
        where[name] = local
    return replace(spec, s3_inputs=inputs), where
