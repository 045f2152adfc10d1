"""Throwaway local clusters for development, CI and agent evals (test infrastructure).

Each platform module exposes the same four functions:
``up() -> dict[str, str]`` (idempotent; returns the env a skill user sets),
``down() -> None``, ``status() -> dict``, ``env() -> dict[str, str]``.
"""
from __future__ import annotations

PLATFORMS = ("kubernetes", "slurm", "docker")
