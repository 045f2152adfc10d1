"""status on Kubernetes: ONE ``kubectl get jobs,pods -l tao-job-id`` per (context, namespace), mapped to states.
A sweep's trial is one completion index of its sweep's Indexed Job: its pods are those of that index. Jobs that
Kueue holds (labelled for a queue, suspended) add ONE ``kubectl get workloads`` for all of them: PENDING with
Kueue's reason (waiting for quota, inadmissible, evicted).

This module only says what the cluster shows (:func:`observe`); the core marks the records
(:mod:`taobank.core.track`) and then calls :func:`ended`: a job that ended has its logs saved and its
credential Secrets deleted (one call per namespace).
"""
from __future__ import annotations

from ...contract import Observation, Shown
from ...states import State
from ... import states
from ...errors import TaoError
from ...core import jobfiles, training
from . import JOB_LABEL, credentials, gates, logs, verdicts
from . import status as smap
from .kubectl import KubeFacts, Kubectl
from .objects import index_of, sweep_of
from ...records import Record


def _label(rec: Record) -> str:
    """The job-id label value of the record's Job: its own id, or its sweep's (one Indexed Job for every trial)."""
    return sweep_of(rec) if index_of(rec) is not None else rec.id


def _observe_record(kube: Kubectl, rec: Record, f: KubeFacts,
                    entry: dict | None) -> tuple[Observation, list[dict], dict | None]:
    entry = entry or {"jobs": [], "pods": []}
    job = smap.pick_job(entry["jobs"], f.uid, f.name)
    pods = smap.pods_of(job, entry["pods"])
    index = f.index
    if index is not None:  # a sweep's trial: its own completion index of the sweep's Job
        pods = [p for p in pods if smap.pod_rank(p) == index]

    def see(texts: dict[str, str] | None = None) -> Observation:
        return smap.observe(job, pods, texts) if index is None else smap.observe_index(job, index, pods, texts)

    obs = see()
    if obs.state == State.ERROR and obs.failed_pod and rec.state not in states.TERMINAL:
        failed = next(p for p in pods if p["metadata"]["name"] == obs.failed_pod)
        obs = see({obs.failed_pod: logs.pod_logs(kube, failed, 50)})
    return obs, pods, job


def observe(recs: list[Record], context: dict) -> list[Observation]:
    """What the cluster says of ``recs``, with one list call per (context, namespace); the pods of each job
    are kept in ``context`` for :func:`ended`."""
    groups: dict[tuple, list[Record]] = {}
    facts: dict[str, KubeFacts] = {}
    out = []
    for rec in recs:
        try:
            kube = Kubectl.for_record(rec)
            facts[rec.id] = KubeFacts.of(rec)
            _label(rec)
        except TaoError as exc:  # a damaged record is reported, never allowed to hide the others
            if len(recs) == 1:
                raise
            out.append(_unasked(rec, "BadRecord", str(exc)))
            continue
        groups.setdefault((kube.context, kube.namespace), []).append(rec)
    for (kcontext, namespace), group in groups.items():
        kube = Kubectl(namespace, kcontext)
        completing: list[tuple[Record, Observation, list[dict]]] = []
        labels = {_label(r) for r in group}
        selector = JOB_LABEL if len(labels) > 1 else f"{JOB_LABEL}={labels.pop()}"
        try:
            items = kube.items("jobs,pods", "-l", selector, what="kubectl get jobs,pods")
        except TaoError as exc:
            if len(groups) == 1:
                raise
            # one unreachable cluster/namespace must not hide the others; records stay as they are
            out += [_unasked(r, "QueryFailed", str(exc)) for r in group]
            continue
        by_id = smap.group_items(items)
        # the Workloads of the Jobs Kueue holds (labelled for a queue, suspended) in ONE more call, only then
        held = {j["metadata"]["uid"] for e in by_id.values() for j in e["jobs"]
                if gates.queue_of(j) and (j.get("spec") or {}).get("suspend")}
        wls = gates.workloads(kube, list(held)) if held else {}
        gone = [r for r in group if r.backend_ref and _gone(facts[r.id], by_id.get(_label(r)))]
        kept = verdicts.read_gone(kube, gone) if gone else {}
        for rec in group:
            if not rec.backend_ref:
                out.append(_unasked(rec, "NotLaunched",
                                    "not launched (no backend_ref): run submit --job-id " + rec.id))
                continue
            f = facts[rec.id]
            obs, pods, job = _observe_record(kube, rec, f, by_id.get(_label(rec)))
            uid = ((job or {}).get("metadata") or {}).get("uid")
            if job is not None and uid in held and obs.state == State.PENDING:  # why Kueue has not admitted it
                obs.reason, obs.message = gates.explain(job, wls.get(str(uid)), f.cluster_queue)
            if rec.id in kept:  # the Job is gone: its verdict is the exit marker its pod left on the volume
                obs, text = kept[rec.id]
                if text:
                    context.setdefault("volume_logs", {})[rec.id] = text
            context.setdefault("pods", {})[rec.id] = (kube, pods)
            if f.index is not None and job is not None and (smap.condition(job, "Complete") or
                                                            smap.condition(job, "Failed")):
                context.setdefault("sweeps_ended", set()).add(f.uid)
            obs.job_id = rec.id
            obs.view = Shown(observed=obs.state, reason=obs.reason, pods=obs.pods, exit_code=obs.exit_code,
                             pod_attempts=obs.pod_attempts)
            if obs.reason in smap.PULL_RETRY_REASONS and smap.PULL_BACKOFF_ONLY in obs.message:
                obs.keep_if = "cannot pull image "  # the pull error recorded already says more than the back-off
            if obs.state == State.COMPLETE and pods and rec.state not in states.TERMINAL:
                completing.append((rec, obs, pods))
            out.append(obs)
        _last_words(kube, completing, context)
    return out


