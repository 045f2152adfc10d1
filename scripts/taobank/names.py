"""Job ids and Kubernetes-safe names.

A job id is used as the Kubernetes Job, Secret (``tao-creds-<id>``) and
Service name, as the pod hostname prefix (``<id>-<index>``) and as the SLURM
job name, so it is an RFC 1035 label (lower case, starts with a letter) of at
most :data:`MAX_ID_LEN` characters. Uniqueness is the record store's job: it
creates the record file exclusively and mints again on a collision.
"""
from __future__ import annotations

import re
import unicodedata

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
