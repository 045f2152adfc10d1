"""Job spec files (YAML/JSON) for SLURM: load, merge CLI flags, validate
against schemas/slurm-job-spec.schema.json, and derive the pieces a submit needs."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from ... import spec as core_spec
from ...jobspec import JobSpec


@dataclass
class SlurmSpec(JobSpec):
    """A SLURM job (schemas/slurm-job-spec.schema.json): an sbatch script on a shared filesystem."""

    SCHEMA: ClassVar[str] = "slurm-job-spec.schema.json"
    SPELLING: ClassVar[Mapping[str, str | None]] = {
        "nodes": "num_nodes", "gpus": None, "cpus": "cpus_per_task", "results_dir": "results_base",
        "shm_size": None, "workdir": None}
    #: ``mem`` (sbatch's own word) was the key before ``memory`` (the flag's, every platform's)
    ALIASES: ClassVar[Mapping[str, str]] = {"mem": "memory"}

    num_gpus: int | None = None
    max_num_gpus_per_node: int | None = None
    partition: str | None = None
    account: str | None = None
    cluster_name: str | None = None
    #: the wall time, one of three spellings, and an in-job timeout inside it
    time: str | None = None
    time_hours: float | None = None
    time_minutes: float | None = None
    timeout_hours: float | None = None
    container_runtime: str | None = None
    container_mounts: str | None = None
    use_sqsh: bool | None = None
    sqsh_cache_dir: str | None = None
    force_reconvert_latest: bool | None = None
    conversion_account: str | None = None
    conversion_cpus: int | None = None
    conversion_mem: str | None = None
    conversion_partition: str | None = None
    conversion_time_minutes: int | None = None
    dataset: dict[str, Any] | None = None
    specs: dict[str, Any] | None = None
    spec_files: dict[str, str] | None = None
    prefetch: dict[str, str] | None = None
    prefetch_max_bytes: int | None = None
    prefetch_partition: str | None = None
    infra_retries: bool | None = None
    use_requeue: bool | None = None
    #: the wall-time chain: allocations in all, run time over all of them, the warning before the wall time
    max_attempts: int | None = None
    max_total_time: str | float | None = None
    walltime_margin_seconds: int | None = None

SCHEMA_NAME = "slurm-job-spec.schema.json"


def load_file(path: str) -> dict:
    """A SLURM job spec file; its ``spec_files`` paths are relative to the spec file (wherever it is run from)."""
    spec = core_spec.load_file(path)
    if isinstance(spec.get("spec_files"), dict):
        here = os.path.dirname(os.path.abspath(path))
        spec["spec_files"] = {k: os.path.join(here, os.path.expanduser(str(v))) for k, v in spec["spec_files"].items()}
    return spec


def validate(spec: Mapping[str, Any]) -> dict:
    """Schema check of a SLURM job spec (the first error as one line naming the field); an alias key
    (``mem``) is read as its key (``memory``)."""
    return core_spec.validate_job(SlurmSpec.canonical(spec), SCHEMA_NAME, "SLURM job spec")


def typed(spec: Mapping[str, Any]) -> SlurmSpec:
    """A spec mapping (a file, flags) checked (:func:`validate`) and typed: the edge where a SLURM spec enters."""
    return SlurmSpec.from_dict(validate(spec))


def command_argv(spec: SlurmSpec) -> list[str]:
    """A list is the argv; a string runs with ``bash -c``."""
    return core_spec.argv_of(spec.command, "bash")  # type: ignore[arg-type]


def runtime(spec: SlurmSpec, env: Mapping[str, str] | None = None) -> str:
    from ... import pins

    env = os.environ if env is None else env
    return spec.container_runtime or env.get("TAO_SLURM_CONTAINER_RUNTIME") or pins.resolve("slurm.defaults.container_runtime")
