"""Load and validate a Kubernetes job spec (schemas/k8s-job-spec.schema.json)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import BANK_ROOT
from ..deps import require
from ..errors import TaoError

SCHEMAS = BANK_ROOT / "schemas"


def validate(obj: Any, schema_name: str, what: str) -> None:
    """Validate ``obj`` against ``schemas/<schema_name>``; one-line error naming the field."""
    jsonschema = require("jsonschema")
    schema = json.loads((SCHEMAS / schema_name).read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        msg = err.message if len(err.message) < 160 else err.message[:157] + "..."
        raise TaoError(f"invalid {what}: at {where}: {msg} (see schemas/{schema_name})")


def load_file(path: str | Path) -> dict:
    """Read a YAML or JSON file into a dict (JSON is YAML, so one parser)."""
    yaml = require("yaml")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaoError(f"cannot read {p}: {exc.strerror}", exit_code=2) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TaoError(f"{p} is not valid YAML/JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise TaoError(f"{p} must hold a mapping (a job spec object)")
    return data


def load_spec(path: str | Path) -> dict:
    spec = load_file(path)
    validate(spec, "k8s-job-spec.schema.json", f"job spec {path}")
    return spec
