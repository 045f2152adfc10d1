"""Template rendering where every value is escaped by construction.

Templates are Jinja2 files; a value can never be pasted in raw:

* ``kind="yaml"``: before the template renders, every context value is made
  into its JSON text (a YAML flow scalar/collection; a mapping key too long for
  an implicit YAML key as an explicit ``? key``), all at once (:func:`_ready`);
  the template only places that text (``{{ name }}``) and tests which values are
  set (``{% if "name" in given %}``), then the text is parsed back with
  ``yaml.safe_load``. Any string, whatever quotes, newlines, ``{{`` or YAML
  fragments it holds, lands as exactly that string in the parsed object.
* ``kind="shell"``: each ``{{ expression }}`` passes through a ``finalize`` hook
  that emits it with :func:`shlex.quote`; values with a newline or NUL are
  refused (they could add ``#SBATCH`` lines or commands).

``Raw`` marks the rare fragment a template must emit verbatim (it is produced
by code, never by user input).
"""
from __future__ import annotations

import functools
import json
import re
import shlex
from typing import Any, Literal

from . import BANK_ROOT
from .errors import TaoError, missing

TEMPLATES = BANK_ROOT / "templates"


class Raw(str):
    """A code-produced fragment emitted without escaping."""


# Characters YAML refuses, or reads as line breaks (NEL, U+2028, U+2029), even in a
# double-quoted scalar; JSON leaves them raw, so they are escaped here.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


#: YAML readers take an implicit mapping key of at most 1024 characters (PyYAML raises on a longer
#: one); a key longer than this is written as an explicit key (``? "key": value``), which has no limit.
_MAX_IMPLICIT_KEY = 1000


