"""What a SLURM record's backend holds, each value checked before it reaches a remote command line."""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, fields

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


@dataclass(frozen=True)
class SlurmFacts:
    """A SLURM record's backend read back typed (:meth:`of`): every value that reaches a remote command line
    checked for its kind first; "" / False / None for what the record does not hold."""

    slurm_job_id: str = ""
    array_job_id: str = ""
    convert_job_id: str = ""
    convert_log: str = ""
    prefetch_job_id: str = ""
    prefetch_log: str = ""
    prefetch_script: str = ""
    #: the job folder once sbatch answered; ``staged_dir`` before (:attr:`folder` is whichever is there)
    job_dir: str = ""
    staged_dir: str = ""
    log_dir: str = ""
    script: str = ""
    results_dir: str = ""
    #: the SLURM job name (the record's id unless set)
    job_name: str = ""
    login_host: str = ""
    #: ``name=sha256`` of each uploaded spec file, comma-separated
    spec_files: str = ""
    #: a search's folder (bundle, settings, journal), shared by a sweep's trials
    search_dir: str = ""
    #: what the job asked for, as submitted (``--mem``)
    memory: str = ""
    staged_secrets: bool = False
    staged_prefetch_secrets: bool = False
    self_retry: bool = False
    infra_retries: bool = True
    walltime_chain: bool = False
    max_attempts: int | None = None
    #: the wall-time chain's attempt now running and the seconds run before it
    chain_attempt: int = 1
    chain_seconds: int = 0

    @classmethod
    def of(cls, rec: Record) -> "SlurmFacts":
        """The record's facts, each checked (one line naming the first bad one: :mod:`taobank.names`)."""
        b = names.checked(rec, BACKEND_KINDS)

        def text(key: str) -> str:
            value = b.get(key)
            return "" if value is None or isinstance(value, (dict, list)) else str(value)

        def whole(key: str, default: int | None) -> int | None:
            value = b.get(key)
            if isinstance(value, bool) or value in (None, ""):
                return default
            try:
                return int(value)
            except (TypeError, ValueError):
                raise TaoError(f"job record {rec.id} holds a backend.{key} that is not a whole number: the record "
                               "was edited or damaged; fix it or cancel the job by hand") from None

        return cls(**{f.name: text(f.name) for f in fields(cls) if f.type == "str"},
                   staged_secrets=bool(b.get("staged_secrets")),
                   staged_prefetch_secrets=bool(b.get("staged_prefetch_secrets")),
                   self_retry=bool(b.get("self_retry")), infra_retries=bool(b.get("infra_retries", True)),
                   walltime_chain=bool(b.get("walltime_chain")), max_attempts=whole("max_attempts", None),
                   chain_attempt=whole("chain_attempt", 1) or 1, chain_seconds=whole("chain_seconds", 0) or 0)

    @property
    def folder(self) -> str:
        """The job folder: ``job_dir`` once sbatch answered, ``staged_dir`` before ("" when never staged)."""
        return self.job_dir or self.staged_dir

    def log_dir_for(self, name: str, jid: str) -> str:
        """Where SLURM job ``jid`` of this record writes its logs."""
        if not self.folder:
            raise TaoError(f"SLURM job {jid} has no job folder in its record (never staged): its logs cannot be "
                           "found")
        return posixpath.join(self.folder, storage.LOG_DIR, f"{name}-{jid}")


def require_submitted(rec: Record) -> SlurmFacts:
    f = SlurmFacts.of(rec)
    if not f.slurm_job_id or not f.log_dir:
        if rec.state not in states.TERMINAL and f.folder:
            raise TaoError(f"record {rec.id} was staged but its sbatch answer was not recorded: "
                           f"run tao_slurm.py resume {rec.id} (it never submits twice)")
        raise TaoError(f"record {rec.id} has no SLURM job yet (state {rec.state}): submit it first")
    return f
