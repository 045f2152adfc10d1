"""Absolute POSIX paths on a cluster: the one "is this under that folder" rule."""
from __future__ import annotations

import posixpath


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
