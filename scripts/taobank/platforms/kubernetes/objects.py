"""The Job and the objects it owns: lookup by the job-id label, pod selectors, delete options (owner references
are made where the owned objects are created: :func:`taobank.platforms.kubernetes.submit.owned_by`)."""
from __future__ import annotations

from ... import names
from ...errors import TaoError
from . import JOB_LABEL
from .kubectl import KubeFacts, Kubectl
from ...records import Record

#: The completion index label the Job controller puts on an Indexed Job's pods (Kubernetes >= 1.28).
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def find_jobs(kube: Kubectl, job_id: str) -> list[dict]:
    return kube.items("jobs", "-l", f"{JOB_LABEL}={job_id}", what="kubectl get jobs")


def delete_options(uid: str, propagation: str = "Foreground") -> dict:
    """DeleteOptions: foreground (pods go before the Job) and only the Job with this UID."""
    return {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation,
            "preconditions": {"uid": uid}}


def index_of(rec: Record) -> int | None:
    """The completion index of a trial run by a sweep's Indexed Job (None: a Job of its own)."""
    return KubeFacts.of(rec).index


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
