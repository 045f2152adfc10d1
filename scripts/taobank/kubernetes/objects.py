"""The Job and the objects it owns: owner references, lookup by the job-id label, delete options."""
from __future__ import annotations

from . import JOB_LABEL, OWNER_UID_LABEL
from .kubectl import Kubectl


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
