"""What a value looks like: a literal secret, or no secret at all (a reference such as ``$VAR``, a name, a path, a
placeholder, prose), and the shapes that give a secret away alone (base64 of a credential, an AWS secret key,
an authorization scheme)."""
from __future__ import annotations

import base64
import binascii
import re

from .names import is_credential_name


#: What a redacted value becomes (a value holding it is no secret: it was masked already).
MASK = "***REDACTED***"

_NOT_SECRET = {"", "-", "null", "none", "~", "true", "false", "yes", "no", "''", '""', "[]", "{}"}
_PLACEHOLDER = re.compile(r"<[^<>]*>|[*xX.\u2026]{3,}|\.\.\.|changeme|changeit|REDACTED|\*+REDACTED\*+|your[-_][\w-]*",
                          re.I)
#: Another variable's or key's name (ExternalSecret ``secretKey: NGC_API_KEY``).
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
#: A program variable (``token=hf_token``, ``key=args.api_key``): its last part is a credential name.
_IDENT = re.compile(r"(?:[a-z_][a-z0-9_]*|[a-z]+[A-Z]\w*)(?:\.[A-Za-z_]\w*)*")
#: A file path (``SSH_KEY: /home/u/.ssh/id_rsa``): absolute or ~/ and with a plain lowercase directory word.
_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]*)+")
_PATH_WORD = re.compile(r"/[a-z]{3,}(?=/)")
_PRINTF = re.compile(r"%[-0-9.]*[sdqb](?:\\n)*")
#: YAML syntax in a value's place, no value: ``&anchor``/``*alias``/``!!str`` alone, a ``|``/``>-`` block indicator.
_YAML_SYNTAX = re.compile(r"[&*][\w.-]+|!!\w*|[|>][-+0-9]*")
_WHOLE_REF = re.compile(r"\$\{?[A-Za-z_]\w*\}?|\$\([^()]*\)|\{\{.*\}\}|%[A-Za-z_]\w*%")


#: A URL with no user:password, query or fragment (``CTK_KEY=https://host/gpgkey`` says where a key is).
_PLAIN_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s@?#]+")


def _looks_random(piece: str) -> bool:
    """A run of letters and digits that no one types as a name: 16+ mixing letters and digits, or 12+
    mixing upper case, lower case and digits (a key, a token, a generated password)."""
    digit = any(c.isdigit() for c in piece)
    if len(piece) >= 16 and digit and any(c.isalpha() for c in piece):
        return True
    return len(piece) >= 12 and digit and any(c.isupper() for c in piece) and any(c.islower() for c in piece)


def has_random_piece(text: str) -> bool:
    return any(_looks_random(p) for p in re.split(r"[^A-Za-z0-9]+", text))


def unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 4 and v.startswith('\\"') and v.endswith('\\"'):  # quoted inside a JSON string
        v = v[2:-2].strip()
    elif len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        v = v[1:-1].strip()
    return v


def is_reference(value: str) -> bool:
    """True when ``value`` is no literal secret: a reference, a name, a path, a placeholder, empty or boolean."""
    v = unquote(value)
    if v.lower() in _NOT_SECRET or MASK in v:
        return True
    if "$" in v or "`" in v or "{{" in v or "{%" in v or _PRINTF.fullmatch(v):
        return True
    if _PLACEHOLDER.fullmatch(v) or _ENV_NAME.fullmatch(v) or v.startswith("<") or _YAML_SYNTAX.fullmatch(v):
        return True
    if _IDENT.fullmatch(v) and is_credential_name(v.rsplit(".", 1)[-1]) and not has_random_piece(v):
        return True  # a program variable (``key=args.api_key``); ``aA22222222PW`` is a password, not a name
    if _PLAIN_URL.fullmatch(v) and not has_random_piece(v):  # a webhook URL with a token in it is a secret
        return True
    return bool(_PATH.fullmatch(v) and _PATH_WORD.search(v))


def is_whole_reference(value: str) -> bool:
    """Stricter: the whole value is one reference (a password may contain a literal ``$``)."""
    v = unquote(value)
    return bool(not v or _WHOLE_REF.fullmatch(v) or _PLACEHOLDER.fullmatch(v) or _ENV_NAME.fullmatch(v))


#: Lowercase words of prose, never a password after a flag: "never pass --password on argv".
PROSE_WORDS = {
    "on", "in", "or", "and", "the", "a", "an", "to", "is", "are", "be", "with", "via", "from", "for", "at", "as", "of",
    "if", "not", "never", "only", "instead", "here", "there", "it", "this", "that", "which", "when", "flag", "option",
    "argument", "value", "must", "should", "will", "can", "may", "see", "below", "above", "prompt", "prompts", "then",
    "so", "but", "by", "use", "using", "was", "were", "has", "have", "into",
}


def not_prose(v: str) -> bool:
    return v.rstrip(".,:;") not in PROSE_WORDS


def not_spec(v: str) -> bool:
    """``--secret id=npmrc,src=...`` (docker build) is a spec of where the secret is, not a secret."""
    return not re.match(r"[A-Za-z][\w-]*=(?!=|$)", unquote(v)) and not_prose(v)


def _b64decode(v: str) -> bytes:
    """``v`` decoded as (standard or URL-safe) base64, or ``b""``."""
    v = v.strip("\"'")
    try:
        return base64.b64decode(v.replace("-", "+").replace("_", "/") + "=" * (-len(v) % 4))
    except (binascii.Error, ValueError):
        return b""


_JSON_STRING_PAIR = re.compile(r'"(?P<k>[\w.-]{1,64})"\s{0,8}:\s{0,8}"(?P<v>[^"\\]{1,4096})"')


def is_encoded_credential_json(v: str) -> bool:
    """Base64 of JSON that holds a literal credential: a docker config's ``auth``/``password``, an ``api_key``."""
    text = _b64decode(v).decode("utf-8", "replace")
    for m in _JSON_STRING_PAIR.finditer(text):
        if (m.group("k") in ("auth", "identitytoken") or is_credential_name(m.group("k"))) \
                and not is_reference(m.group("v")):
            return True
    return False


def is_private_key_b64(v: str) -> bool:
    head = v[: len(v) // 4 * 4][:96]
    try:
        return b"PRIVATE KEY" in base64.b64decode(head + "=" * (-len(head) % 4))
    except (binascii.Error, ValueError):
        return False


def is_aws_secret(v: str) -> bool:
    """40 characters of base64's alphabet mixing many upper- and lower-case letters and a digit: an AWS
    secret access key standing alone (no name says so). A path (``/a/b``), a hex digest (no upper case) or
    a CamelCase word list (few capitals) is none."""
    upper = sum(c.isupper() for c in v)
    lower = sum(c.islower() for c in v)
    return (not v.startswith("/") and "//" not in v and upper >= 8 and lower >= 8 and any(c.isdigit() for c in v)
            and max(len(p) for p in v.split("/")) >= 8)


#: An authorization header's value: a scheme, then the credential.
AUTH_SCHEME = r"(?:Bearer|Basic|Token|Bot|Digest)"

AUTH_VALUE = re.compile(r"[\"']?" + AUTH_SCHEME + r"\s{1,8}[^\s\"']", re.I)


def named_value_ok(name: str, value: str) -> bool:
    """The value under ``name`` is a secret by its name (or, under an authorization name, by its scheme)."""
    return is_credential_name(name) or bool(AUTH_VALUE.match(value))
