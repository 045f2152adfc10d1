"""What a SLURM record's backend holds, each value checked before it reaches a remote command line."""
from __future__ import annotations

import posixpath
from typing import Any, Mapping

from ... import names, pins, states
from ...errors import TaoError
from . import storage
from ...records import Record


PLATFORM = "slurm"


#: What a record says for a job that runs on the host (container runtime none, no image given).
NO_IMAGE = "host (container runtime none)"


def max_retries() -> int:
    return int(pins.resolve("slurm.defaults.max_job_retries"))




#: The kind of every SLURM backend value that reaches a remote command line.
BACKEND_KINDS = {"slurm_job_id": "slurm_id", "array_job_id": "number", "convert_job_id": "number", "convert_log": "abspath",
                 "prefetch_job_id": "number", "prefetch_log": "abspath", "prefetch_script": "abspath",
                 "job_dir": "abspath", "staged_dir": "abspath", "log_dir": "abspath",
                 "script": "abspath", "results_dir": "abspath", "job_name": "dns1123"}


def backend_of(rec: Record) -> dict:
    """The record's backend, every value checked for its kind (see :mod:`taobank.names`)."""
    return names.checked(rec, BACKEND_KINDS)


def job_dir_of(backend: Mapping[str, Any]) -> str | None:
    """The job folder: ``job_dir`` once sbatch answered, ``staged_dir`` before."""
    return backend.get("job_dir") or backend.get("staged_dir")


def log_dir_of(backend: Mapping[str, Any], name: str, jid: str) -> str:
    folder = job_dir_of(backend)
    if not folder:
        raise TaoError(f"SLURM job {jid} has no job folder in its record (never staged): its logs cannot be found")
    return posixpath.join(folder, storage.LOG_DIR, f"{name}-{jid}")


def require_submitted(rec: Record) -> dict:
    b = backend_of(rec)
    if not b.get("slurm_job_id") or not b.get("log_dir"):
        if rec.state not in states.TERMINAL and job_dir_of(b):
            raise TaoError(f"record {rec.id} was staged but its sbatch answer was not recorded: "
                           f"run tao_slurm.py resume {rec.id} (it never submits twice)")
        raise TaoError(f"record {rec.id} has no SLURM job yet (state {rec.state}): submit it first")
    return b
