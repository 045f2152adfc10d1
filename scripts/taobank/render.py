"""Template rendering where every value is escaped by construction.

Templates are Jinja2 files whose every ``{{ expression }}`` passes through a
``finalize`` hook, so a value can never be pasted in raw:

* ``kind="yaml"``: each value is emitted as JSON (a YAML flow scalar/collection),
  then the text is parsed back with ``yaml.safe_load``. Any string, whatever
  quotes, newlines, ``{{`` or YAML fragments it holds, lands as exactly that
  string in the parsed object.
* ``kind="shell"``: each value is emitted with :func:`shlex.quote`; values with
  a newline or NUL are refused (they could add ``#SBATCH`` lines or commands).

``Raw`` marks the rare fragment a template must emit verbatim (it is produced
by code, never by user input).
"""
from __future__ import annotations

import json
import re
import shlex
from typing import Any, Literal

from . import BANK_ROOT
from .deps import require
from .errors import TaoError

TEMPLATES = BANK_ROOT / "templates"


class Raw(str):
    """A code-produced fragment emitted without escaping."""


# Characters YAML refuses, or reads as line breaks (NEL, U+2028, U+2029), even in a
# double-quoted scalar; JSON leaves them raw, so they are escaped here.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def _json_value(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    text = json.dumps(value, ensure_ascii=False)
    return _YAML_UNSAFE.sub(lambda m: "\\u%04x" % ord(m.group()), text)


def shell_value(value: Any) -> str:
    """Quote one value for POSIX sh; refuse characters that could break a line."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        value = "true" if value else "false"
    text = str(value)
    if "\n" in text or "\r" in text or "\x00" in text:
        raise TaoError("a value contains a newline or NUL (the value is not shown): refused in a shell script")
    return shlex.quote(text)


def _env(kind: str):
    jinja2 = require("jinja2")
    finalize = _json_value if kind == "yaml" else shell_value
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_text(template: str, context: dict[str, Any], kind: Literal["yaml", "shell"]) -> str:
    """Render ``templates/<template>`` with every value escaped for ``kind``."""
    try:
        return _env(kind).get_template(template).render(**context)
    except TaoError:
        raise
    except Exception as exc:  # jinja2 errors: undefined variable, syntax
        raise TaoError(f"cannot render template {template}: {exc}") from None


def render_yaml_documents(template: str, context: dict[str, Any]) -> list[dict]:
    """Render a YAML template and parse it back into objects (one per document)."""
    yaml = require("yaml")
    text = render_text(template, context, "yaml")
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def dump_yaml(objects: list[dict]) -> str:
    """Dump manifests as a multi-document YAML stream (safe dumper, no tags)."""
    yaml = require("yaml")
    # allow_unicode=False: PyYAML's emitter writes NEL (U+0085) raw inside a
    # single-quoted scalar, where its own loader reads it as a line break.
    # Escaping non-ASCII keeps every string round-tripping exactly.
    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False, allow_unicode=False)
