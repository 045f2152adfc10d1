"""cancel on Kubernetes: delete the recorded Job (only the one with the recorded UID) and what it owns; a sweep's
trials: their Indexed Job as a whole, or some of its indexes alone.

Only stops and says what happened (:class:`taobank.contract.Stop`); the core marks the records."""
from __future__ import annotations

import json

from ...contract import Shown, Stop
from ...run import last_line
from ...states import State
from ... import records, states
from ...errors import TaoError
from . import JOB_LABEL, credentials, logs
from . import status as smap
from . import sweep as sweepmod
from .kubectl import KubeFacts, Kubectl, cluster_json
from .objects import INDEX_LABEL, delete_options, find_jobs, index_of, sweep_of
from ...records import Record


def stop(recs: list[Record]) -> list[Stop]:
    """One job alone (:func:`cancel`: a delete by UID precondition), several in a fixed number of calls
    (:func:`cancel_many`); a sweep's trials by their Indexed Job (:func:`cancel_trials`)."""
    trials: dict[tuple, list[Record]] = {}
    rest = []
    for rec in recs:
        f = KubeFacts.of(rec)
        if f.index is not None and rec.backend_ref and f.uid and f.name:
            trials.setdefault((f.namespace, f.context, f.uid), []).append(rec)
        else:
            rest.append(rec)
    out = [cancel(rest[0])] if len(rest) == 1 else cancel_many(rest) if rest else []
    for group in trials.values():
        try:
            out += cancel_trials(group)
        except TaoError as exc:
            out += [Stop(r.id, error=str(exc)) for r in group]
    return out


def cancel_trials(group: list[Record]) -> list[Stop]:
    """Cancel trials of one sweep's Indexed Job. Every trial still active: ONE delete of the Job (a UID
    precondition; the server's answer is the Job as it was, so a trial that had ended says how). Some of them:
    ONE read of the Job, ONE patch of the trial table (an index not started yet exits at once) and ONE delete
    of their pods (exit 143: FailIndex), the other trials untouched. The running pods' output stays in their
    results folders (``logs/``); the Job keeps the rest until its TTL."""
    kube = Kubectl.for_record(group[0])
    f = KubeFacts.of(group[0])
    name, uid, sweep = f.name or "", f.uid or "", sweep_of(group[0])  # (stop groups trials holding both)
    mine = {r.id for r in group}
    others = [r for r in records.find(platform=group[0].platform) if r.sweep == sweep
              and r.id not in mine and r.state in states.ACTIVE and KubeFacts.of(r).uid == uid]
    if not others:
        res = kube.run("delete", "--raw", f"/apis/batch/v1/namespaces/{kube.namespace}/jobs/{name}", "-f", "-",
                       stdin=json.dumps(delete_options(uid)), check=False, what="kubectl delete job (the sweep)")
        text = res.stderr + res.stdout
        if not res.ok and ("Precondition failed" in text or "Conflict" in text or "UID in precondition" in text):
            return [Stop(r.id, "gone", "the sweep's Job was replaced by another with the same name; left alone",
                         said=f"Job {name} now has another UID: not deleted", view=Shown(deleted=False)) for r in group]
        if not res.ok and ("NotFound" in text or "not found" in text):
            return [Stop(r.id, "gone", "the sweep's Job was already gone", view=Shown(deleted=False),
                         said=f"Job {name} already deleted") for r in group]
        if not res.ok:
            raise TaoError(f"deleting the sweep's Job {name} failed: {last_line(text)}")
        try:
            job = cluster_json(res.stdout or "{}")
        except ValueError:
            job = {}
        return _trial_stops(group, job if job.get("kind") == "Job" else {}, f"Job {kube.namespace}/{name} deleted")
    job = kube.json("get", "job", name, "--ignore-not-found", what="kubectl get job (the sweep)")
    if not job or (job.get("metadata") or {}).get("uid") != uid:
        return [Stop(r.id, "gone", "the sweep's Job was already gone", view=Shown(deleted=False),
                     said=f"Job {name} already deleted") for r in group]
    stops = _trial_stops(group, job, "")
    going = sorted(i for r, s in zip(group, stops) if s.outcome == "stopped" and (i := index_of(r)) is not None)
    if going:
        kube.run("patch", "configmap", sweepmod.table_name(sweep), "--type", "merge", "-p",
                 sweepmod.cancel_body(going), what="kubectl patch configmap (mark the trials canceled)")
        kube.run("delete", "pods", "-l", f"batch.kubernetes.io/controller-uid={uid},{INDEX_LABEL} in "
                 f"({','.join(map(str, going))})", "--ignore-not-found", "--wait=false",
                 what="kubectl delete pods (the canceled trials)")
    return [s if s.outcome != "stopped" else
            Stop(s.job_id, "stopped", "canceled by the agent (its pod deleted; the other trials go on)",
                 said=f"trial {index_of(r)} of Job {kube.namespace}/{name} stopped", view=Shown(deleted=True))
            for r, s in zip(group, stops)]


