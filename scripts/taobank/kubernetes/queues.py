"""Kueue queues: which LocalQueue a submit goes to, its Job labelled and created suspended, and why a queued Job
waits (its Workload's conditions).

Kueue (kubernetes-sigs) admits a labelled, suspended Job as ONE Workload: a multi-node Job's pods are admitted
all-or-nothing, and a sweep's Indexed Job is one Workload of up to ``parallelism`` pods (partial admission down to
one, see :func:`label_jobs`). When the queue admits the Job, the quota is the ClusterQueue's, not the nodes': the
bank's own capacity gate steps aside. Kueue's objects are read as data; no Kueue is needed where no queue is used.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

from ..errors import TaoError
from ..run import last_line
from .kubectl import Kubectl

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Kueue's partial admission of a batch/v1 Job: it may start with fewer pods than ``parallelism`` (not below this).
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
#: The label Kueue puts on the Workload it makes for a Job: that Job's UID.
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
LOCAL_QUEUES = "localqueues.kueue.x-k8s.io"
CLUSTER_QUEUES = "clusterqueues.kueue.x-k8s.io"
WORKLOADS = "workloads.kueue.x-k8s.io"
#: The LocalQueue a namespace's Jobs go to when none is named (Kueue's own convention).
DEFAULT_QUEUE = "default"
GPU = "nvidia.com/gpu"
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?")
_NO_API = ("doesn't have a resource type", "the server could not find the requested resource")


@dataclass
class Choice:
    """Where a submit goes: its LocalQueue and that queue's ClusterQueue (None: not queued), and report lines."""

    queue: str | None = None
    cluster_queue: str | None = None
    lines: list[str] = field(default_factory=list)


