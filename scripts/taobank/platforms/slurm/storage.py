"""Storage on the cluster's shared filesystem (Lustre) and job staging.

Dataset URIs are ``lustre:///abs/path`` (``slurm://`` metadata paths map to
the same Lustre path); a bare local path or ``file://`` is refused because the
job runs on the cluster, not on the agent's machine. Results default to
``<SLURM_BASE_RESULTS_DIR>/results/<job_id>``; the job directory holds
``specs/ env/ meta/ sbatch/ slurm-logs/`` and the mode-600 credentials file.
"""
from __future__ import annotations

import io
import json
import posixpath
import re
import shlex
import tarfile
import time
from typing import Any, Iterable, Mapping

from ...envfile import check_job_env, secret_values
from ...contract import RESULTS_VAR
from ...errors import TaoError
from .spec import SlurmSpec
from ...paths import abs_path
from ...redact import shown

#: Files inside a job directory (relative paths).
SPEC_FILE = "specs/spec.json"
ENV_FILE = "env/env.json"
META_FILE = "meta/meta.json"
CREDS_FILE = "env/credentials.sh"
MARKER_FILE = "meta/exit.json"
RETRIES_FILE = "meta/retries.jsonl"
LOG_DIR = "slurm-logs"

#: What the sbatch script itself sets; a job's env may not override it (the footer reads TAO_CREDS_FILE).
RESERVED_ENV = ("TAO_CREDS_FILE", "TAO_JOB_DIR", "TAO_MARKER", "TAO_SCRIPT", "TAO_MASTER_ADDR", "TAO_MASTER_PORT",
                "TAO_API_JOB_ID", "TAO_API_RESULTS_DIR", "TAO_DATASET_ROOT", "TAO_NUM_GPU_PER_NODE", "TAO_WORLD_SIZE",
                "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NUM_GPU_PER_NODE", "NODE_RANK", "NNODES",
                "NPROC_PER_NODE", "TAO_SLURM_JOB_REF", RESULTS_VAR)
_SPEC_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+\Z")


def cluster_path(uri: str, what: str = "dataset") -> str:
    """``lustre:///abs`` or ``slurm://[cluster]/abs`` -> ``/abs``; anything local is refused."""
    text = str(uri).strip()
    if text.startswith("lustre://"):
        path = text[len("lustre://"):]
    elif text.startswith("slurm://"):
        rest = text[len("slurm://"):]
        path = rest if rest.startswith("/") else "/" + rest.partition("/")[2]
        if path == "/":
            raise TaoError(f"{what} {shown(uri)} names no path: use lustre:///absolute/path")
    elif text.startswith("file://") or text.startswith("/") or "://" not in text:
        raise TaoError(
            f"{what} {shown(uri)} is a local path: SLURM jobs run on the cluster, so put the data on its shared "
            "filesystem and pass lustre:///absolute/path")
    else:
        # No S3/HF/NGC prefetch in the job: it would run inside the GPU allocation.
        raise TaoError(f"{what} {shown(uri)} is not on the cluster: SLURM jobs read the shared filesystem and inputs are "
                       "never fetched inside the job (GPU idle timeout); copy it to the shared filesystem before "
                       "submit (tao-data-io skill) and pass lustre:///absolute/path")
    return abs_path(posixpath.normpath(path) if path.startswith("/") else path, what)  # a URI's '..' is resolved


_USER_DIR = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\Z")


def login_user(env: Mapping[str, str]) -> str | None:
    """The cluster user: ``SLURM_USER``, else the ``user@`` of the first ``SLURM_HOSTNAME`` entry
    (a submit needs one of them to connect); a ``--dry-run`` without either shows the local user."""
    import getpass

    user = (env.get("SLURM_USER") or "").strip()
    if not user:
        first = (env.get("SLURM_HOSTNAME") or "").split(",")[0].strip()
        user = first.partition("@")[0] if "@" in first else ""
    if not user:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = ""
    return user or None


def base_dir(spec: SlurmSpec | Mapping[str, Any], env: Mapping[str, str]) -> str:
    """``results_base`` of the spec, else ``SLURM_BASE_RESULTS_DIR``, else ``<pinned default>/<SLURM_USER>``
    (one folder per user: a site's users never share, or overwrite, each other's results)."""
    from ... import pins

    raw = SlurmSpec.of(spec).results_dir or env.get("SLURM_BASE_RESULTS_DIR")
    if not raw:
        user = login_user(env)
        if not user or not _USER_DIR.match(user):
            raise TaoError("no results base: set SLURM_BASE_RESULTS_DIR to your folder on the shared filesystem "
                           "(or SLURM_USER, for the default <base>/<user>)")
        raw = posixpath.join(str(pins.resolve("slurm.base_results_dir")), user)
    raw = str(raw)
    return any_cluster_path(raw, "results base")


