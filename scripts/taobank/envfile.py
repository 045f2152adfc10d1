"""Environment variables: the one name check, and the one KEY=VALUE file rule of the bank (where its lines end,
what one line defines, what value a written line can hold) that its reader and its writer both follow."""
from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Iterable, Mapping

from . import fsio
from .errors import TaoError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_name(name: object) -> bool:
    """A POSIX shell / container environment variable name."""
    return isinstance(name, str) and bool(_NAME.match(name))


def check_name(name: object, what: str = "env name") -> str:
    """``name`` if it is a variable name; a one-line error otherwise (the text is never echoed whole)."""
    if not is_name(name):
        hint = " (give the NAME only; values never go on the command line)" if "=" in str(name) else ""
        raise TaoError(f"{what} is not a variable name (it is not shown, in case it is a value): letters, digits "
                       f"and _, not starting with a digit{hint}")
    return str(name)


def check_secret_name(name: object, what: str = "secret name") -> str:
    """The NAME of an exported variable that holds a secret; a token pasted in its place is refused unseen."""
    from .redact import looks_like_secret

    try:
        key = check_name(name, what)
    except TaoError:
        raise TaoError(f"a {what} is not a variable name (it is not shown, in case it is the secret itself): give the "
                       "NAME of an exported variable that holds it (e.g. NGC_KEY), never the value") from None
    if looks_like_secret(key):
        raise TaoError(f"a {what} looks like a credential value (not shown): give the NAME of an exported variable "
                       "(e.g. HF_TOKEN), never the value")
    return key


def secret_values(names: Iterable[str], env: Mapping[str, str], *, unset: str,
                  what: str = "secret name") -> dict[str, str]:
    """The values of the secrets ``names`` from ``env`` (the submitter's, never a spec), each name checked;
    ``unset`` (``{name}`` filled in) is the one-line error for one that is not set or empty."""
    out = {}
    for name in names or []:
        key = check_secret_name(name, what)
        if not env.get(key):
            raise TaoError(unset.format(name=key))
        out[key] = env[key]
    return out


def check_plain(name: object, what: str = "env") -> str:
    """A variable name that is not a credential's (those travel as secrets, never as plain env)."""
    from .redact import is_credential_name

    key = check_name(name, f"{what} name")
    if is_credential_name(key):
        raise TaoError(f"{what} {key} looks like a credential: pass it as a secret (--secret-env {key} / the spec's "
                       "'secrets' list) with its value exported locally, never as plain env")
    return key


def read(path: str | Path, *, what: str = "env file", private: bool = False) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` prefix, ``#`` comments, blank lines, one pair of matching quotes stripped).

    ``private``: the file must be readable by its owner only (it holds secrets);
    a bad line is reported by number, never with its value.
    """
    p = Path(path)
    try:
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            raise TaoError(f"{what} {p} is a directory: give the file")
        if private and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise TaoError(f"{what} {p} is readable by others (mode {oct(st.st_mode & 0o777)}): chmod 600 {p}")
    except OSError as exc:
        raise TaoError(f"cannot read {what} {p}: {exc.strerror}", exit_code=2) from None
    raw = fsio.read_regular(p, what, max_bytes=1024 * 1024) or b""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TaoError(f"{what} {p} is not UTF-8 text: save it as UTF-8") from None
    out: dict[str, str] = {}
    for n, line in enumerate(split_lines(text), 1):
        pair = parse_line(line)
        if pair is None:
            continue
        key, value = pair
        if not is_name(key):
            raise TaoError(f"{what} {p} line {n}: expected KEY=VALUE (the line is not shown)")
        out[key] = value
    return out


#: What the shell's word splitting strips around a line's words (its IFS less the newline that ends the line).
_BLANKS = " \t"


def split_lines(text: str) -> list[str]:
    """An env file's lines as the shell's ``.`` reads them (tao-setup loads the file so): split at ``\n`` only,
    a CRLF file's ``\r`` dropped with it. Never :meth:`str.splitlines`, which also splits at ``\v``, ``\f``,
    ``\x1c``-``\x1e``, ``\x85``, U+2028 and U+2029, where the shell reads on: a pasted key holding one would
    read back as two variables here and one there."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def parse_line(line: str) -> tuple[str, str] | None:
    """(KEY, value) of one line (``export`` prefix, one pair of matching quotes stripped); None for a blank line
    or a comment; ("", "") for a line that defines nothing (no ``=``). KEY is not checked here."""
    stripped = line.strip(_BLANKS)
    if not stripped or stripped.startswith("#"):
        return None
    key, sep, value = stripped.partition("=")
    if not sep:
        return "", ""
    key = key.strip(_BLANKS)
    key = key[len("export"):].lstrip(_BLANKS) if key.startswith(("export ", "export\t")) else key
    value = value.strip(_BLANKS)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return key, value


def check_value(value: str, what: str = "value") -> str:
    """``value`` if a written ``NAME='value'`` line holds it whole, so that both readers of the file (the shell's
    ``.`` and :func:`read`) read it back unchanged; a one-line error that never shows it otherwise. Refused: a
    quote (it would end the quoting) and every character that is not printable - each line end any reader splits
    at (:func:`split_lines`' ``\n`` and ``\r``, and those of :meth:`str.splitlines` and terminals: ``\v``,
    ``\f``, ``\x1c``-``\x1e``, ``\x85``, U+2028, U+2029), NUL and every other control or invisible character.
    No key or token holds one."""
    if len(split_lines(value)) != 1 or "'" in value or not value.isprintable():
        raise TaoError(f"the {what} holds a quote, a line break or another control character, which the file "
                       "cannot hold on one line (it is not shown): nothing was stored")
    return value


def line_of(name: str, value: str, what: str = "value") -> str:
    """The one line that defines ``name`` as ``value`` (both checked): ``NAME='value'``."""
    return f"{check_name(name)}='{check_value(value, what)}'"


def check_job_env(env: dict | None, nccl_env: dict | None, *, reserved: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """The plain env and NCCL env of a job, checked by the one rule both platforms use.

    Names are variable names; no credential-looking name (those are secrets);
    nccl_env names start with ``NCCL_``; no name in both; none of ``reserved``
    (what the bank itself sets in the job: overriding it would break the job).
    """
    plain = {check_plain(k, "env"): str(v) for k, v in (env or {}).items()}
    nccl = {}
    for k, v in (nccl_env or {}).items():
        key = check_plain(k, "nccl_env")
        if not key.startswith("NCCL_"):
            raise TaoError(f"nccl_env {key} must start with NCCL_ (other variables go in env)")
        if key in plain:
            raise TaoError(f"{key} is in both env and nccl_env: keep one")
        nccl[key] = str(v)
    for key in list(plain) + list(nccl):
        if key in reserved:
            raise TaoError(f"env {key} is set by the bank itself and may not be overridden: remove it")
    return plain, nccl
