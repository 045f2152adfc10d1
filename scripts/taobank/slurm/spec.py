"""Job spec files (YAML/JSON) for SLURM: load, merge CLI flags, validate
against schemas/slurm-job-spec.schema.json, and derive the pieces a submit needs."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from .. import BANK_ROOT
from ..deps import require
from ..errors import TaoError

SCHEMA = BANK_ROOT / "schemas" / "slurm-job-spec.schema.json"


def load_file(path: str) -> dict:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaoError(f"cannot read job spec {path}: {exc.strerror}", exit_code=2) from None
    if p.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise TaoError(f"job spec {path} is not valid JSON: {exc}") from None
    else:
        yaml = require("yaml")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            raise TaoError(f"job spec {path} is not valid YAML: fix the file") from None
    if not isinstance(data, dict):
        raise TaoError(f"job spec {path} must be a mapping of fields")
    return data


def validate(spec: Mapping[str, Any]) -> dict:
    """Schema check; the first error as one line naming the field."""
    jsonschema = require("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(dict(spec)), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        where = ".".join(str(p) for p in e.path) or "(top level)"
        raise TaoError(f"job spec field {where}: {e.message}")
    return dict(spec)


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
