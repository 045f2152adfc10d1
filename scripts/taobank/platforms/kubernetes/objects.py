"""The Job and the objects it owns: owner references, lookup by the job-id label, delete options."""
from __future__ import annotations

from ... import names
from ...errors import TaoError
from . import JOB_LABEL, OWNER_UID_LABEL
from .kubectl import Kubectl
from ...records import Record

#: The completion index label the Job controller puts on an Indexed Job's pods (Kubernetes >= 1.28).
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def owner_reference(job: dict) -> dict:
    """The ownerReference that makes an object a dependent of ``job``: TTL or cancel GC removes it."""
    meta = job["metadata"]
    return {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"]}


def owned_by(obj: dict, job: dict) -> dict:
    """``obj`` with its ownerReferences set, so it is created owned (no patch afterwards), and labelled
    with the Job's UID (:data:`OWNER_UID_LABEL`), so a cleanup by label finds only this Job's objects."""
    meta = obj["metadata"]
    labels = {**(meta.get("labels") or {}), OWNER_UID_LABEL: job["metadata"]["uid"]}
    return {**obj, "metadata": {**meta, "labels": labels, "ownerReferences": [owner_reference(job)]}}


def find_jobs(kube: Kubectl, job_id: str) -> list[dict]:
    return kube.items("jobs", "-l", f"{JOB_LABEL}={job_id}", what="kubectl get jobs")


def delete_options(uid: str, propagation: str = "Foreground") -> dict:
    """DeleteOptions: foreground (pods go before the Job) and only the Job with this UID."""
    return {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation,
            "preconditions": {"uid": uid}}


def index_of(rec: Record) -> int | None:
    """The completion index of a trial run by a sweep's Indexed Job (None: a Job of its own)."""
    value = rec.backend.get("index")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def pod_selector(rec: Record) -> str:
    """The label selector of a job's pods: its own id, or its sweep's id and its completion index."""
    index = index_of(rec)
    if index is None:
        return f"{JOB_LABEL}={rec.id}"
    return f"{JOB_LABEL}={sweep_of(rec)},{INDEX_LABEL}={index}"


def sweep_of(rec: Record) -> str:
    """The sweep id of a trial record, checked (it reaches kubectl's label selectors)."""
    sweep = str(rec.sweep or "")
    if not names.is_dns1035_label(sweep):
        raise TaoError(f"record {rec.id} names a trial of a sweep but no valid sweep id: it is damaged")
    return sweep
