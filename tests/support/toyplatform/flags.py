"""The toy's submit flags: the shared ones only."""
from __future__ import annotations

from typing import Any, Mapping

from taobank.jobspec import Flag, Shared

SHARED = Shared()
FLAGS: tuple[Flag, ...] = ()


def spec_from_flags(path: str | None, values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}
