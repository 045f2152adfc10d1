"""Job-spec files (YAML or JSON) and JSON Schema validation, for every platform.

JSON is YAML, so one parser reads both. Each platform keeps only its schema
(``schemas/<name>.schema.json``) and what it derives from a valid spec.
"""
from __future__ import annotations

import difflib
import functools
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import BANK_ROOT, fsio, paths
from .errors import TaoError, missing
from .redact import shown, shown_keys, unknown_fields

SCHEMAS = BANK_ROOT / "schemas"
#: Schema formats: an absolute path of safe characters; or that, or a lustre://, slurm:// or s3:// URI.
PATH_FORMAT = "tao-path"
LOCATION_FORMAT = "tao-location"
#: A job spec is a page of YAML; anything larger is a mistake (or an attack on the parser).
MAX_SPEC_BYTES = 1024 * 1024


#: What a generic command (``sleep 600``, a script) is recorded as on every platform: a record needs both.
GENERIC = {"network_arch": "custom", "action": "run"}


def load_file(path: str | Path) -> dict:
    """Read a YAML or JSON mapping; one-line error when unreadable or not a mapping."""
    p = Path(path)
    text = fsio.read_text(p, "job spec", max_bytes=MAX_SPEC_BYTES)
    data = fsio.yaml_value(text or "", f"job spec {p}")
    if not isinstance(data, dict):
        raise TaoError(f"job spec {p} must hold a mapping of fields")
    return data


@functools.lru_cache(maxsize=None)
def validator(schema_name: str) -> Any:
    """The (cached) Draft 2020-12 validator of ``schemas/<schema_name>``: the bank's one schema validator."""
    try:
        import jsonschema
    except ImportError:
        raise missing("jsonschema") from None
    schema = json.loads((SCHEMAS / schema_name).read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema, format_checker=_formats(jsonschema))


def _formats(jsonschema: Any) -> Any:
    """The bank's own formats (the one path rule of :mod:`taobank.paths`), checked on every validation."""
    checker = jsonschema.FormatChecker(formats=())
    checker.checks(PATH_FORMAT)(paths.is_path)
    checker.checks(LOCATION_FORMAT)(paths.is_location)
    return checker


def first_error(obj: Any, schema_name: str) -> Any:
    """The first schema error of ``obj`` (ordered by path), or None."""
    errors = sorted(validator(schema_name).iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    return errors[0] if errors else None


def validate(obj: Any, schema_name: str, what: str) -> None:
    """Validate ``obj`` against ``schemas/<schema_name>``; the first error as one line naming the field."""
    errors = [e for e in [first_error(obj, schema_name)] if e is not None]
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        msg = _safe_message(err)
        msg = msg if len(msg) < 160 else msg[:157] + "..."
        raise TaoError(f"invalid {what}: field {where}: {msg} (see schemas/{schema_name})")


def validate_job(spec: Mapping[str, Any], schema_name: str, what: str) -> dict:
    """A platform's job spec checked against its schema; an unset network_arch/action is :data:`GENERIC`."""
    validate(dict(spec), schema_name, what)
    return {**GENERIC, **spec}


def validate_jobs(specs: Sequence[Mapping[str, Any]], schema_name: str, what: str) -> list[dict | TaoError]:
    """:func:`validate_job` of each spec (a sweep's trials), one call: the spec as checked, or the one-line
    TaoError that refuses it."""
    out: list[dict | TaoError] = []
    for spec in specs:
        try:
            out.append(validate_job(spec, schema_name, what))
        except TaoError as exc:
            out.append(exc)
    return out


def command_argv(spec: Mapping[str, Any], shell: str) -> list[str]:
    """The job's argv: a list as given; a string runs under ``shell -c`` (the platform's shell)."""
    return argv_of(spec["command"], shell)


def argv_of(cmd: str | list[str], shell: str) -> list[str]:
    """A command as argv: a list as given; a string runs under ``shell -c``."""
    return list(cmd) if isinstance(cmd, list) else [shell, "-c", cmd]


#: Fields whose values may be credentials: an error there never quotes the value.
_QUIET_FIELDS = {"env", "nccl_env", "config", "secrets"}


def unknown_keys(unknown: Sequence[object], known: Sequence[str]) -> str:
    """The phrase for keys a schema does not know: each one an error may show with its nearest known key, the
    others only counted (:func:`taobank.redact.shown_keys`)."""
    named, others = shown_keys(sorted(unknown, key=str))
    hints = []
    for key in named:
        near = difflib.get_close_matches(key, list(known), n=1)
        hints.append(f"{key!r} (did you mean {near[0]!r}?)" if near else repr(key))
    return unknown_fields(hints, others)


def _safe_message(err: Any) -> str:
    """jsonschema's message without the offending value where it could be a whole spec or a secret."""
    if err.validator in ("oneOf", "anyOf"):
        shapes = [" + ".join(sub.get("required") or []) for sub in err.validator_value if isinstance(sub, dict)]
        shapes = [s for s in shapes if s]
        return f"needs exactly one of: {' | '.join(shapes)}" if shapes else "matches none of the allowed shapes"
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = sorted((err.schema.get("properties") or {}).keys())
        unknown = [k for k in err.instance if k not in known]
        if unknown:
            return unknown_keys(unknown, known)
    if err.validator == "format" and err.validator_value in (PATH_FORMAT, LOCATION_FORMAT):
        uri = " or such a URI (lustre:///path, s3://bucket/path)" if err.validator_value == LOCATION_FORMAT else ""
        return f"{shown(err.instance)} is not {paths.ALLOWED}{uri}"
    if err.validator == "not" or _QUIET_FIELDS & {str(p) for p in err.absolute_path}:
        return f"value refused by the schema rule '{err.validator}' (the value is not shown)"
    return err.message