def _last_words(kube: Kubectl, completing: list[tuple[Record, Observation, list[dict]]], context: dict) -> None:
    """TAO's last word for the jobs seen complete now, from the status lines their pods printed as they ended
    (render.FINAL_STATUS_SH): their final logs read now, as :func:`ended` would (one call per job, ONE per
    sweep), and kept in ``context`` for it to save instead of reading them again."""
    texts: dict[str, str] = {}
    trials: dict[str, dict[str, list[dict]]] = {}
    for rec, _, pods in completing:
        if index_of(rec) is not None:
            trials.setdefault(sweep_of(rec), {})[rec.id] = pods
        else:
            text = logs.final_logs(kube, pods)
            if text is not None:
                texts[rec.id] = text
    for sweep, pods_of in trials.items():
        texts.update(logs.final_logs_many(kube, logs.trials_selector(sweep, pods_of), pods_of))
    for rec, obs, _ in completing:
        obs.tao_end = training.tao_end(logs.final_lines(texts.get(rec.id)) or {}, rec.action)
    context.setdefault("final_logs", {}).update(texts)


def _gone(f: KubeFacts, entry: dict | None) -> bool:
    """The record's Job (``f``: its facts) is not in the answer (deleted by its TTL, or by hand)."""
    return smap.pick_job((entry or {}).get("jobs") or [], f.uid, f.name) is None


def _unasked(rec: Record, reason: str, message: str) -> Observation:
    """The observation of a record that could not be asked about: it stays as it is."""
    return Observation(State(rec.state), message, job_id=rec.id, asked=False,
                       view=Shown(observed=None, reason=reason, message=message, pods=[], exit_code=None,
                                  pod_attempts=0))


def ended(recs: list[Record], context: dict) -> dict[str, str]:
    """The jobs of this poll that just ended: their pods' logs saved next to the record (a sweep's trials: ONE
    ``kubectl logs -l`` for those of one sweep; for a Job already gone, the volume copy read with its exit
    marker), and their credentials
    deleted with ONE ``kubectl delete secret`` per namespace (none when no job with Secrets ended), not one
    per job. The Job itself stays until its TTL for status and logs. A failed delete only adds a note (the
    garbage collector removes the Secrets with the Job)."""
    seen = context.get("pods", {})
    groups: dict[tuple, tuple[Kubectl, list[tuple[Record, str]]]] = {}
    trials: dict[tuple, tuple[Kubectl, dict[str, list[dict]]]] = {}
    for rec in recs:
        kube, pods = seen.get(rec.id, (None, []))
        if kube is None:
            continue
        f = KubeFacts.of(rec)
        if rec.id in context.get("final_logs", {}):  # read as it was seen complete (TAO's last word)
            jobfiles.save_logs(rec, "logs.txt", context["final_logs"][rec.id])
        elif pods and f.index is not None:  # a sweep's trials that ended now: one logs call for them all
            trials.setdefault((kube.context, kube.namespace, sweep_of(rec)), (kube, {}))[1][rec.id] = pods
        elif pods:
            logs.save_final_logs(kube, rec, pods)
        elif rec.id in context.get("volume_logs", {}):  # the Job was gone: the copy read with its exit marker
            jobfiles.save_logs(rec, "logs.txt", context["volume_logs"][rec.id])
        if f.index is not None and f.uid not in context.get("sweeps_ended", set()):
            continue  # a sweep's Secrets serve every trial: deleted once its Job has ended (else with the Job)
        if credentials.credential_secrets(rec) and f.uid:
            groups.setdefault((kube.context, kube.namespace), (kube, []))[1].append((rec, f.uid))
    for (_, _, sweep), (kube, pods_of) in trials.items():
        logs.save_final_logs_many(kube, logs.trials_selector(sweep, pods_of), pods_of)
    notes: dict[str, str] = {}
    for kube, group in groups.values():
        try:
            credentials.delete_credentials(kube, [uid for _, uid in group])
        except TaoError as exc:
            notes.update({rec.id: credentials.kept_note(exc) for rec, _ in group})
    return notes