def _trial_stops(group: list[Record], job: dict, said: str) -> list[Stop]:
    """Each trial as the Job's status had it: ended (its index completed or failed) or stopped now."""
    st = job.get("status") or {}
    done, failed = smap.index_set(st.get("completedIndexes")), smap.index_set(st.get("failedIndexes"))
    out = []
    for rec in group:
        index = index_of(rec)
        if index in done:
            out.append(Stop(rec.id, "ended", f"trial {index} succeeded", state=State.COMPLETE,
                            said="already finished (COMPLETE): nothing to cancel", view=Shown(deleted=False)))
        elif index in failed:
            out.append(Stop(rec.id, "ended", f"trial {index} failed before the cancel (tao_jobs.py logs "
                            f"{rec.id})", state=State.ERROR, err_class="ERR_PROGRAM",
                            said="already finished (ERROR): nothing to cancel", view=Shown(deleted=False)))
        else:
            out.append(Stop(rec.id, "stopped", "canceled by the agent (the sweep's Job deleted, foreground)",
                            said=said or None, view=Shown(deleted=True)))
    return out


def cancel(rec: Record) -> Stop:
    """Delete the recorded Job (only if its UID matches), its Secrets/Service/ConfigMap."""
    job_id = rec.id
    kube = Kubectl.for_record(rec)  # checks every backend value before it reaches kubectl
    f = KubeFacts.of(rec)
    name, uid = f.name, f.uid
    if not rec.backend_ref or not uid or not name:
        # an interrupted submit may have created its Secret and even its Job before binding the record:
        # find them by the job-id label (the id is random, so the label is ours)
        found = find_jobs(kube, job_id)
        if not found:
            kube.run("delete", "secret,service,configmap", "-l", f"{JOB_LABEL}={job_id}", "--ignore-not-found",
                     "--wait=false", what="kubectl delete secret,service,configmap")
            return Stop(job_id, "never_launched", "canceled before launch", said="never launched: record canceled",
                        view=Shown(deleted=False))
        name, uid = found[0]["metadata"]["name"], found[0]["metadata"]["uid"]
    job = kube.json("get", "job", name, "--ignore-not-found", what="kubectl get job")
    if not job or job["metadata"].get("uid") != uid:
        other = " (a Job with that name but another UID exists and was left alone)" if job else ""
        return Stop(job_id, "gone", f"the Job was already gone{other}", said=f"Job {name} already deleted{other}",
                    view=Shown(deleted=False))
    pods = smap.pods_of(job, kube.items("pods", "-l", f"{JOB_LABEL}={job_id}"))
    obs = smap.observe(job, pods)
    if obs.state in (State.COMPLETE, State.ERROR):
        logs.save_final_logs(kube, rec, pods)
        note = credentials.credentials_note(kube, uid) if credentials.credential_secrets(rec) else None
        return Stop(job_id, "ended", obs.message, state=obs.state, err_class=obs.err_class, view=Shown(deleted=False),
                    said=f"already finished ({obs.state}): nothing to cancel" + (f"; {note}" if note else ""))
    logs.save_final_logs(kube, rec, pods)
    # Server-side precondition: the API deletes only the object with this UID,
    # so a Job re-created under the same name between our read and the delete is safe.
    body = json.dumps(delete_options(uid))
    res = kube.run("delete", "--raw", f"/apis/batch/v1/namespaces/{kube.namespace}/jobs/{name}", "-f", "-",
                   stdin=body, check=False, what="kubectl delete job")
    if not res.ok:
        text = res.stderr + res.stdout
        if "Precondition failed" in text or "Conflict" in text or "UID in precondition" in text:
            return Stop(job_id, "gone", "the Job was replaced by another with the same name; left alone",
                        said=f"Job {name} now has another UID: not deleted", view=Shown(deleted=False))
        if "NotFound" not in text and "not found" not in text:
            raise TaoError(f"deleting Job {name} failed: {text.strip().splitlines()[-1] if text.strip() else 'no output'}")
    # the Job is gone: the record says so whatever happens to the cleanup below
    message = f"Job {kube.namespace}/{name} deleted"
    try:
        kube.run("delete", "secret,service,configmap", "-l", f"{JOB_LABEL}={job_id}", "--ignore-not-found",
                 "--wait=false", what="kubectl delete secret,service,configmap")
    except TaoError as exc:  # owned by the Job, so the garbage collector removes them anyway
        message += (f"; its Secret/Service/ConfigMap were not deleted now ({exc}): the garbage collector removes "
                    f"them with the Job, or run kubectl delete secret,service,configmap -l {JOB_LABEL}={job_id}")
    return Stop(job_id, "stopped", "canceled by the agent (Job deleted, foreground)", said=message,
                view=Shown(deleted=True))


