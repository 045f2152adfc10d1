"""Quoting in an error line: a value or a file's keys shown only when they cannot carry a credential (a token
pasted where a name belongs is withheld, not echoed)."""
from __future__ import annotations

import re
from typing import Iterable

from .scanner import lint_text, looks_like_secret, redact_text


#: past, so a token glued to an escape sequence is still seen as one.
_CONTROLS = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*"
                       r"(?:\x07|\x1b\\|\x9c)?|[\x00-\x1f\x7f-\x9f]")


def shown(value: object, limit: int = 80) -> str:
    """A value fit to quote in an error line: repr'd and cut, or withheld when it looks like a credential
    (looked at with its control sequences taken out: ``ESC[31m`` glued to a token hides nothing)."""
    text = str(value)
    bare = _CONTROLS.sub(" ", text)
    if redact_text(text) != text or lint_text(text, "value") or redact_text(bare) != bare or lint_text(bare, "value"):
        return "(value not shown: it looks like it carries a credential)"
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


#: A mapping key an error may quote: a short field-like name. A line of some other file read as YAML (a spec
#: path pointing at /etc/shadow: ``root:$6$...:``) or a token is no such key.
_SHOWN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}\Z")


def shown_keys(keys: Iterable[object]) -> tuple[list[str], int]:
    """(the keys of a file's mapping an error may name, how many others it only counts): a key is named when it
    is a short field-like name (:data:`_SHOWN_KEY`) that does not look like a credential; never any other text
    of the file."""
    every = list(keys)
    named = [k for k in every if isinstance(k, str) and _SHOWN_KEY.match(k) and not looks_like_secret(k)]
    return named, len(every) - len(named)


def unknown_fields(named: list[str], others: int) -> str:
    """The phrase of an unknown-field error: the ``named`` keys (as the caller writes them, from
    :func:`shown_keys`), and how many ``others`` there are, never what they say."""
    why = "(not field names: is it the right file?)" if others != 1 else "(not a field name: is it the right file?)"
    if not named:
        return f"{others} unknown field{'s' if others != 1 else ''}, not shown {why}"
    return "unknown field " + ", ".join(named) + (f" and {others} more, not shown {why}" if others else "")
