"""versions.yaml: the only reader of the bank's pins.

One parser (``yaml.safe_load``) serves the resolver, the stamper and every
helper, so quoted values and the Pyxis form ``nvcr.io#nvidia/...`` come out
the same everywhere.
"""
from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

from . import BANK_ROOT, fsio
from .errors import TaoError

#: Environment override of the pins file (tests, forks).
VERSIONS_ENV = "TAO_VERSIONS_FILE"

_MISSING = object()
_cache: dict[tuple[str, int, int], dict] = {}


def versions_file() -> Path:
    """``$TAO_VERSIONS_FILE`` or ``<bank>/versions.yaml``."""
    override = os.environ.get(VERSIONS_ENV)
    return Path(override) if override else BANK_ROOT / "versions.yaml"


def load() -> dict:
    """Parse versions.yaml (cached per path and mtime). Missing file: exit 2."""
    path = versions_file()
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key in _cache:
            return _cache[key]
    except FileNotFoundError:
        raise TaoError(f"{path} not found: run from a complete bank checkout or set {VERSIONS_ENV}", exit_code=2) from None
    except OSError as exc:
        raise TaoError(f"cannot read {path}: {exc.strerror}", exit_code=2) from None
    text = fsio.read_text(path, "versions file", max_bytes=1024 * 1024) or ""
    data = fsio.yaml_value(text, str(path))
    if not isinstance(data, dict):
        raise TaoError(f"{path} must be a YAML mapping of sections: fix the file")
    _cache[key] = data
    return data


def flatten(data: dict | None = None, prefix: str = "") -> dict[str, Any]:
    """Every leaf as ``{"dotted.key": value}`` in file order."""
    data = load() if data is None else data
    out: dict[str, Any] = {}
    for k, v in data.items():
        dotted = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, dotted + "."))
        else:
            out[dotted] = v
    return out


def _all_keys(data: dict, prefix: str = "") -> list[str]:
    keys = []
    for k, v in data.items():
        keys.append(f"{prefix}{k}")
        if isinstance(v, dict):
            keys.extend(_all_keys(v, f"{prefix}{k}."))
    return keys


def _lookup(data: dict, key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def resolve(key: str) -> Any:
    """Value of a dotted key (a section gives its dict). Unknown key: TaoError naming near keys."""
    data = load()
    value = _lookup(data, key) if key else _MISSING
    if value is _MISSING:
        keys = _all_keys(data)
        near = difflib.get_close_matches(key, keys, n=3, cutoff=0.5)
        if not near:  # a wrong leaf under a right section: offer its siblings
            parent = key.rsplit(".", 1)[0]
            near = [k for k in keys if k.startswith(parent + ".") and k.count(".") == key.count(".")][:3]
        hint = f"did you mean {', '.join(near)}?" if near else "list keys with resolve_versions_key.py --list"
        raise TaoError(f"unknown versions key {key!r} in {versions_file()}: {hint}")
    return value


def get(key: str, default: Any = None) -> Any:
    """Value of a dotted key, or ``default`` when the key does not exist."""
    value = _lookup(load(), key)
    return default if value is _MISSING else value


def format_value(value: Any) -> str:
    """A pin as text for shells and skills: YAML spelling for scalars, JSON for sections."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)
