"""Job + pods JSON -> (state, err_class, reason, message): a pure mapping.

Conditions are selected BY TYPE: on current Kubernetes the first condition of
a finished Job can be ``FailureTarget`` or ``SuccessCriteriaMet``, so
``conditions[0]`` lies. The record is the source of truth once terminal: a
Job deleted by its TTL reads as UNKNOWN only while the record is still active.
"""
from __future__ import annotations

import re

from ...states import State
from ...contract import Observation
from . import JOB_LABEL

INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
#: Terminated reasons that are the platform's fault, not the program's.
INFRA_REASONS = ("OOMKilled", "Evicted", "NodeLost", "Preempting", "ContainerStatusUnknown")
IMAGE_REASONS = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull")
CONFIG_REASONS = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
#: The waiting reasons a kubelet alternates between while it retries one failing pull: one condition, so
#: they share one message and a watch prints no new line when only the reason flips.
PULL_RETRY_REASONS = ("ErrImagePull", "ImagePullBackOff")
#: The pull error as a back-off message repeats it: 'Back-off pulling image "X": ErrImagePull: <error>'.
_BACKOFF_PREFIX = re.compile(r'^Back-off pulling image "[^"]*"(: )?(ErrImagePull: )?')
#: What an older kubelet's back-off message says once the prefix is gone: nothing about the error.
PULL_BACKOFF_ONLY = "the kubelet backs off before retrying the pull"


def condition(obj: dict | None, ctype: str) -> dict | None:
    """The condition of type ``ctype`` whose status is "True" (or None)."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype and cond.get("status") == "True":
            return cond
    return None


def pod_rank(pod: dict) -> int | None:
    """Completion index of an Indexed Job pod: the pod label (k8s >= 1.28), else the annotation."""
    meta = pod.get("metadata") or {}
    raw = (meta.get("labels") or {}).get(INDEX_LABEL) or (meta.get("annotations") or {}).get(INDEX_LABEL)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def sort_pods(pods: list[dict]) -> list[dict]:
    """Pods by rank, then creation time, then name (stable output for logs/status)."""
    def key(p: dict) -> tuple:
        r = pod_rank(p)
        meta = p.get("metadata") or {}
        return (r if r is not None else -1, meta.get("creationTimestamp") or "", meta.get("name") or "")
    return sorted(pods, key=key)


def _statuses(pod: dict, init: bool = False) -> list[dict]:
    st = pod.get("status") or {}
    return st.get("initContainerStatuses" if init else "containerStatuses") or []


def pod_summary(pod: dict) -> dict:
    st = pod.get("status") or {}
    reason = st.get("reason")
    for cs in _statuses(pod, True) + _statuses(pod):
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        term = state.get("terminated") or {}
        if waiting.get("reason") and waiting["reason"] not in ("ContainerCreating", "PodInitializing"):
            reason = reason or waiting["reason"]
        if term.get("reason") and term.get("exitCode"):
            reason = reason or term["reason"]
    return {
        "name": (pod.get("metadata") or {}).get("name"),
        "rank": pod_rank(pod),
        "phase": st.get("phase"),
        "node": (pod.get("spec") or {}).get("nodeName"),
        "reason": reason,
    }


def _pending_diagnosis(pods: list[dict]) -> tuple[str, str]:
    """Why the job is not running yet: (reason, message)."""
    for pod in sort_pods(pods):
        for cs in _statuses(pod, True) + _statuses(pod):
            waiting = (cs.get("state") or {}).get("waiting") or {}
            why = waiting.get("reason")
            if why in IMAGE_REASONS:
                return why, f"cannot pull image {cs.get('image')}: {pull_error(why, waiting.get('message'))} (check the image name and imagePullSecrets / NGC_KEY)"
            if why in CONFIG_REASONS:
                return why, f"{why}: {waiting.get('message') or ''} (a referenced Secret/ConfigMap may be missing)".strip()
        sched = condition_any(pod, "PodScheduled")
        if sched and sched.get("status") == "False":
            msg = sched.get("message") or sched.get("reason") or "unschedulable"
            if "persistentvolumeclaim" in msg and "not found" in msg:
                return "MissingPVC", f"{msg} (create the PVC in the namespace or fix the mount)"
            if "Insufficient nvidia.com/gpu" in msg:
                return "InsufficientGPU", f"{msg} (no node has enough free nvidia.com/gpu; the job waits until GPUs free up)"
            if "node affinity/selector" in msg or "node selector" in msg:
                return "NoMatchingNode", f"{msg} (no node matches nodeSelector/affinity: fix node_selector)"
            if "unbound immediate PersistentVolumeClaims" in msg:
                return "UnboundPVC", msg
            return sched.get("reason") or "Unschedulable", msg
    if not pods:
        return "NoPods", "the Job has created no pod yet"
    return "Pending", "pods are starting"


def pull_error(reason: str, message: str | None) -> str:
    """The pull error itself, the same text whether the kubelet says ErrImagePull or its back-off."""
    if reason not in PULL_RETRY_REASONS:
        return message or reason
    error = _BACKOFF_PREFIX.sub("", message or "").strip()
    if error:
        return error
    return reason if reason == "ErrImagePull" else PULL_BACKOFF_ONLY


def condition_any(obj: dict, ctype: str) -> dict | None:
    """The condition of type ``ctype`` whatever its status."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def blame_order(job: dict, pods: list[dict]) -> list[dict]:
    """Pods in the order a failure is explained: the pod the Failed condition names, then newest first.

    A disrupted pod is replaced; the pod that failed the Job is the newer one, so the oldest
    (evicted) pod must not be blamed for it."""
    cond = condition(job, "Failed") or condition(job, "FailureTarget") or {}
    text = cond.get("message") or ""
    ordered = sorted(sort_pods(pods), key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "",
                     reverse=True)

    def named(p: dict) -> bool:
        name = (p.get("metadata") or {}).get("name") or ""
        return bool(name) and (f"/{name} " in text or f"pod {name} " in text or text.endswith(f"/{name}"))
    return sorted(ordered, key=lambda p: not named(p))


