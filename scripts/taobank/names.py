"""Job ids, Kubernetes-safe names, and the values read back from a record before they reach an argv: the names
and values the bank puts on a cluster's command line, each with its one rule.

A job id is used as the Kubernetes Job, Secret (``tao-creds-<id>``) and
Service name, as the pod hostname prefix (``<id>-<index>``) and as the SLURM
job name, so it is an RFC 1035 label (lower case, starts with a letter) of at
most :data:`MAX_ID_LEN` characters. Uniqueness is the record store's job: it
creates the record file exclusively and mints again on a collision.

A record is a file the user (or anything with their rights) can edit: a ``slurm_job_id`` of ``--user=u`` must
never become ``scancel --user=u``, a ``script`` of ``--wrap=id`` never an sbatch option, a Job ``name`` of
``--all-namespaces`` never a kubectl flag (:func:`checked`).
"""
from __future__ import annotations

import posixpath
import re
import unicodedata
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .errors import TaoError

if TYPE_CHECKING:
    from .records import Record

#: ``tao-creds-<id>`` (10 + 40) and ``<id>-<index>`` (40 + 1 + 5 digits) fit in 63.
MAX_ID_LEN = 40
MAX_LABEL_LEN = 63
#: Hex characters of random suffix (4 bytes: 1 in 4e9 per pair of same-arch ids).
SUFFIX_LEN = 8
_ACTION_MAX = 12

#: An RFC 1035 label of at most :data:`MAX_LABEL_LEN` characters, and a job id (one of at most :data:`MAX_ID_LEN`),
#: each as one pattern (length included): the record store matches every file name of its folder against them.
DNS1035_LABEL = re.compile(r"[a-z](?:[-a-z0-9]{0,%d}[a-z0-9])?\Z" % (MAX_LABEL_LEN - 2))
JOB_ID = re.compile(r"[a-z](?:[-a-z0-9]{0,%d}[a-z0-9])?\Z" % (MAX_ID_LEN - 2))
_DNS1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def is_dns1035_label(s: str) -> bool:
    """RFC 1035 label as Kubernetes checks it (Service names): ``[a-z]([-a-z0-9]*[a-z0-9])?``, <= 63."""
    return isinstance(s, str) and bool(DNS1035_LABEL.match(s))


def is_job_id(s: object) -> bool:
    """A job id: an RFC 1035 label of at most :data:`MAX_ID_LEN` characters."""
    return isinstance(s, str) and bool(JOB_ID.match(s))


def is_dns1123_label(s: str) -> bool:
    """RFC 1123 label (Job, Secret names): ``[a-z0-9]([-a-z0-9]*[a-z0-9])?``, <= 63."""
    return isinstance(s, str) and 0 < len(s) <= MAX_LABEL_LEN and bool(_DNS1123.match(s))


def _slug(s: str) -> str:
    # Fold accents (é -> e), drop what has no ASCII form, collapse the rest to '-'.
    text = unicodedata.normalize("NFKD", str(s)).encode("ascii", "ignore").decode("ascii").lower()
    return _NON_ALNUM.sub("-", text).strip("-")


def sanitize_label(s: str, max_len: int = MAX_LABEL_LEN, *, fallback: str = "x") -> str:
    """Turn any string into an RFC 1035 label (hence also RFC 1123) of at most ``max_len``.

    ``deformable_detr`` -> ``deformable-detr``; a result that would start with
    a digit gets a ``x-`` prefix; an input with nothing usable gives ``fallback``.
    """
    if max_len < 1:
        raise ValueError("max_len must be >= 1")
    slug = _slug(s)
    if slug and not slug[0].isalpha():
        slug = f"x-{slug}"
    if not slug:
        slug = fallback
    slug = slug[:max_len].rstrip("-")
    return slug or fallback[:max_len]


def _suffix() -> str:
    import secrets  # here, not at the top: only minting needs it (hmac/_hashlib are a poll's import cost)

    return secrets.token_hex(SUFFIX_LEN // 2)


def mint_job_id(network_arch: str, action: str) -> str:
    """``<arch>-<action>-<random hex>``, an RFC 1035 label of <= 40 characters.

    The arch keeps as much room as the action leaves it; either part that has
    no usable character becomes ``job``/``run``.
    """
    room = MAX_ID_LEN - SUFFIX_LEN - 1  # "<stem>-<suffix>"
    act = _slug(action)[:_ACTION_MAX].strip("-") or "run"
    arch_room = room - len(act) - 1
    arch = _slug(network_arch)[:arch_room].strip("-") or "job"
    stem = sanitize_label(f"{arch}-{act}", room, fallback="job")
    return f"{stem}-{_suffix()}"


# ---------------------------------------------------------------- values read back from a record
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
    return is_dns1123_label(value)


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
        return is_dns1123_label(text)
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


def backend_read(backend: Mapping[str, Any], texts: Sequence[str], counts: Sequence[str] = ()) -> dict[str, Any]:
    """Backend values read back in one call, with the tolerance an adapter's typed facts read them with: each of
    ``texts`` as text (None stays None, a string as it is, another truthy value as its text, another falsy one as
    ""), each of ``counts`` as a whole number (None when missing, falsy or not one)."""
    out: dict[str, Any] = {}
    for key in texts:
        value = backend.get(key)
        out[key] = value if value is None or isinstance(value, str) else str(value) if value else ""
    for key in counts:
        value = backend.get(key)
        try:
            out[key] = int(value) if value else None
        except (TypeError, ValueError, OverflowError):
            out[key] = None
    return out
