"""Where a Kubernetes job's results go: the one rule, used by the renderer and by submit.

A pod's own filesystem is deleted with the pod, so ``results_dir`` must be
under a mounted volume (tier A) or an ``s3://`` prefix that the upload
sidecar fills at the end (tier C, written under the staging emptyDir
first). Anything else is refused in one line.

One folder per job by default: ``results_dir`` is the parent and the job
writes ``<results_dir>/<job id>``; with no ``results_dir`` the parent is the
first writable mount. ``results_exact: true`` makes ``results_dir`` the
folder itself. The container learns the place through ``RESULTS_DIR`` (the
folder, the name every platform sets) and the variables TAO reads,
``TAO_API_RESULTS_DIR`` (the parent) and ``TAO_API_JOB_ID`` (the folder's
name: the job id unless exact); the record keeps the folder.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Mapping

from ...contract import RESULTS_VAR
from ...errors import TaoError
from .spec import KubernetesSpec
from ...jobspec import given
from ...paths import is_under
from ...records import ID_PLACEHOLDER, NO_RESULTS_DIR

#: The variables the TAO container reads to know where to write (the parent + the folder name).
RESULTS_ENV = "TAO_API_RESULTS_DIR"
JOB_ENV = "TAO_API_JOB_ID"
#: What the record keeps for a job that was told to keep no results (--no-results).
NO_RESULTS = NO_RESULTS_DIR
#: Under the tier C staging emptyDir, where the results are written before the upload.
STAGED_RESULTS = "results"


@dataclass(frozen=True)
class Results:
    """Where one job's results go. ``folder`` is what the record keeps (``{id}`` = the job id)."""

    folder: str
    parent: str | None = None  # TAO_API_RESULTS_DIR in the pod (None: no results kept)
    name: str | None = None  # TAO_API_JOB_ID in the pod
    upload: tuple[str, str] | None = None  # tier C: (path in the pod, s3:// URI) the sidecar uploads

    @property
    def pod_folder(self) -> str | None:
        return posixpath.join(self.parent, self.name) if self.parent and self.name else None

    def env(self) -> list[dict]:
        if self.parent is None:
            return []
        return [{"name": RESULTS_ENV, "value": self.parent}, {"name": JOB_ENV, "value": self.name},
                {"name": RESULTS_VAR, "value": self.pod_folder}]

    def for_job(self, job_id: str) -> "Results":
        """The same plan with the job id in place of the placeholder."""
        def sub(v):
            return v.replace(ID_PLACEHOLDER, job_id) if isinstance(v, str) else v
        up = (sub(self.upload[0]), sub(self.upload[1])) if self.upload else None
        return Results(sub(self.folder), sub(self.parent), sub(self.name), up)


def _mounts(spec: KubernetesSpec) -> list[dict]:
    return list(spec.mounts or [])


def plan(spec: KubernetesSpec | Mapping[str, Any], *, staging: str | None = None) -> Results:
    """The results plan of ``spec`` (TaoError when they would be lost). ``{id}`` stands for the job id. A
    mapping (the spec file saved beside a record) is read as its typed spec."""
    spec = KubernetesSpec.of(spec)
    if spec.no_results:
        if spec.results_dir:
            raise TaoError("give results_dir or no_results, not both")
        return Results(NO_RESULTS)
    exact = bool(spec.results_exact)
    tier = given(spec.storage_tier, "A")
    wanted = spec.results_dir
    writable = [m for m in _mounts(spec) if not m.get("read_only")]
    if wanted is None:
        if exact:
            raise TaoError("results_exact needs results_dir: name the folder")
        if not writable:
            raise TaoError("results_dir: nothing mounted to keep results on (the pod's own disk is deleted with it): "
                           "mount a volume (--pvc-mount CLAIM:/results), give an s3:// results_dir (tier C), "
                           "or --no-results")
        wanted = writable[0]["mount_path"]
    wanted = str(wanted).rstrip("/") or "/"
    if wanted.startswith("s3://"):
        if tier != "C":
            raise TaoError(f"results_dir {wanted} is an S3 prefix: that needs storage_tier C (the upload sidecar), "
                           "or put results_dir under a mounted volume")
        if not staging:
            raise TaoError("tier C results need the staging folder")
        if len(wanted) <= len("s3://") or ".." in wanted.split("/"):
            raise TaoError(f"results_dir {wanted} names no bucket: give s3://bucket/prefix")
        base = posixpath.join(staging, STAGED_RESULTS)
        name = posixpath.basename(wanted) if exact else ID_PLACEHOLDER
        folder = wanted if exact else f"{wanted}/{ID_PLACEHOLDER}"
        return Results(folder, base, name, (posixpath.join(base, name), folder))
    if not wanted.startswith("/") or ".." in wanted.split("/"):
        raise TaoError(f"results_dir {wanted} must be an absolute path under a mounted volume or an s3:// prefix")
    under = [m for m in _mounts(spec) if is_under(wanted, m["mount_path"])]
    if not under:
        mounted = ", ".join(m["mount_path"] for m in _mounts(spec)) or "none"
        raise TaoError(f"results_dir {wanted} is on no mounted volume (mounted: {mounted}), so the results would be "
                       "deleted with the pod: mount one there (--pvc-mount CLAIM:PATH) or use an s3:// prefix (tier C)")
    deepest = max(under, key=lambda m: len(m["mount_path"]))
    if deepest.get("read_only"):
        raise TaoError(f"results_dir {wanted} is on {deepest['mount_path']}, which is mounted read-only: "
                       "pick a writable mount")
    if exact:
        if wanted == "/":
            raise TaoError("results_dir / cannot be a job's folder")
        return Results(wanted, posixpath.dirname(wanted), posixpath.basename(wanted))
    return Results(posixpath.join(wanted, ID_PLACEHOLDER), wanted, ID_PLACEHOLDER)