def _failure(job: dict, pods: list[dict], logs: dict[str, str] | None) -> tuple[str, str, str, str | None, int | None]:
    """Classify a failed Job: (err_class, reason, message, pod, exit code)."""
    from ... import failures

    cond = condition(job, "Failed") or condition(job, "FailureTarget") or {}
    if cond.get("reason") == "DeadlineExceeded":  # the pods' kill is the deadline's doing, not their own failure
        return "ERR_PROGRAM", "DeadlineExceeded", cond.get("message") or "Job failed (DeadlineExceeded)", None, None
    for pod in blame_order(job, pods):
        name = (pod.get("metadata") or {}).get("name")
        st = pod.get("status") or {}
        if st.get("reason") == "Evicted" or (condition(pod, "DisruptionTarget")):
            cond = condition(pod, "DisruptionTarget") or {}
            msg = st.get("message") or cond.get("message") or "pod evicted/disrupted"
            return "ERR_INFRA", st.get("reason") or cond.get("reason") or "Disrupted", f"pod {name}: {msg}", name, None
        # main container first: a sidecar (tier C upload) failing is reported after it
        statuses = sorted(_statuses(pod) + _statuses(pod, True), key=lambda c: c.get("name") != "main")
        for cs in statuses:
            term = (cs.get("state") or {}).get("terminated") or {}
            code = term.get("exitCode")
            if not term or code in (None, 0):
                continue
            reason = term.get("reason") or "Error"
            tail = (logs or {}).get(name or "", "")
            if reason in INFRA_REASONS:
                return "ERR_INFRA", reason, f"pod {name} container {cs.get('name')}: {reason} (exit {code}){_hint(reason)}", name, code
            pattern = failures.infra_log_match(tail) if tail else None
            if pattern:
                return "ERR_INFRA", pattern, f"pod {name} exited {code}; log shows an infrastructure failure ({pattern}){_tail(tail)}", name, code
            if cs.get("name") == "upload":
                return "ERR_INFRA", "UploadFailed", f"pod {name}: result upload to S3 failed (exit {code}){_tail(tail)}", name, code
            if cs.get("name") == "fetch":
                return "ERR_INFRA", "FetchFailed", f"pod {name}: S3 input fetch failed (exit {code}){_tail(tail)}", name, code
            return "ERR_PROGRAM", "NonZeroExit", f"pod {name} container {cs.get('name')} exited with code {code}{_tail(tail)}", name, code
    cond = condition(job, "Failed") or condition(job, "FailureTarget") or {}
    reason = cond.get("reason") or "Failed"
    err = "ERR_INFRA" if reason in INFRA_REASONS else "ERR_PROGRAM"
    if reason == "PodFailurePolicy" and "DisruptionTarget" in (cond.get("message") or ""):
        err = "ERR_INFRA"  # a FailJob rule on a disruption, not the program's exit code
    return err, reason, cond.get("message") or f"Job failed ({reason})", None, None


