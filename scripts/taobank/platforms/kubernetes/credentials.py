"""Job credentials on Kubernetes: removing a job's per-job Secrets when it ends (status) or at cancel.

Submit reads the values (this process's environment, names given, or a mode-600 env-file) and sends them on
stdin (:mod:`taobank.platforms.kubernetes.submit`); the Secret objects are rendered with the job's manifests
(:func:`taobank.platforms.kubernetes.render.secret_object`). Here they are deleted when the job ends (the
garbage collector takes them with the Job otherwise).
"""
from __future__ import annotations

from ...states import State
from ...errors import TaoError
from . import OWNER_UID_LABEL
from .kubectl import KubeFacts, Kubectl
from ...records import Record


def credential_secrets(rec: Record) -> list[str]:
    """The names of the credential Secrets submit made for the record's Job (``backend.owned``)."""
    return [item.split("/", 1)[1] for item in KubeFacts.of(rec).owned.split(",") if item.startswith("secret/")]


def delete_credentials(kube: Kubectl, uids: list[str]) -> list[str]:
    """Delete the Secrets made for the Jobs with these UIDs, in one call; the names deleted.

    The selector is the owner-UID label submit puts on them, so a Secret of the same name made for
    another Job (or by someone else) is never touched.
    """
    selector = f"{OWNER_UID_LABEL} in ({','.join(sorted(set(uids)))})"
    res = kube.run("delete", "secret", "-l", selector, "--ignore-not-found", "--wait=false", "-o", "name",
                   what="kubectl delete secret")
    return [line.strip().split("/", 1)[-1] for line in res.stdout.splitlines() if line.strip()]


def kept_note(exc: Exception) -> str:
    return (f"its credential Secrets were not deleted now ({exc}): the garbage collector removes them with the "
            "Job at its TTL")


def remove_credentials(rec: Record) -> str | None:
    """``cancel`` of a job that already finished: delete its credential Secrets (status does it when it sees
    the end; this covers a job nobody polled). The note for the cancel line, or None (nothing held)."""
    uid = KubeFacts.of(rec).uid
    if rec.state == State.CANCELED or not uid or not credential_secrets(rec):
        return None  # a canceled Job was deleted: the garbage collector took its Secrets with it
    return credentials_note(Kubectl.for_record(rec), uid)


def credentials_note(kube: Kubectl, uid: str) -> str:
    try:
        gone = delete_credentials(kube, [uid])
    except TaoError as exc:
        return kept_note(exc)
    return f"deleted its credential Secret(s) {', '.join(gone)}" if gone else "its credential Secrets are gone already"
