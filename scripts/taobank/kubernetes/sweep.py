"""Sweeps on Kubernetes: every trial's Job in ONE ``kubectl create`` of a List, the trials past
``--max-concurrent`` created suspended; the core releases them (ONE ``kubectl patch`` of their names) as
slots free. The trials' progress: ONE ``kubectl exec`` in a running trial's pod reads every running
trial's status files on the shared results volume."""
from __future__ import annotations

import copy
import json
import shlex

from .. import fsio, records
from ..contract import Gate, Launch
from ..errors import TaoError
from ..progress import READ_STATUS_SH, split_files
from ..run import last_line
from . import render
from . import results as resultsmod
from .kubectl import Kubectl
from .logs import SPEC_FILE, saved_spec
from .submit import KubePlan, launched

#: The label every trial Job of a sweep carries (its sweep id): cleanup of a failed create finds them by it.
SWEEP_LABEL = "tao-sweep"


def _refuse(p: KubePlan) -> None:
    if p.creds or p.ngc_key:
        raise TaoError("a sweep on Kubernetes takes no --secret-env/--secrets-file/--ngc-pull-secret (one Secret "
                       "per trial is not made yet): put the credentials in a Secret of the namespace "
                       "(--image-pull-secret for pulls) and submit the sweep without them")
    if p.config is not None or p.nodes > 1:
        raise TaoError("a sweep on Kubernetes runs single-node jobs without an action-request config: submit "
                       "multi-node or --request trials one by one")


def check(plans: list[KubePlan], max_concurrent: int, gate: Gate) -> None:
    """What a Kubernetes sweep cannot do, refused before any record opens."""
    _refuse(plans[0])


def launch(plans: list[KubePlan], recs: list[dict], max_concurrent: int) -> list[Launch]:
    """ONE create call for every trial Job; the first ``max_concurrent`` run, the others wait suspended.
    A failed create deletes what it made (by the sweep label): no trial runs, the core marks each ERROR."""
    first = plans[0]
    kube = first.kube
    assert kube is not None
    sweep_id = recs[0]["sweep"]
    no_policy = "podFailurePolicy" not in render.find(first.objs, "Job")["spec"]  # the dry run's verdict
    jobs = []
    for i, (p, rec) in enumerate(zip(plans, recs)):
        _refuse(p)
        fsio.write_private(records.artifact_dir(rec["id"]) / SPEC_FILE, json.dumps(p.spec, sort_keys=True) + "\n")
        objs = render.without_disruption_retry(p.objs) if no_policy else p.objs
        job = copy.deepcopy(render.find(objs, "Job"))
        job["metadata"].setdefault("labels", {})[SWEEP_LABEL] = sweep_id
        job["spec"]["suspend"] = i >= max_concurrent
        jobs.append(job)
    try:
        made = kube.apply(jobs, create=True)
    except TaoError as exc:
        res = kube.run("delete", "jobs", "-l", f"{SWEEP_LABEL}={sweep_id}", "--cascade=background",
                       "--ignore-not-found", check=False, what="kubectl delete jobs (failed sweep)")
        extra = "" if res.ok else f"; could not delete its Jobs ({last_line(res.stderr)}): kubectl delete jobs -l " \
                                  f"{SWEEP_LABEL}={sweep_id}"
        raise TaoError(f"{exc}{extra}") from None
    by_name = {(o.get("metadata") or {}).get("name"): o for o in made}
    out = []
    for job in jobs:
        server = by_name.get(job["metadata"]["name"]) or job
        launch_ = launched(kube, server, [], reconciled=False)
        launch_.backend["held"] = bool(job["spec"]["suspend"])
        launch_.message = "Job created suspended (waits for a sweep slot)" if job["spec"]["suspend"] else "Job created"
        out.append(launch_)
    return out


def release(recs: list[dict]) -> None:
    """Unsuspend these trials' Jobs: ONE ``kubectl patch`` per namespace naming them all."""
    groups: dict[tuple, list[str]] = {}
    for rec in recs:
        kube = Kubectl.for_record(rec)
        name = (rec.get("backend") or {}).get("name") or render.job_name_for(rec["id"])
        groups.setdefault((kube.namespace, kube.context), []).append(name)
    for (namespace, context), names in groups.items():
        Kubectl(namespace, context).run("patch", "job", *names, "--type", "merge", "-p",
                                        '{"spec":{"suspend":false}}', what="kubectl patch job (release sweep trials)")


#: $1.. folders: each one's status files (READ_STATUS_SH) under a ``#trial-folder`` line.
READ_MANY_SH = "for d do printf '#trial-folder %s\\n' \"$d\"; sh -c " + shlex.quote(READ_STATUS_SH) + " tao \"$d\"; done"


def read_status_many(recs: list[dict]) -> dict[str, dict[str, str]]:
    """Every running trial's status files with ONE ``kubectl exec`` in the first one's pod (the trials share
    the results volume); a trial whose folder that pod cannot see reads as no file yet."""
    folders = {}
    for rec in recs:
        spec = saved_spec(rec)
        if spec is None:
            continue
        folder = resultsmod.plan(spec, staging=render.staging_dir(spec)).for_job(rec["id"]).pod_folder
        if folder and folder.startswith("/") and "\n" not in folder:
            folders[rec["id"]] = folder
    if not folders:
        return {}
    first = next(r for r in recs if r["id"] in folders)
    kube = Kubectl.for_record(first)
    name = (first.get("backend") or {}).get("name") or render.job_name_for(first["id"])
    res = kube.run("exec", f"job/{name}", "-c", "main", "--", "sh", "-c", READ_MANY_SH, "tao", *folders.values(),
                   check=False, what="kubectl exec (read the trials' status.json)")
    if not res.ok:
        raise TaoError(f"could not read the trials' status files in {name}'s pod: {last_line(res.stderr)}")
    parts: dict[str, str] = {}
    current = None
    for line in res.stdout.splitlines(keepends=True):
        if line.startswith("#trial-folder "):
            current = line[len("#trial-folder "):].rstrip("\n")
            parts[current] = ""
        elif current is not None:
            parts[current] += line
    return {jid: split_files(parts.get(folder, "")) for jid, folder in folders.items()}