def _hint(reason: str) -> str:
    if reason == "OOMKilled":
        return ": out of memory; lower the batch size or raise the memory limit"
    return ""


def _tail(text: str, lines: int = 5) -> str:
    last = [ln for ln in (text or "").splitlines() if ln.strip()][-lines:]
    return ("; last log lines: " + " | ".join(last)) if last else ""


tail_text = _tail  # the same last-lines clause for a verdict read from the exit marker (taobank.platforms.kubernetes.verdicts)


def observe(job: dict | None, pods: list[dict], logs: dict[str, str] | None = None) -> Observation:
    """Map one Job (None = not found) and its pods to the bank's vocabulary."""
    if job is None:
        return Observation(State.UNKNOWN, reason="NotFound", message="the Job no longer exists (TTL cleanup or deleted "
                           "outside the bank)", pods=[pod_summary(p) for p in sort_pods(pods)])
    obs = _observe(job, pods, logs)
    st = job.get("status") or {}
    failed = int(st.get("failed") or 0)
    obs.pod_attempts = failed + int(st.get("succeeded") or 0) + int(st.get("active") or 0) \
        + int(st.get("terminating") or 0)
    if failed and obs.state in (State.PENDING, State.RUNNING, State.COMPLETE):
        limit = (job.get("spec") or {}).get("backoffLimit")
        obs.message += f"; {failed} pod(s) disrupted and replaced (retry limit {limit})"
    return obs


def _observe(job: dict, pods: list[dict], logs: dict[str, str] | None) -> Observation:
    summaries = [pod_summary(p) for p in sort_pods(pods)]
    st = job.get("status") or {}
    if condition(job, "Complete") or condition(job, "SuccessCriteriaMet"):
        return Observation(State.COMPLETE, reason="Complete", message=f"succeeded pods: {st.get('succeeded', 0)}", pods=summaries)
    if condition(job, "Failed") or condition(job, "FailureTarget"):
        err, reason, msg, pod, code = _failure(job, pods, logs)
        cut = "time limit" if reason == "DeadlineExceeded" else "preempted" if "preempt" in reason.lower() else None
        return Observation(State.ERROR, err_class=err, reason=reason, message=msg, failed_pod=pod, exit_code=code,
                           pods=summaries, cut_short=cut)
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return Observation(State.CANCELED, reason="Deleting", message="the Job is being deleted", pods=summaries)
    if condition(job, "Suspended"):
        return Observation(State.PENDING, reason="Suspended", message="the Job is suspended", pods=summaries)
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    running = [p for p in live if (p.get("status") or {}).get("phase") == "Running"]
    if running and len(running) == len(live):
        return Observation(State.RUNNING, reason="Running",
                           message=f"{len(running)} pod(s) running, succeeded {st.get('succeeded', 0)}", pods=summaries)
    if pods and not live:
        # Every pod ended but the Job controller has not written Complete/Failed
        # yet: still running from the user's view (never back to PENDING).
        return Observation(State.RUNNING, reason="Finishing",
                           message=f"{len(pods)} pod(s) ended; waiting for the Job controller to record the outcome",
                           pods=summaries)
    reason, msg = _pending_diagnosis(live)
    if running:  # some ranks run, others wait: report it as pending with the reason
        msg = f"{len(running)}/{len(live)} pods running; {msg}"
    return Observation(State.PENDING, reason=reason, message=msg, pods=summaries)