def any_cluster_path(value: str, what: str) -> str:
    """A folder given as ``lustre:///abs`` (or ``slurm://``) or as the bare absolute path, checked by the one path rule."""
    text = str(value)
    return cluster_path(text, what) if "://" in text else abs_path(text, what)


def results_dir(base: str, job_id: str) -> str:
    return posixpath.join(base, "results", job_id)


def results_parent(results: str, job_id: str) -> str:
    """What TAO_API_RESULTS_DIR gets: the folder's parent (TAO's alias pair, with TAO_API_JOB_ID the folder's name).
    TAO's own code reads neither: a TAO command is given ``results_dir=`` the folder (:mod:`taobank.tao_command`)."""
    if posixpath.basename(results) != job_id:
        raise TaoError(f"results dir {results} does not end with the job id {job_id}: the container would write elsewhere")
    return posixpath.dirname(results)


def job_dir(base: str, job_id: str) -> str:
    return posixpath.join(base, "jobs", job_id)


def dataset_paths(spec: SlurmSpec | Mapping[str, Any]) -> tuple[list[str], dict[str, str], str | None]:
    """Required cluster paths, spec-key overrides and the dataset root.

    Root mode: ``dataset.root`` + ``dataset.required`` (files under the root).
    Spec-key mode: ``dataset.spec_keys`` ``{"custom.train_dataset.annotation_path": "lustre:///..."}``.
    """
    spec = SlurmSpec.of(spec)
    ds = spec.dataset or {}
    required: list[str] = []
    overrides: dict[str, str] = {}
    root = None
    if ds.get("root"):
        root = cluster_path(ds["root"])
        required.append(root)
        for rel in ds.get("required") or []:
            rel = str(rel)
            if rel.startswith("/") or ".." in rel.split("/"):
                raise TaoError(f"dataset required entry {shown(rel)} leaves the dataset root {root}: give paths inside it")
            joined = abs_path(posixpath.join(root, rel), "dataset required entry")
            required.append(joined)
    for key, uri in (ds.get("spec_keys") or {}).items():
        if not _SPEC_KEY.match(str(key)):
            raise TaoError(f"spec key {key!r} is not a dotted spec field like custom.train_dataset.annotation_path")
        overrides[str(key)] = cluster_path(uri, f"dataset {key}")
        required.append(overrides[str(key)])
    for uri in spec.inputs or []:
        required.append(cluster_path(uri, "input"))
    return list(dict.fromkeys(required)), overrides, root


def check_env(env_vars: Mapping[str, Any] | None, nccl_env: Mapping[str, Any] | None = None) -> tuple[dict, dict]:
    """Plain and NCCL environment of the job (the bank's one env rule; secret-looking names refused)."""
    return check_job_env(dict(env_vars or {}), dict(nccl_env or {}), reserved=RESERVED_ENV)


def collect_secrets(names: Iterable[str], env: Mapping[str, str]) -> dict[str, str]:
    """Secret values from the submitter's environment (never from a spec)."""
    return secret_values(names, env, unset="secret {name} is listed but not set in your environment: export it, "
                                           "then submit again")


def credentials_text(secrets: Mapping[str, str]) -> str:
    """The mode-600 file the job sources (values shell-quoted)."""
    lines = ["# job credentials: mode 600, removed when the job is really finished"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in secrets.items()]
    return "\n".join(lines) + "\n"


def compact_json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def bundle(files: Mapping[str, str | bytes]) -> str:
    """Base64 of a tar of the staged files, sent on stdin and unpacked remotely
    under ``umask 077`` (files 600, folders 700) in one remote command."""
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({posixpath.dirname(p) for p in files if posixpath.dirname(p)})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o700, now
            tar.addfile(info)
        for path, text in files.items():
            data = text if isinstance(text, bytes) else text.encode("utf-8")
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o600, now
            tar.addfile(info, io.BytesIO(data))
    import base64

    return base64.b64encode(buf.getvalue()).decode("ascii")
