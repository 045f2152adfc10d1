"""Load and validate a Kubernetes job spec (schemas/k8s-job-spec.schema.json)."""
from __future__ import annotations

from pathlib import Path

from ..spec import load_file, validate

__all__ = ["load_file", "load_spec", "validate"]


def load_spec(path: str | Path) -> dict:
    spec = load_file(path)
    validate(spec, "k8s-job-spec.schema.json", f"job spec {path}")
    return spec
