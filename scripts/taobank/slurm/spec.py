"""Job spec files (YAML/JSON) for SLURM: load, merge CLI flags, validate
against schemas/slurm-job-spec.schema.json, and derive the pieces a submit needs."""
from __future__ import annotations

import os
from typing import Any, Mapping

from .. import spec as core_spec

SCHEMA_NAME = "slurm-job-spec.schema.json"


def load_file(path: str) -> dict:
    """A SLURM job spec file; its ``spec_files`` paths are relative to the spec file (wherever it is run from)."""
    spec = core_spec.load_file(path)
    if isinstance(spec.get("spec_files"), dict):
        here = os.path.dirname(os.path.abspath(path))
        spec["spec_files"] = {k: os.path.join(here, os.path.expanduser(str(v))) for k, v in spec["spec_files"].items()}
    return spec


#: What a generic command (``sleep 600``, a script) is recorded as: a record needs both; Kubernetes says the same.
GENERIC = {"network_arch": "custom", "action": "run"}


def validate(spec: Mapping[str, Any]) -> dict:
    """Schema check of a SLURM job spec (the first error as one line naming the field); an unset
    network_arch/action is :data:`GENERIC`."""
    core_spec.validate(dict(spec), SCHEMA_NAME, "SLURM job spec")
    return {**GENERIC, **spec}


def command_argv(spec: Mapping[str, Any]) -> list[str]:
    """A list is the argv; a string runs with ``bash -c``. Spec-key dataset
    overrides are appended as ``key=value`` arguments (TAO's override form)."""
    cmd = spec["command"]
    argv = list(cmd) if isinstance(cmd, list) else ["bash", "-c", cmd]
    return argv


def runtime(spec: Mapping[str, Any], env: Mapping[str, str] | None = None) -> str:
    from .. import pins

    env = os.environ if env is None else env
    return spec.get("container_runtime") or env.get("TAO_SLURM_CONTAINER_RUNTIME") or pins.resolve("slurm.defaults.container_runtime")
