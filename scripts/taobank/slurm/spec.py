"""Job spec files (YAML/JSON) for SLURM: load, merge CLI flags, validate
against schemas/slurm-job-spec.schema.json, and derive the pieces a submit needs."""
from __future__ import annotations

import os
from typing import Any, Mapping

from .. import spec as core_spec
from ..jobspec import SlurmSpec

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
    from .. import pins

    env = os.environ if env is None else env
    return spec.container_runtime or env.get("TAO_SLURM_CONTAINER_RUNTIME") or pins.resolve("slurm.defaults.container_runtime")
