"""Sweeps on Kubernetes: every trial's Job is made in ONE ``kubectl create`` by the one launch
(:func:`taobank.kubernetes.submit.launch`), the trials past ``--max-concurrent`` suspended; the core releases
them (ONE ``kubectl patch`` of their names, here) as slots free. The trials' progress: ONE ``kubectl exec``
in a running trial's pod reads every running trial's status files on the shared results volume."""
from __future__ import annotations

import shlex

from ..errors import TaoError
from ..progress import READ_STATUS_SH, split_files
from ..run import last_line
from . import render
from . import results as resultsmod
from .kubectl import Kubectl
from .logs import saved_spec
from .submit import SWEEP_LABEL  # noqa: F401  (cancel finds a sweep's Jobs by it)


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
    """The trials' status files with ONE ``kubectl exec`` in the first running one's pod (the trials share the
    results volume: a finished trial's folder is read there too); a trial whose folder that pod cannot see reads
    as no file yet. Without a running trial there is no pod to ask: refused, no call."""
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
    first = next((r for r in recs if r["id"] in folders and r.get("state") == "RUNNING"), None)
    if first is None:
        raise TaoError("no trial is running: its pod would read the others' status files")
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
