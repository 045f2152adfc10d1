"""Docker job specs: load, validate against schemas/docker-job-spec.schema.json, and the values a submit derives."""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from ... import spec as core_spec
from ...errors import TaoError
from ...jobspec import JobSpec
from ...paths import abs_path
from ...redact import shown
from . import engine as eng


@dataclass
class DockerSpec(JobSpec):
    """A Docker (or Podman) job (schemas/docker-job-spec.schema.json): one container on one host."""

    SCHEMA: ClassVar[str] = "docker-job-spec.schema.json"
    SPELLING: ClassVar[Mapping[str, str | None]] = {"nodes": None, "inputs": None, "master_port": None}

    gpu_devices: list[str] | None = None
    ipc_host: bool | None = None
    mounts: list[dict[str, Any]] | None = None
    network: str | None = None
    pull: str | None = None
    stop_grace_seconds: int | None = None

SCHEMA_NAME = "docker-job-spec.schema.json"
def validate(spec: Mapping[str, Any]) -> dict:
    """Schema check (the first error as one line naming the field); unset network_arch/action are generic."""
    out = core_spec.validate_job(spec, SCHEMA_NAME, "Docker job spec")
    if _not_finite(spec):
        raise TaoError(_NOT_FINITE)
    return out


_NOT_FINITE = "Docker job spec: cpus must be a finite number of CPUs (0.01 to 1024), e.g. cpus: 8"


def _not_finite(spec: Mapping[str, Any]) -> bool:
    """NaN passes every JSON Schema bound."""
    cpus = spec.get("cpus")
    return isinstance(cpus, float) and not math.isfinite(cpus)


def typed(spec: Mapping[str, Any]) -> DockerSpec:
    """A spec mapping (a file, flags) checked (:func:`validate`) and typed: the edge where a Docker spec enters."""
    return typed_all([spec])[0]


def typed_all(specs: Sequence[Mapping[str, Any]]) -> list[DockerSpec]:
    """:func:`typed` of each spec (a sweep's trials), in order: the schema checks in one call, then each spec's
    remaining checks and its type; the first spec refused raises what :func:`typed` of it alone raises."""
    checked = core_spec.validate_jobs(specs, SCHEMA_NAME, "Docker job spec")
    bad = [_not_finite(spec) for spec in specs]
    out = []
    for got, nan in zip(checked, bad):
        if isinstance(got, TaoError):
            raise got
        if nan:
            raise TaoError(_NOT_FINITE)
        out.append(DockerSpec.from_dict(got))
    return out


def refuse_secret(text: str, what: str) -> str:
    """``text`` unless the secret lint flags it (as it flags submit's argv): a key pasted as an image, a
    registry host or a user name would reach the engine's argv (``ps``) and its error lines."""
    from ...redact import lint_text, redact_text

    if lint_text(text, what) or redact_text(text) != text:
        raise TaoError(f"{what} looks like a credential (not shown): give the image reference, registry host or "
                       "user name, and the key with $NGC_KEY or --key-file (tao_docker.py login); nothing was done")
    return text


def check_image(value: object, what: str = "image") -> str:
    """An image reference (or a registry host) by the schema's own image pattern: never an engine option,
    never a credential."""
    pattern = core_spec.validator(SCHEMA_NAME).schema["properties"]["image"]["pattern"]
    text = str(value)
    if isinstance(value, str):
        refuse_secret(text, what)
    if not isinstance(value, str) or len(text) > 512 or not re.match(pattern, text):
        raise TaoError(f"{what} {shown(text)} is not an image reference (registry/repository:tag or @sha256:digest: "
                       "letters, digits and ._/:@-, starting with a letter or digit); nothing was done")
    return text


def command_argv(spec: DockerSpec) -> list[str]:
    """A list is the container's argv; a string runs under ``sh -c``."""
    return command_argvs([spec])[0]


def command_argvs(specs: list[DockerSpec]) -> list[list[str]]:
    """:func:`command_argv` of each spec (a sweep's trials), one call."""
    out = []
    for spec in specs:
        assert spec.command is not None  # the schema requires it
        out.append(core_spec.argv_of(spec.command, "sh"))
    return out


def results_base(spec: DockerSpec, env: Mapping[str, str] | None = None, pinned: Mapping[str, Any] | None = None) -> str:
    """The host folder that holds every job's results folder: the spec's, $TAO_DOCKER_RESULTS_DIR, or the pin
    (``pinned``: :func:`taobank.platforms.docker.engine.defaults`, read already)."""
    env = os.environ if env is None else env
    raw = spec.results_dir or env.get(eng.RESULTS_ENV) or str(eng.default("results_base", pinned))
    return abs_path(os.path.expanduser(raw), "results_dir")


def gpu_request(spec: DockerSpec, pinned: Mapping[str, Any] | None = None) -> int | str | list[str]:
    """What the job asks for: a count, ``"all"``, or named devices (a list)."""
    if spec.gpu_devices:
        return [str(d) for d in spec.gpu_devices]
    value = eng.default("gpus", pinned) if spec.gpus is None else spec.gpus
    if value != "all" and (not isinstance(value, int) or value < 0):
        raise TaoError(f"gpus {value!r}: give a number of GPUs (0 for none) or all")
    return value