def index_set(text: str | None) -> set[int]:
    """The indexes of a Job status' ``completedIndexes``/``failedIndexes`` ("0-2,5" -> {0, 1, 2, 5})."""
    out: set[int] = set()
    for part in str(text or "").split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def observe_index(job: dict | None, index: int, pods: list[dict], logs: dict[str, str] | None = None) -> Observation:
    """One trial of a sweep's Indexed Job (completion ``index``, ``pods`` its pods) in the bank's vocabulary: the
    Job's ``completedIndexes``/``failedIndexes`` decide its end, its own pods how it runs or why it waits."""
    if job is None:
        return observe(None, pods)
    summaries = [pod_summary(p) for p in sort_pods(pods)]
    st = job.get("status") or {}
    if index in index_set(st.get("completedIndexes")):
        return Observation(State.COMPLETE, reason="Complete", message=f"trial {index} succeeded", pods=summaries)
    failed_job = condition(job, "Failed") or condition(job, "FailureTarget")
    if index in index_set(st.get("failedIndexes")):
        err, reason, msg, pod, code = _failure({}, pods, logs)
        return Observation(State.ERROR, err_class=err, reason=reason, message=msg, failed_pod=pod, exit_code=code,
                           pods=summaries)
    if failed_job:  # the whole Job ended (its deadline, say) before this trial did
        reason = failed_job.get("reason") or "Failed"
        return Observation(State.ERROR, err_class="ERR_INFRA" if reason in INFRA_REASONS else "ERR_PROGRAM",
                           reason=reason, message=failed_job.get("message") or f"the sweep's Job failed ({reason})",
                           pods=summaries)
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return Observation(State.CANCELED, reason="Deleting", message="the sweep's Job is being deleted", pods=summaries)
    if condition(job, "Suspended"):
        return Observation(State.PENDING, reason="Suspended", message="the sweep's Job is suspended", pods=summaries)
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    running = [p for p in live if (p.get("status") or {}).get("phase") == "Running"]
    if running:
        return Observation(State.RUNNING, reason="Running", message=f"trial {index} running in pod "
                           f"{(running[0].get('metadata') or {}).get('name')}", pods=summaries)
    if live:
        reason, msg = _pending_diagnosis(live)
        return Observation(State.PENDING, reason=reason, message=msg, pods=summaries)
    if pods:  # its pod ended, the Job controller has not counted it yet (or replaces a disrupted one)
        return Observation(State.RUNNING, reason="Finishing", message=f"trial {index}'s pod ended; waiting for the "
                           "Job controller to record the outcome", pods=summaries)
    k = (job.get("spec") or {}).get("parallelism")
    return Observation(State.PENDING, reason="WaitingForSlot", message=f"waits for a free slot (the sweep runs at "
                       f"most {k} trials at once)", pods=summaries)


def group_items(items: list[dict]) -> dict[str, dict]:
    """Split one ``kubectl get jobs,pods -l tao-job-id -o json`` answer by job id."""
    out: dict[str, dict] = {}
    for obj in items:
        jid = ((obj.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL)
        if not jid:
            continue
        entry = out.setdefault(jid, {"jobs": [], "pods": []})
        if obj.get("kind") == "Job":
            entry["jobs"].append(obj)
        elif obj.get("kind") == "Pod":
            entry["pods"].append(obj)
    return out


def pick_job(jobs: list[dict], uid: str | None, name: str | None) -> dict | None:
    """The Job the record points at: same UID when one is recorded (another UID is not ours)."""
    for job in jobs:
        meta = job.get("metadata") or {}
        if uid and meta.get("uid") == uid:
            return job
        if not uid and name and meta.get("name") == name:
            return job
    return None


def pods_of(job: dict | None, pods: list[dict]) -> list[dict]:
    """Pods owned by ``job`` (by owner UID), so a same-name Job's pods never mix in."""
    if job is None:
        return []
    uid = (job.get("metadata") or {}).get("uid")
    return [p for p in pods if any(o.get("uid") == uid for o in (p.get("metadata") or {}).get("ownerReferences") or [])]
