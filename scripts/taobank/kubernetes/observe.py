"""status on Kubernetes: ONE ``kubectl get jobs,pods -l tao-job-id`` per (context, namespace), mapped to states.

The records are marked from what the cluster says (:func:`status.observe`);
a job that ended has its logs saved and its credential Secrets deleted.
"""
from __future__ import annotations

from ..states import State
from .. import records, states
from ..errors import TaoError
from . import JOB_LABEL, credentials, logs
from . import status as smap
from .kubectl import Kubectl


def _last_message(rec: dict) -> str | None:
    tr = rec.get("transitions") or []
    return tr[-1].get("message") if tr else None


def _observe_record(kube: Kubectl, rec: dict, entry: dict | None) -> tuple[smap.Observation, list[dict]]:
    b = rec.get("backend") or {}
    entry = entry or {"jobs": [], "pods": []}
    job = smap.pick_job(entry["jobs"], b.get("uid"), b.get("name"))
    pods = smap.pods_of(job, entry["pods"])
    obs = smap.observe(job, pods)
    if obs.state == State.ERROR and obs.failed_pod and rec["state"] not in states.TERMINAL:
        failed = next(p for p in pods if p["metadata"]["name"] == obs.failed_pod)
        texts = {obs.failed_pod: logs.pod_logs(kube, failed, 50)}
        obs = smap.observe(job, pods, texts)
    return obs, pods


def status_records(recs: list[dict], *, source: str = "poller") -> list[dict]:
    """Observe and update ``recs`` with one list call per (context, namespace)."""
    groups: dict[tuple, list[dict]] = {}
    out = []
    for rec in recs:
        try:
            kube = Kubectl.for_record(rec)
        except TaoError as exc:  # a damaged record is reported, never allowed to hide the others
            if len(recs) == 1:
                raise
            out.append(_unqueried(rec, "BadRecord", str(exc)))
            continue
        groups.setdefault((kube.context, kube.namespace), []).append(rec)
    for (context, namespace), group in groups.items():
        kube = Kubectl(namespace, context)
        selector = JOB_LABEL if len(group) > 1 else f"{JOB_LABEL}={group[0]['id']}"
        try:
            items = kube.items("jobs,pods", "-l", selector, what="kubectl get jobs,pods")
        except TaoError as exc:
            if len(groups) == 1:
                raise
            # one unreachable cluster/namespace must not hide the others; records stay as they are
            out += [_unqueried(r, "QueryFailed", str(exc)) for r in group]
            continue
        by_id = smap.group_items(items)
        results = [_update(kube, rec, by_id.get(rec["id"]), source) for rec in group]
        _remove_ended_credentials(kube, group, results)
        out += results
    return out


def _remove_ended_credentials(kube: Kubectl, before: list[dict], results: list[dict]) -> None:
    """The jobs of this poll that just ended no longer need their credentials: ONE ``kubectl delete
    secret`` for all of them (none when no job with Secrets ended), not one per job. The Job itself
    stays until its TTL for status and logs. A failed delete only adds a note (the garbage collector
    removes the Secrets with the Job)."""
    ended = [(rec, res) for rec, res in zip(before, results) if rec["state"] not in states.TERMINAL
             and res["state"] in states.TERMINAL and credentials.credential_secrets(rec) and (rec.get("backend") or {}).get("uid")]
    if not ended:
        return
    try:
        credentials.delete_credentials(kube, [rec["backend"]["uid"] for rec, _ in ended])
    except TaoError as exc:
        for _, res in ended:
            res["message"] = f"{res['message']}; {credentials.kept_note(exc)}"


def _unqueried(rec: dict, reason: str, message: str) -> dict:
    """The result for a record that could not be asked about: it stays as it is."""
    return {"id": rec["id"], "state": rec["state"], "observed": None, "err_class": rec.get("err_class"),
            "reason": reason, "message": message, "backend_ref": rec.get("backend_ref"), "pods": [],
            "exit_code": None, "pod_attempts": 0, "saved_logs": None}


def _update(kube: Kubectl, rec: dict, entry: dict | None, source: str) -> dict:
    if not rec.get("backend_ref"):
        return _unqueried(rec, "NotLaunched", "not launched (no backend_ref): run submit --job-id " + rec["id"])
    obs, pods = _observe_record(kube, rec, entry)
    was = rec["state"]
    if obs.state == was:
        obs = smap.settle_pull_retry(obs, rec.get("message"))
    new = smap.next_state(was, obs.state)
    saved = None
    if new and (new != was or obs.message != _last_message(rec)):
        if new in states.TERMINAL and pods:
            saved = logs.save_final_logs(kube, rec, pods)
        rec = records.mark(rec["id"], new, source=source, message=obs.message,
                           err_class=obs.err_class if new == State.ERROR else None)
    logs_file = records.artifact_dir(rec["id"]) / "logs.txt"
    result = {
        "id": rec["id"], "state": rec["state"], "observed": obs.state, "err_class": rec.get("err_class"),
        "reason": obs.reason, "message": obs.message, "backend_ref": rec.get("backend_ref"),
        "pods": obs.pods, "exit_code": obs.exit_code, "pod_attempts": obs.pod_attempts,
        "saved_logs": str(logs_file) if logs_file.exists() else None,
    }
    if obs.state == State.UNKNOWN and rec["state"] in states.TERMINAL:
        result["message"] = f"{obs.message}; the record is terminal ({rec['state']}) and stays the source of truth"
    if saved:
        result["saved_logs"] = saved
    return result
