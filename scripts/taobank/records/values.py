"""What a caller may put in a record, checked and cleaned before it is stored: free text redacted and cut,
backend metadata never a credential, required text non-empty and printable."""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..errors import TaoError
from ..redact import is_credential_name, redact_text
from ..text import valid_text

MAX_TEXT = 4096
_META_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


def encodable(text: str, what: str) -> str:
    """``text`` when it can be written as UTF-8 (no lone surrogates); else TaoError naming ``what``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise TaoError(f"{what} holds characters that are not valid text (lone surrogates): give plain UTF-8") from None
    return text


def clean_text(text: str | None) -> str | None:
    """Free text (a message) as stored: valid UTF-8, credentials masked, at most :data:`MAX_TEXT` characters."""
    if text is None:
        return None
    text = redact_text(valid_text(str(text)))  # a byte of a cluster's answer that was not UTF-8: U+FFFD
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def clean_backend(backend: Mapping[str, Any] | None) -> dict[str, Any]:
    """Backend metadata as stored: field-like keys, plain values, never a credential (refused, not masked)."""
    out: dict[str, Any] = {}
    if not backend:
        return out
    for k, v in backend.items():
        if not isinstance(k, str) or not _META_KEY.match(k):
            raise TaoError(f"backend metadata key {k!r} is invalid: use letters, digits, _ . - (max 64)")
        if v is not None and not isinstance(v, (str, int, bool)):
            raise TaoError(f"backend metadata {k} must be a string, integer or boolean")
        if isinstance(v, str):  # a cluster's answer with a byte that is not UTF-8: one line, never a crash mid-write
            encodable(v, f"backend metadata {k}")
        if is_credential_name(k) and isinstance(v, str) and v:  # flags such as staged_secrets=true are fine
            raise TaoError(f"backend metadata {k} is named like a credential: never store secrets in a record")
        # the value alone: token shapes, user:pass@, signed URLs (keys are ours, e.g. cred_secret=tao-creds-x)
        if isinstance(v, str) and redact_text(v) != v:
            raise TaoError(f"backend metadata {k} looks like a credential: never store secrets in a record")
        out[k] = v
    return out


def description(value: str | None) -> str | None:
    """Free text naming the job (submit --name): one line, at most 200 characters, no credential."""
    if value is None or not str(value).strip():
        return None
    text = " ".join(str(value).split())
    if len(text) > 200:
        raise TaoError("the job name/description is longer than 200 characters: shorten it")
    if clean_text(text) != text:
        raise TaoError("the job name/description looks like it carries a credential: refused")
    return text


def required(name: str, value: Any) -> str:
    """A field that must hold text: stripped, non-empty, no control character."""
    text = encodable("" if value is None else str(value).strip(), name)
    if not text:
        raise TaoError(f"{name} is required: pass a non-empty value")
    if any(ord(c) < 32 for c in text):
        raise TaoError(f"{name} contains a control character: refused")
    return text


__all__ = ["MAX_TEXT", "encodable", "clean_text", "clean_backend", "description", "required"]