def cancel_many(recs: list[Record]) -> list[Stop]:
    """Cancel several launched jobs (a sweep's trials) per namespace in a fixed number of calls: ONE ``get jobs``
    and ONE ``get pods`` by their ids, ONE ``logs -l`` of all their pods (saved next to each record), ONE
    ``delete jobs`` by label (``tao-sweep=<id>`` when they are one sweep's trials) of those still active, ONE
    delete of their Secrets/Service/ConfigMap. A delete by label has no UID precondition: it takes only jobs
    whose label the listing shows on their own Job alone; one whose label a Job of another UID carries, or one
    not launched, goes through :func:`cancel` (a delete by UID precondition). A job that could not be stopped
    is its ``Stop.error``."""
    from .sweep import SWEEP_LABEL

    groups: dict[tuple, list[Record]] = {}
    out: list[Stop] = []
    alone = []
    facts = {rec.id: KubeFacts.of(rec) for rec in recs}
    for rec in recs:
        if rec.state in states.TERMINAL or not rec.backend_ref or not facts[rec.id].uid:
            alone.append(rec)
            continue
        try:
            kube = Kubectl.for_record(rec)
        except TaoError as exc:
            out.append(Stop(rec.id, error=str(exc)))
            continue
        groups.setdefault((kube.namespace, kube.context), []).append(rec)
    for (namespace, context), group in groups.items():
        kube = Kubectl(namespace, context or "")
        sel = f"{JOB_LABEL} in ({','.join(r.id for r in group)})"
        try:
            jobs = kube.items("jobs", "-l", sel, what="kubectl get jobs")
            pods = kube.items("pods", "-l", sel, what="kubectl get pods")
        except TaoError as exc:
            out += [Stop(r.id, error=str(exc)) for r in group]
            continue
        by_uid = {(j.get("metadata") or {}).get("uid"): j for j in jobs}
        labelled: dict[str | None, set[str | None]] = {}  # job id label -> the UIDs of the Jobs that carry it
        for j in jobs:
            meta = j.get("metadata") or {}
            labelled.setdefault((meta.get("labels") or {}).get(JOB_LABEL), set()).add(meta.get("uid"))
        going, pods_of = [], {}
        for rec in group:
            f = facts[rec.id]
            job = by_uid.get(f.uid)
            if labelled.get(rec.id, set()) - {f.uid}:
                # a Job of another UID carries its label: the delete by label would take it too, so this one
                # goes through cancel() (a delete of its own UID only, a server-side precondition)
                alone.append(rec)
                continue
            if job is None:  # gone
                out.append(Stop(rec.id, "gone", "the Job was already gone", view=Shown(deleted=False),
                                said=f"Job {f.name} already deleted"))
                continue
            mine = smap.pods_of(job, pods)
            obs = smap.observe(job, mine)
            pods_of[rec.id] = mine
            if obs.state in (State.COMPLETE, State.ERROR):
                out.append(Stop(rec.id, "ended", obs.message, state=obs.state, err_class=obs.err_class,
                                said=f"already finished ({obs.state}): nothing to cancel", view=Shown(deleted=False)))
                continue
            going.append(rec)
        # every pod's last words before the Jobs go (one logs call for all), next to each record
        logs.save_final_logs_many(kube, sel, {jid: mine for jid, mine in pods_of.items() if mine})
        if not going:
            continue
        ids = ",".join(r.id for r in going)
        sweeps = {r.sweep for r in going}
        label = f"{SWEEP_LABEL}={next(iter(sweeps))}," if len(sweeps) == 1 and None not in sweeps else ""
        res = kube.run("delete", "jobs", "-l", f"{label}{JOB_LABEL} in ({ids})", "--cascade=foreground",
                       "--wait=false", "--ignore-not-found", check=False, what="kubectl delete jobs")
        if not res.ok:
            out += [Stop(r.id, error=f"deleting its Job failed: "
                                        f"{(res.stderr or res.stdout).strip()[-200:] or 'no output'}") for r in going]
            continue
        note = ""
        try:
            kube.run("delete", "secret,service,configmap", "-l", f"{JOB_LABEL} in ({ids})", "--ignore-not-found",
                     "--wait=false", what="kubectl delete secret,service,configmap")
        except TaoError as exc:  # owned by the Jobs: the garbage collector removes them anyway
            note = f"; their Secrets/Services/ConfigMaps were not deleted now ({exc}): the garbage collector removes them"
        for rec in going:  # the Jobs are going: the records say so, whatever the cleanup above did
            out.append(Stop(rec.id, "stopped", "canceled by the agent (Job deleted, foreground)", view=Shown(deleted=True),
                            said=f"Job {namespace}/{facts[rec.id].name} deleted{note}"))
    for rec in alone:
        try:
            out.append(cancel(rec))
        except TaoError as exc:
            out.append(Stop(rec.id, error=str(exc)))
    return out
