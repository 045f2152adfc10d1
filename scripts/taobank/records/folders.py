"""A job's results folder: what a record may name (:func:`check_results_dir`), which folder a record's job writes
(:func:`folder_of`), whether one lies in another (:func:`within`), and what no verb may touch
(:func:`folder_problem`: the whole disk, a folder not the job's own)."""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..errors import TaoError

#: In ``results_dir`` given to :func:`taobank.records.open_record`, replaced by the minted id.
ID_PLACEHOLDER = "{id}"
#: The ``results_dir`` of a job told to keep no results (``--no-results``): shown as "no results".
NO_RESULTS_DIR = "/dev/null"
#: A ``scheme://`` location (S3, Lustre ...), as opposed to an absolute path.
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def check_results_dir(value: str) -> str:
    """An absolute path or a ``scheme://`` URI without credentials; anything else is refused."""
    from urllib.parse import urlsplit

    from ..redact import lint_text, shown

    v = str(value).strip()
    if not v:
        raise TaoError("results_dir is empty: give an absolute path or a URI such as s3://bucket/prefix")
    if any(ord(c) < 32 or ord(c) == 127 for c in v):
        raise TaoError("results_dir contains a control character: give a plain path or URI")
    if URI.match(v):
        parts = urlsplit(v)
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise TaoError("results_dir carries credentials (user@ or user:pass@): give the bare URI and keep credentials in the environment")
        if parts.query or parts.fragment or "?" in v:
            raise TaoError("results_dir has a query string (presigned URLs carry credentials): give the bare URI, e.g. s3://bucket/prefix")
        if not (parts.netloc or parts.path.strip("/")):
            raise TaoError(f"results_dir {shown(v)} names no location: add the bucket/volume and prefix")
    elif not v.startswith("/"):
        hint = "expand ~ first" if v.startswith("~") else "relative paths are refused"
        raise TaoError(f"results_dir {shown(v)} is not absolute ({hint}): give /abs/path or a URI such as s3://bucket/prefix")
    if ".." in v.split("/"):
        raise TaoError(f"results_dir {shown(v)} contains '..': give the resolved path")
    if lint_text(v, "results_dir"):
        raise TaoError("results_dir looks like it carries a credential: give the bare path or URI")
    return v


def folder_of(rec: Mapping[str, Any]) -> str:
    """The folder a record's job writes: ``backend.results_dir`` (where a platform keeps the job's own folder)
    or ``results_dir``; "" for a job that keeps none."""
    b = rec.get("backend")
    v = b.get("results_dir") if isinstance(b, dict) else None
    folder = v if isinstance(v, str) and v else rec.get("results_dir")
    return folder.rstrip("/") or "/" if isinstance(folder, str) and folder != NO_RESULTS_DIR else ""


def within(path: str, root: str) -> bool:
    """``path`` is ``root`` or inside it: absolute paths by :func:`taobank.paths.is_under`, URIs by prefix."""
    from ..paths import is_under

    if not path or not root:
        return False
    if path.startswith("/") and root.startswith("/"):
        return is_under(path, root)
    a, b = path.rstrip("/"), root.rstrip("/")
    return URI.match(a) is not None and (a == b or a.startswith(b + "/"))


def folder_problem(rec: Mapping[str, Any]) -> str | None:
    """A results folder no verb may list, fetch from or delete: the whole disk, or a ``backend.results_dir``
    that is neither the record's ``results_dir`` nor a folder named after the job (``rec`` is schema-valid)."""
    top, own = rec["results_dir"], rec["backend"].get("results_dir")
    for folder in (top, own):
        if isinstance(folder, str) and folder.startswith("/") and not folder.strip("/"):
            return "its results folder is / (the whole disk)"
    if own is not None and own.rstrip("/") != top.rstrip("/") and own.rstrip("/").rsplit("/", 1)[-1] != rec["id"]:
        return "backend.results_dir is neither its results_dir nor a folder named after the job"
    if own is not None and not (own.startswith("/") or URI.match(own)):
        return "backend.results_dir is not an absolute path"
    return None


__all__ = ["ID_PLACEHOLDER", "NO_RESULTS_DIR", "check_results_dir", "folder_of", "within", "folder_problem"]