def _json_scalar(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return _YAML_UNSAFE.sub(lambda m: "\\u%04x" % ord(m.group()), text)


def _flow_key(key: Any) -> str:
    """A mapping key as a JSON string (non-strings converted as JSON does), explicit when long."""
    if not isinstance(key, str):
        key = next(iter(json.loads(json.dumps({key: 0}))))
    text = _json_scalar(key)
    return text if len(text) <= _MAX_IMPLICIT_KEY else "? " + text


def _flow(value: Any) -> str:
    """``value`` as a YAML flow node: JSON, but a long mapping key is written as an explicit key."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flow_key(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _json_scalar(value)


def _ready(context: dict[str, Any]) -> dict[str, Any]:
    """The context of a YAML template: each value as its flow text (a :class:`Raw` one as it is), plus
    ``given``, the names whose value is set (true, non-empty), for the template's optional blocks. Made in
    one pass before rendering, so the template never calls back per expression."""
    if "given" in context:
        raise TaoError("a YAML template context may not name a value 'given' (a bug in the bank)")
    ready: dict[str, Any] = {k: v if isinstance(v, Raw) else _flow(v) for k, v in context.items()}
    ready["given"] = frozenset(k for k, v in context.items() if v)
    return ready


def line_break_at(value: Any, where: str = "") -> str | None:
    """Where in ``value`` (a spec: mappings, lists, scalars) a string holds a newline, CR or NUL, as
    ``command[2]`` or ``env.FOO``; None when none does. Lets a refusal name the field, never the value."""
    if isinstance(value, str):
        return where or "a value" if any(c in value for c in "\n\r\x00") else None
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{where}.{key if re.fullmatch(r'[A-Za-z0-9_.-]{1,64}', str(key)) else '<a key>'}".lstrip(".")
            found = line_break_at(str(key), f"the name of {name}") or line_break_at(item, name)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = line_break_at(item, f"{where}[{i}]")
            if found:
                return found
    return None


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
    return _env_for(kind, str(TEMPLATES))


@functools.lru_cache(maxsize=None)
def _env_for(kind: str, templates: str):
    """One environment per kind and folder: its templates are compiled once per process (a 1,000-trial sweep
    renders 1,000 times)."""
    try:
        import jinja2
    except ImportError:
        raise missing("jinja2") from None
    finalize = None if kind == "yaml" else shell_value  # YAML values arrive as text (_ready)
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_text(template: str, context: dict[str, Any], kind: Literal["yaml", "shell"]) -> str:
    """Render ``templates/<template>`` with every value escaped for ``kind``."""
    return _rendered(_env(kind), template, context, kind)


def _rendered(env: Any, template: str, context: dict[str, Any], kind: Literal["yaml", "shell"]) -> str:
    try:
        return env.get_template(template).render(**(_ready(context) if kind == "yaml" else context))
    except TaoError:
        raise
    except Exception as exc:  # jinja2 errors: undefined variable, syntax
        raise TaoError(f"cannot render template {template}: {exc}") from None


def render_yaml_documents(template: str, context: dict[str, Any]) -> list[dict]:
    """Render a YAML template and parse it back into objects (one per document)."""
    env = _env("yaml")  # both libraries required at once (jinja2 the first time only: the environment is kept)
    try:
        import yaml
    except ImportError:
        raise missing("yaml") from None
    text = _rendered(env, template, context, "yaml")
    try:
        # libyaml's safe loader when present (the same documents, parsed in C): every value is emitted as JSON
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return [doc for doc in yaml.load_all(text, Loader=loader) if doc is not None]
    except yaml.YAMLError as exc:  # a template bug: still one line, never a traceback
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise TaoError(f"template {template} rendered YAML that does not parse{at}: a bug in the bank, "
                       "report it with the command you ran") from None


#: A mapping key left unquoted must start with a letter and hold only these characters: no
#: YAML 1.1 reader (PyYAML, kubectl's go-yaml) then takes it for a number, date, merge key or null.
_PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*\Z")
#: ... unless it is one of the words those readers take for a boolean or null (in any case).
_YAML11_WORDS = frozenset({"y", "yes", "n", "no", "true", "false", "on", "off", "null"})


def is_plain_key(text: str) -> bool:
    """True when ``text`` reads back as the same string, unquoted, as a mapping key in every YAML reader."""
    return bool(_PLAIN_KEY.match(text)) and text.lower() not in _YAML11_WORDS


@functools.lru_cache(maxsize=None)
def _quoting_dumper() -> type:
    """A SafeDumper that double-quotes every string value (and every key :func:`is_plain_key` refuses).

    PyYAML leaves ``y``, ``1e3``, ``09``, ``0o17`` or ``2001-12-14`` unquoted (strings to its YAML 1.1
    resolver) and kubectl reads them back as true, 1000, 9, 15...: a quoted scalar is a string to all."""
    try:
        import yaml
    except ImportError:
        raise missing("yaml") from None

    class QuotingDumper(yaml.SafeDumper):
        def represent_str(self, data: str):
            return self.represent_scalar("tag:yaml.org,2002:str", data, style='"')

        def represent_mapping(self, tag, mapping, flow_style=None):
            node = super().represent_mapping(tag, mapping, flow_style)
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag == "tag:yaml.org,2002:str" \
                        and is_plain_key(key.value):
                    key.style = None  # readable keys: apiVersion, nvidia.com/gpu
            return node

    QuotingDumper.add_representer(str, QuotingDumper.represent_str)
    return QuotingDumper


def dump_yaml(objects: list[dict]) -> str:
    """Dump manifests as a multi-document YAML stream that kubectl reads back exactly (no tags).

    Every string value is double-quoted (see :func:`_quoting_dumper`), with escapes for what is
    not printable ASCII; a multi-line string (a script) stays one quoted scalar with ``\\n``."""
    try:
        import yaml
    except ImportError:
        raise missing("yaml") from None
    # allow_unicode=False: PyYAML's emitter writes NEL (U+0085) raw, where its own loader reads it as a
    # line break; escaping non-ASCII keeps every string round-tripping exactly.
    return yaml.dump_all(objects, Dumper=_quoting_dumper(), sort_keys=False, default_flow_style=False,
                         allow_unicode=False)
