"""Values read back from a job record, checked for their kind before they reach any argv.

A record is a file the user (or anything with their rights) can edit: a
``slurm_job_id`` of ``--user=u`` must never become ``scancel --user=u``, a
``script`` of ``--wrap=id`` never an sbatch option, a Job ``name`` of
``--all-namespaces`` never a kubectl flag.
"""
from __future__ import annotations

import posixpath
import re
from typing import Any, Mapping

from . import names
from .errors import TaoError
from .records import Record

_NUMBER = re.compile(r"[0-9]{1,20}\Z")
_SLURM_ID = re.compile(r"[0-9]{1,20}(_[0-9]{1,10})?\Z")
_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}\Z")
_CONTEXT = re.compile(r"[A-Za-z0-9@._:/+][A-Za-z0-9@._:/+-]{0,252}\Z")
#: The kubeconfig context names the bank accepts, in words (for the refusals).
CONTEXT_RULE = "letters, digits and @ . _ : / + -, not starting with -, at most 253 characters"


def is_context_name(value: Any) -> bool:
    """A kubeconfig context name the bank puts on a kubectl command line: the one rule for the
    client (``--context``, ``TAO_K8S_CONTEXT``) and for a record's ``backend.context``, so a job
    submitted to a context can always be read back, and never an option (no leading ``-``)."""
    return isinstance(value, str) and bool(_CONTEXT.match(value))


def is_namespace_name(value: Any) -> bool:
    """A Kubernetes namespace: an RFC 1123 label (the one rule for the client and for records)."""
    return names.is_dns1123_label(value)


def _ok(kind: str, value: Any) -> bool:
    if kind == "context":  # strings only, as the kubectl client takes them
        return is_context_name(value)
    if kind == "namespace":
        return is_namespace_name(value)
    text = value if isinstance(value, str) else str(value) if isinstance(value, int) and not isinstance(value, bool) else None
    if text is None:
        return False
    if kind == "number":
        return bool(_NUMBER.match(text))
    if kind == "slurm_id":  # a job, or one task of a job array (``123_4``: a sweep trial)
        return bool(_SLURM_ID.match(text))
    if kind == "abspath":
        return (text.startswith("/") and posixpath.normpath(text) == text.rstrip("/") or text == "/") \
            and not any(ord(c) < 32 or ord(c) == 127 for c in text)
    if kind == "dns1123":
        return names.is_dns1123_label(text)
    if kind == "uid":
        return bool(_UID.match(text))
    raise ValueError(kind)


def checked(rec: Record, kinds: Mapping[str, str]) -> dict:
    """The record's backend with every key of ``kinds`` that is present checked (one line on the first bad one)."""
    b = dict(rec.backend)
    for key, kind in kinds.items():
        value = b.get(key)
        if value in (None, ""):
            continue
        if not _ok(kind, value):
            what = {"number": "a number", "slurm_id": "a SLURM job id", "abspath": "an absolute path", "dns1123": "a Kubernetes name",
                    "namespace": "a Kubernetes namespace name",
                    "uid": "a Kubernetes UID", "context": "a kubeconfig context name"}[kind]
            raise TaoError(f"job record {rec.id} holds a backend.{key} that is not {what} (the value is not "
                           "used): the record was edited or damaged; fix it or cancel the job by hand")
        if kind in ("number", "slurm_id") and not isinstance(value, bool):
            b[key] = str(value)  # one type for what goes on a command line
    return b
