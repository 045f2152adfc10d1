"""The Docker platform's names, labels and pinned defaults (one place)."""
from __future__ import annotations

import os
from typing import Any

from ... import pins
from ...errors import TaoError
from ...records import Record

PLATFORM = "docker"
#: Engines whose CLI the adapter drives; podman takes the same words (where it differs, render says so).
ENGINES = ("docker", "podman")
ENGINE_ENV = "TAO_DOCKER_ENGINE"
RESULTS_ENV = "TAO_DOCKER_RESULTS_DIR"
#: Labels on every container the bank starts: the job id, and the bank's mark (docker ps --filter label=...).
LABEL_JOB = "org.tao-skill-bank.job-id"
LABEL_BANK = "org.tao-skill-bank.managed"


def default(key: str) -> Any:
    return pins.resolve(f"docker.defaults.{key}")


def engine_name(value: str | None = None) -> str:
    """``--engine``, else $TAO_DOCKER_ENGINE, else docker; anything else is refused in one line."""
    name = (value or os.environ.get(ENGINE_ENV) or "docker").strip().lower()
    if name not in ENGINES:
        raise TaoError(f"engine {name!r} is not supported: use docker or podman (--engine or {ENGINE_ENV})")
    return name


def engine_of(rec: Record) -> str:
    """The engine a record's job runs under (recorded at submit)."""
    return engine_name(rec.backend.get("engine") or "docker")


def container_of(rec: Record) -> str:
    """The container's name: the job id itself (unique on the host, a DNS label)."""
    return rec.backend.get("container") or rec.id


def container_results_dir() -> str:
    return str(default("container_results_dir")).rstrip("/") or "/results"