def label_jobs(objs: list[dict], queue: str, *, partial: bool = False) -> list[dict]:
    """``objs`` with their Job labelled for ``queue`` and created suspended (Kueue unsuspends it on admission);
    ``partial``: a sweep's Indexed Job may be admitted with fewer pods than its slots (one at least)."""
    out = []
    for obj in objs:
        if obj.get("kind") == "Job":
            obj = copy.deepcopy(obj)
            obj["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), QUEUE_LABEL: queue}
            obj["spec"]["suspend"] = True
            if partial:
                obj["metadata"]["annotations"] = {**(obj["metadata"].get("annotations") or {}),
                                                  MIN_PARALLELISM_ANNOTATION: "1"}
        out.append(obj)
    return out


def queue_of(job: dict | None) -> str | None:
    return (((job or {}).get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)


def local_queues(kube: Kubectl) -> list[dict] | None:
    """The namespace's LocalQueues; None when the cluster has no Kueue (no LocalQueue API)."""
    res = kube.run("get", LOCAL_QUEUES, "-o", "json", check=False, what="kubectl get localqueues")
    if res.ok:
        import json

        return json.loads(res.stdout or "{}").get("items") or []
    text = res.stderr or res.stdout
    if any(s in text for s in _NO_API):
        return None
    if "forbidden" in text.lower():
        raise TaoError(f"you may not list Kueue LocalQueues in namespace {kube.namespace}: ask for Kueue's "
                       "batch-user role there (kueue-batch-user-role), or submit without --queue")
    raise TaoError(f"kubectl get localqueues failed: {last_line(text)}")


def gpu_quota(cq: dict) -> int | None:
    """The ClusterQueue's nominal nvidia.com/gpu quota over its flavors (None: it covers no GPUs)."""
    total, covered = 0, False
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if res.get("name") == GPU:
                    covered = True
                    total += _count(res.get("nominalQuota"))
    return total if covered else None


def gpu_usage(status: dict) -> int:
    """GPUs in use (admitted/reserved) from a LocalQueue's or ClusterQueue's ``flavorsReservation`` status."""
    return sum(_count(r.get("total")) for f in status.get("flavorsReservation") or [] for r in f.get("resources") or []
               if r.get("name") == GPU)


def _count(value) -> int:
    try:
        return int(str(value or 0))
    except ValueError:
        return 0


def cluster_queue(kube: Kubectl, name: str) -> dict | None:
    """One ClusterQueue (cluster-scoped); None when the user may not read it (users often may not)."""
    res = kube.run("get", CLUSTER_QUEUES, name, "-o", "json", check=False, what="kubectl get clusterqueue")
    if res.ok:
        import json

        return json.loads(res.stdout or "{}")
    if "forbidden" in (res.stderr or "").lower() or "NotFound" in (res.stderr or ""):
        return None
    raise TaoError(f"kubectl get clusterqueue {name} failed: {last_line(res.stderr or res.stdout)}")


def describe(kube: Kubectl, lq: dict) -> tuple[str, int | None, int]:
    """(ClusterQueue name, its GPU quota or None, GPUs in use) of a LocalQueue."""
    cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "?")
    cq = cluster_queue(kube, cq_name)
    quota = gpu_quota(cq) if cq else None
    used = gpu_usage((cq or lq).get("status") or {})
    return cq_name, quota, used


def choose(kube: Kubectl, wanted: str | None, *, gpus: int) -> Choice:
    """The LocalQueue a submit goes to: ``wanted`` (refused in one line when the namespace has no such queue or
    the cluster no Kueue), else the namespace's ``default`` LocalQueue when there is one (said so), else none.
    ``gpus``: what the Job asks at once; a quota smaller than that is a warning (Kueue would keep it waiting,
    unless its cohort lends)."""
    if wanted is not None and not _NAME.fullmatch(wanted):
        raise TaoError(f"--queue {wanted!r} is not a LocalQueue name (lowercase letters, digits, '-' and '.', at most "
                       "63 characters)")
    lqs = local_queues(kube)
    if lqs is None:
        if wanted:
            raise TaoError(f"--queue {wanted}: this cluster has no Kueue (no LocalQueue API): submit without --queue")
        return Choice()
    by_name = {(q.get("metadata") or {}).get("name"): q for q in lqs}
    lines = []
    if wanted is None:
        if DEFAULT_QUEUE not in by_name:
            return Choice()
        wanted = DEFAULT_QUEUE
        lines.append(f"queued: no --queue given: the Job goes to namespace {kube.namespace}'s default LocalQueue "
                     f"{DEFAULT_QUEUE} (--queue NAME picks another)")
    elif wanted not in by_name:
        there = f"its LocalQueues: {', '.join(sorted(by_name))}" if by_name else "it has none"
        raise TaoError(f"--queue {wanted}: no LocalQueue {wanted} in namespace {kube.namespace} ({there}; "
                       "tao_k8s.py preflight lists them)")
    cq_name, quota, used = describe(kube, by_name[wanted])
    quota_text = f"GPU quota {quota}, {used} in use" if quota is not None else "GPU quota not readable"
    lines.append(f"queue: LocalQueue {wanted} -> ClusterQueue {cq_name} ({quota_text}); Kueue admits the Job whole "
                 "when the quota allows (the node capacity check steps aside)")
    if quota is not None and gpus > quota:
        lines.append(f"warning: the Job asks {gpus} {GPU} at once but ClusterQueue {cq_name} has a GPU quota of "
                     f"{quota}: Kueue keeps it waiting (inadmissible) unless its cohort lends the rest")
    return Choice(queue=wanted, cluster_queue=cq_name, lines=lines)


def workloads(kube: Kubectl, uids: list[str]) -> dict[str, dict]:
    """The Workloads of these Jobs (by Kueue's job-uid label) in ONE call: Job UID -> Workload. {} when they
    cannot be read (no permission): the Job then reads as suspended, without Kueue's reason."""
    if not uids:
        return {}
    res = kube.run("get", WORKLOADS, "-l", f"{JOB_UID_LABEL} in ({','.join(sorted(set(uids)))})", "-o", "json",
                   check=False, what="kubectl get workloads")
    if not res.ok:
        return {}
    import json

    out = {}
    for wl in json.loads(res.stdout or "{}").get("items") or []:
        uid = ((wl.get("metadata") or {}).get("labels") or {}).get(JOB_UID_LABEL)
        if uid:
            out[uid] = wl
    return out


def _cond(obj: dict, ctype: str) -> dict | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def explain(job: dict, workload: dict | None, cluster_queue_name: str | None) -> tuple[str, str]:
    """(reason, message) of a suspended queued Job, from its Workload: waiting for quota, inadmissible, evicted."""
    queue = queue_of(job) or "?"
    where = f"ClusterQueue {cluster_queue_name}" if cluster_queue_name else f"LocalQueue {queue}"
    if workload is None:
        return "Queued", f"QUEUED in LocalQueue {queue}: waiting for Kueue to make its Workload"
    evicted = _cond(workload, "Evicted")
    if evicted and evicted.get("status") == "True":
        return "Evicted", (f"QUEUED again: evicted by Kueue ({evicted.get('reason') or 'Evicted'}: "
                           f"{evicted.get('message') or 'no message'}); it waits for quota in {where}")
    reserved = _cond(workload, "QuotaReserved")
    admitted = _cond(workload, "Admitted")
    if admitted and admitted.get("status") == "True":
        return "Admitted", f"admitted by Kueue in {where}: its pods are being created"
    message = (reserved or {}).get("message") or ""
    if reserved and reserved.get("reason") == "Inadmissible":
        return "Inadmissible", f"QUEUED, inadmissible: {message or 'Kueue gave no message'}"
    requeued = ((workload.get("status") or {}).get("requeueState") or {}).get("count")
    tail = f": {message}" if message else ""
    retries = f" (requeued {requeued} times)" if requeued else ""
    return "Queued", f"QUEUED: waiting for quota in {where}{retries}{tail}"
