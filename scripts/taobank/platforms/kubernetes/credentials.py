"""Job credentials on Kubernetes: the per-job Secrets, from the caller's environment to their removal.

Values come from this process's environment (names given) or a mode-600
env-file, reach the cluster on stdin only, and are deleted when the job ends
(the garbage collector takes them with the Job otherwise). A dry run shows
every value masked.
"""
from __future__ import annotations

import base64
import json
import os

from ...states import State
from ... import envfile
from ...errors import TaoError
from . import OWNER_UID_LABEL, render
from .kubectl import Kubectl
from ...records import Record


def read_secrets_file(path: str) -> dict[str, str]:
    """KEY=VALUE lines from a file only its owner can read (mode 600 or stricter)."""
    return envfile.read(path, what="secrets file", private=True)


def collect_credentials(secret_env: list[str] | tuple[str, ...] = (), secrets_file: str | None = None) -> dict[str, str]:
    """Secret values from this process's environment (names given) and/or a mode-600 env-file."""
    creds = read_secrets_file(secrets_file) if secrets_file else {}
    return {**creds, **_from_env(secret_env)}


def _from_env(secret_env: list[str] | tuple[str, ...]) -> dict[str, str]:
    if not secret_env:  # no name to read
        return {}
    return envfile.secret_values(secret_env, os.environ, what="--secret-env name",
                                 unset="--secret-env {name}: {name} is not set in the environment: export it first")


def credential_names(secret_env: list[str] | tuple[str, ...] = (), secrets_file: str | None = None) -> list[str]:
    """The names submit puts in the per-job Secret, checked as submit checks them, for a dry run: each
    --secret-env variable must be set and the file private and well formed; no value is kept or shown."""
    found = list(read_secrets_file(secrets_file)) if secrets_file else []  # the keys only
    return list(dict.fromkeys(found + list(_from_env(secret_env))))


def check_ngc_key() -> None:
    """--ngc-pull-secret needs NGC_KEY set (a dry run checks only that)."""
    if not os.environ.get("NGC_KEY"):
        raise TaoError("--ngc-pull-secret needs NGC_KEY in the environment: export NGC_KEY first")


def secret_object(name: str, namespace: str, job_id: str, creds: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace, "labels": render.labels_for(job_id)},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in creds.items()},
    }


def pull_secret_object(name: str, namespace: str, job_id: str, key: str, registry: str = "nvcr.io") -> dict:
    user = "$oauthtoken"
    auth = base64.b64encode(f"{user}:{key}".encode()).decode()
    cfg = json.dumps({"auths": {registry: {"username": user, "password": key, "auth": auth}}})
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name, "namespace": namespace, "labels": render.labels_for(job_id)},
        "data": {".dockerconfigjson": base64.b64encode(cfg.encode()).decode()},
    }


#: What a dry run shows in place of every Secret value: never the value, not even its base64.
MASKED = "<masked>"


def masked(obj: dict) -> dict:
    """A Secret object with every data value replaced by :data:`MASKED` (the keys stay)."""
    return {**obj, "data": {key: MASKED for key in obj.get("data") or {}}}


def create_secret(kube: Kubectl, obj: dict) -> None:
    """Create (or, on a resumed submit, replace) a Secret sent on stdin; never ``apply``
    (apply would copy the data into the last-applied-configuration annotation)."""
    body = json.dumps(obj)
    res = kube.run("create", "-f", "-", stdin=body, check=False, what="kubectl create secret")
    if res.ok:
        return
    if "AlreadyExists" in res.stderr or "already exists" in res.stderr:
        kube.run("replace", "-f", "-", stdin=body, what="kubectl replace secret")
        return
    raise TaoError(f"creating Secret {obj['metadata']['name']} failed: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else 'no output'}")


def credential_secrets(rec: Record) -> list[str]:
    """The names of the credential Secrets submit made for the record's Job (``backend.owned``)."""
    owned = str(rec.backend.get("owned") or "")
    return [item.split("/", 1)[1] for item in owned.split(",") if item.startswith("secret/")]


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
    uid = rec.backend.get("uid")
    if rec.state == State.CANCELED or not uid or not credential_secrets(rec):
        return None  # a canceled Job was deleted: the garbage collector took its Secrets with it
    return credentials_note(Kubectl.for_record(rec), uid)


def credentials_note(kube: Kubectl, uid: str) -> str:
    try:
        gone = delete_credentials(kube, [uid])
    except TaoError as exc:
        return kept_note(exc)
    return f"deleted its credential Secret(s) {', '.join(gone)}" if gone else "its credential Secrets are gone already"
