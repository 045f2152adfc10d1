"""Absolute POSIX paths on a cluster: the one path-value rule and the one "is this under that folder" rule."""
from __future__ import annotations

import posixpath
import re

from .errors import TaoError

#: Characters a path value may hold. No space, quote, ``%`` (sbatch file patterns),
#: ``,``/``:`` (Pyxis mount separators), ``$`` or glob characters; and because it
#: must start with ``/``, never a leading ``-`` that a command would read as an option.
PATH_CHARS = "A-Za-z0-9._+@/-"
_ABS = re.compile(rf"/[{PATH_CHARS}]*\Z")
#: A URI of path characters (lustre:///x, s3://bucket/x, file:///x, hf://org/x): the code that reads a
#: location field decides which schemes it takes, with a message of its own for the others.
_URI = re.compile(rf"[a-z][a-z0-9+.-]*://[{PATH_CHARS}]*\Z")
ALLOWED = "an absolute path of letters, digits and . _ + @ / - (no spaces, no '..')"


def abs_path(value: object, what: str) -> str:
    """``value`` normalised, when it is an absolute path of safe characters without ``..``; else one-line TaoError.

    Every path value passes here before it reaches a template, a manifest or argv.
    """
    from .redact import shown

    if not is_path(value):
        raise TaoError(f"{what} {shown(value)} is not {ALLOWED}")
    text = str(value)
    norm = posixpath.normpath(text)
    return "/" + norm.lstrip("/") if norm.startswith("//") else norm


def is_path(value: object) -> bool:
    """The JSON Schema format ``tao-path``: :func:`abs_path` would accept ``value``."""
    return isinstance(value, str) and bool(_ABS.match(value)) and ".." not in value.split("/")


#: An S3 bucket name (3-63 lower-case letters, digits, '.', '-'; starting and ending with a letter or digit).
S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")


def is_location(value: object) -> bool:
    """The JSON Schema format ``tao-location``: a path, or a URI (``lustre://``, ``s3://``, ...) of path characters."""
    if is_path(value):
        return True
    if not (isinstance(value, str) and _URI.match(value) and ".." not in value.split("/")):
        return False
    return not value.startswith("s3://") or bool(S3_BUCKET.match(value[len("s3://"):].split("/", 1)[0]))


def is_under(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or inside it, compared after normalisation.

    A path with a ``..`` component is never under anything (``/staging/../etc``
    must not pass a prefix check), and both must be absolute.
    """
    if not (isinstance(path, str) and isinstance(root, str) and path.startswith("/") and root.startswith("/")):
        return False
    if ".." in path.split("/"):
        return False
    p = posixpath.normpath(path)
    r = posixpath.normpath(root)
    if p.startswith("//"):
        p = "/" + p.lstrip("/")
    if r.startswith("//"):
        r = "/" + r.lstrip("/")
    return p == r or r == "/" or p.startswith(r + "/")


def rel_path(value: object, what: str) -> str:
    """``value`` normalised, when it is a relative path inside a folder: not absolute, no leading ``-``
    (never read as an option), no ``..``, and :func:`abs_path`'s characters; else one-line TaoError.

    Every path a user names inside a job's results folder (``fetch ID PATH``) passes here, so the
    folder's own rule and this one cannot drift apart: ``value`` is checked as ``/value``.
    """
    from .redact import shown

    if not isinstance(value, str) or not value or value.startswith(("/", "-")) or ".." in value.split("/") \
            or not is_path("/" + value):
        raise TaoError(f"{what} {shown(value)} is not a path inside the folder: give a relative path of letters, "
                       "digits and . _ + @ / - (no leading / or -, no '..')")
    norm = abs_path("/" + value, what)[1:]
    if not norm:  # "./." is the folder itself: fetching everything takes no PATH
        raise TaoError(f"{what} {shown(value)} is the folder itself: give no PATH to fetch everything")
    if norm.startswith("-"):  # "./-x" names a file called -x: refused like -x itself
        raise TaoError(f"{what} {shown(value)} starts with '-' once normalised: rename the file or fetch its folder")
    return norm


def is_member(value: object) -> bool:
    """A name a cluster reported inside a results folder that may be written under a local folder: relative,
    no empty, ``.`` or ``..`` component after a leading ``./``, no control character (spaces are allowed: the
    name comes from the cluster's listing, never from the command line)."""
    if not isinstance(value, str) or not value or value.startswith("/") or "\\" in value:
        return False
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return False
    parts = value.split("/")
    return all(p not in ("", ".", "..") for p in parts)
