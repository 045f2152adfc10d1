"""Sweeps on Kubernetes: ONE Indexed Job runs every trial, the Job controller keeps at most ``--max-concurrent``
running (``parallelism``) and starts the next as one ends, with nobody polling.

Trial i is completion index i: its pod reads the trial's record id, results folder name and argv from ONE
ConfigMap (the trial table, keys ``<i>.id``, ``<i>.folder``, ``<i>.argv``) mounted at
:data:`render.SWEEP_DIR` (:data:`render.SWEEP_PROLOGUE`). ``backoffLimitPerIndex`` gives each trial its own
retry budget for disruptions, a non-zero exit fails that index alone (podFailurePolicy ``FailIndex``). The
table and the sweep's Secrets are owned by the Job (they go with it). One trial is canceled by setting its
``<i>.cancel`` key (an index not started yet exits at once) and deleting its pod (exit 143: FailIndex).

The trials' progress: ONE ``kubectl exec`` in a running pod of the Job reads every running trial's status
files on the shared results volume."""
from __future__ import annotations

import copy
import json
import posixpath
import shlex
from typing import Any, Mapping, Sequence

from .spec import KubernetesSpec
from ...jobspec import given
from ...errors import TaoError
from ...progress import READ_STATUS_SH, split_files
from ...run import last_line
from . import render
from .kubectl import KubeFacts, Kubectl
from .logs import final_status, saved_spec
from ...records import Record
from . import SWEEP_LABEL

#: A ConfigMap holds at most 1 MiB of data; the trial table stays well under it (the rest: metadata).
MAX_TABLE_BYTES = 900 * 1024


def table_name(sweep_id: str) -> str:
    """The sweep's trial table (ConfigMap) name."""
    return f"tao-sweep-{render.job_name_for(sweep_id)}"[:63].rstrip("-")


def trial_argv(spec: KubernetesSpec, folder: str | None) -> list[str]:
    """A trial's argv as its pod runs it: the same rule as a single job's (TAO's GPU arguments added, and its
    results folder ``folder``, the trial's ``$RESULTS_DIR``)."""
    return render.argv_of(spec.with_job_args(int(given(spec.gpus, 1)), int(given(spec.nodes, 1)), folder))


def plain_env(job: dict) -> dict[str, str]:
    """The values of the main container's env given as plain values, as the kubelet sees them (a value may name
    an earlier one as ``$(NAME)``); a Secret's keys are not among them and never leave the cluster's Secret."""
    env: dict[str, str] = {}
    for e in job["spec"]["template"]["spec"]["containers"][0].get("env") or []:
        if "value" in e:
            env[e["name"]] = render.kube_expand(str(e["value"]), env)
    return env


def trial_table(sweep_id: str, namespace: str, specs: list[KubernetesSpec], ids: list[str],
                env: dict[str, str] | None = None, search: Any = None) -> dict:
    """The ConfigMap every index reads its trial from; one line when it would not fit in one object. A trial's
    argv is stored as the kubelet would have expanded a single job's (``$(NAME)`` of ``env`` and of the trial's
    own results variables), since the trial's pod reads it from the table, where nothing expands it."""
    data: dict[str, str] = {}
    for i, (spec, jid) in enumerate(zip(specs, ids)):
        results = render.results_plan(spec, staging=render.staging_dir(spec)).for_job(jid)
        data[f"{i}.id"] = jid
        if results.name:
            data[f"{i}.folder"] = results.name
        mine = {**(env or {}), "TAO_JOB_ID": jid, **{e["name"]: str(e["value"]) for e in results.env()}}
        words = [render.kube_expand(w, mine) for w in trial_argv(spec, results.pod_folder)]
        if search is not None:  # the runner first: it asks the study, then runs this argv
            words = search.wrap(words, SEARCH_MOUNT, i, journal=posixpath.join(search_folder(specs, ids, sweep_id),
                                                                              "journal.log"))
        data[f"{i}.argv"] = shlex.join(words)
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > MAX_TABLE_BYTES:
        fits = max(1, len(specs) * MAX_TABLE_BYTES // size)
        raise TaoError(f"the sweep's {len(specs)} trials need a {size // 1024} KiB trial table, more than one "
                       f"ConfigMap holds (1 MiB): split it into sweeps of at most {fits} trials (nothing was created)")
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": table_name(sweep_id), "namespace": namespace,
                         "labels": {**render.labels_for(sweep_id), SWEEP_LABEL: sweep_id}},
            "data": data}


def indexed(job: dict, sweep_id: str, n: int, k: int) -> dict:
    """A single-pod Job made the sweep's Indexed Job: N completions, K at once, each index its own retry budget
    (``backoffLimitPerIndex``: the disruptions a single job may have) and a non-zero exit failing that index
    alone (``FailIndex`` where a single job has ``FailJob``); the other trials go on. A time limit is each
    trial's own (the pod's ``activeDeadlineSeconds``), never the whole sweep's."""
    job = copy.deepcopy(job)
    spec = job["spec"]
    retries = int(spec.pop("backoffLimit", 0) or 0)
    spec.update({"completionMode": "Indexed", "completions": n, "parallelism": k, "backoffLimitPerIndex": retries})
    if spec.get("activeDeadlineSeconds"):  # a trial's time limit, not the whole sweep's: on each trial's pod
        spec["template"]["spec"]["activeDeadlineSeconds"] = spec.pop("activeDeadlineSeconds")
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        if rule.get("action") == "FailJob":
            rule["action"] = "FailIndex"
    job["metadata"].setdefault("labels", {})[SWEEP_LABEL] = sweep_id
    job["spec"]["template"]["metadata"].setdefault("labels", {})[SWEEP_LABEL] = sweep_id
    return job


def build(specs: Sequence[KubernetesSpec | Mapping[str, Any]], ids: list[str], sweep_id: str, namespace: str, k: int, *, creds: bool,
          ngc: bool, search: Any = None) -> list[dict]:
    """[the Indexed Job, its trial table]: what a sweep of ``specs`` (trial i: record ``ids[i]``) creates; a
    search (``search``: taobank.campaign.search.bundle.Staging) adds its bundle ConfigMap, mounted in every trial's pod."""
    typed = [KubernetesSpec.of(s) for s in specs]
    name = render.job_name_for(sweep_id)
    objs = render.render_manifests(typed[0], job_id=sweep_id, namespace=namespace, name=name,
                                   cred_secret=render.cred_secret_name(sweep_id) if creds else None,
                                   pull_secrets=[render.pull_secret_name(sweep_id)] if ngc else [],
                                   sweep_table=table_name(sweep_id))
    job = render.find(objs, "Job")
    assert job is not None
    out = [indexed(job, sweep_id, len(typed), k), trial_table(sweep_id, namespace, typed, ids, plain_env(job), search)]
    if search is not None:
        out += search_bundle(out[0], sweep_id, namespace, search)
    return out


# ------------------------------------------------------------------ a search (submit --search)
#: Where every trial's pod sees the search's bundle and settings (a ConfigMap, read-only); the journal is on the
#: shared results volume (:func:`search_folder`).
SEARCH_MOUNT = "/tao-search"
#: A ConfigMap holds at most 1 MiB.
MAX_BUNDLE_BYTES = 1000 * 1024


def search_folder(specs: Sequence[KubernetesSpec], ids: list[str], sweep_id: str) -> str:
    """The study's folder on the shared results volume, as the pods see it: ``<results base>/<sweep id>/search``;
    one line when the results are not on a volume every trial shares (tier C stages them per pod)."""
    if render.staging_dir(specs[0]) is not None:
        raise TaoError("a search keeps its study on the results volume every trial shares: give --pvc-mount (tier A), "
                       "not tier C's per-pod staging (nothing was created)")
    folder = render.results_plan(specs[0]).for_job(ids[0]).pod_folder
    if not folder:
        raise TaoError("a search keeps its study beside the trials' results: give the trials a results volume "
                       "(--pvc-mount), not --no-results (nothing was created)")
    return posixpath.join(posixpath.dirname(folder.rstrip("/")), sweep_id, "search")


def check_search_site(kube: Kubectl, spec: KubernetesSpec, folder: str, search: Any) -> str:
    """The one site rule of every platform (taobank.campaign.search.site), where the trials will run: a helper Job of the
    trials' own image on their results volume (writable, no GPU; its TTL removes it) runs the check - the
    journal's lock where the study's folder will be (not for a study in a database) and the image's python3
    3.10+ with numpy. What it finds wrong refuses the submit in one line; a check pod that cannot run in time
    (the image still being pulled) is a warning, not a refusal (as the inputs' check). The gate's line."""
    from . import volume_job

    base = posixpath.dirname(posixpath.dirname(folder.rstrip("/")))
    script, words = search.site(base, python=True)
    try:
        code, output = volume_job.run(kube, spec, ["/bin/sh", "-c", script, "tao-search-site", *words],
                                      purpose="checking the search's site (the results volume, the image's python3)",
                                      image=str(spec.image), writable=True)
    except TaoError as exc:
        return (f"warning: search site not checked ({exc}): a trial whose image has no python3 3.10+ with numpy, or "
                "whose volume's lock fails, ends with one line in its log saying so")
    said = search.site_problems(output)
    refused = search.site_refusal(
        said, base=base, where="on the results volume", nothing="nothing was created",
        python_fix=f"the image {spec.image} has no python3 of 3.10 or later with numpy, which each search trial's "
                   "runner needs (TAO's images have them)")
    if refused:
        raise TaoError(refused)
    if "unchecked" in said:
        return (f"warning: search site not checked: the check pod of image {spec.image} ended (exit {code}) "
                "before it finished (no /bin/sh in the image?)")
    checked = ", ".join(w for w, on in (("journal lock", not search.settings.storage_env),
                                        ("the image's python3 with numpy", True)) if on)
    return f"search site ok on the results volume ({checked}; checked by a pod of the trials' image)"


def search_bundle(job: dict, sweep_id: str, namespace: str, search: Any) -> list[dict]:
    """The search's ConfigMaps (the bundle and the settings, and a database study's libraries, as binary data;
    as many as their 1 MiB each needs) and their one volume in the Job's pods (projected: every file in
    :data:`SEARCH_MOUNT`)."""
    import base64

    files = search.files(sweep_id)
    groups: list[dict[str, bytes]] = [{}]
    for key in sorted(files, key=lambda k: (not k.endswith(".pyz"), k)):  # the bundle first
        if len(files[key]) > MAX_BUNDLE_BYTES:
            raise TaoError(f"the search's {key} does not fit in one ConfigMap (1 MiB) (nothing was created)")
        if groups[-1] and sum(map(len, groups[-1].values())) + len(files[key]) > MAX_BUNDLE_BYTES:
            groups.append({})
        groups[-1][key] = files[key]
    base = f"tao-search-{render.job_name_for(sweep_id)}"[:60].rstrip("-")
    names = [base if i == 0 else f"{base}-{i}" for i in range(len(groups))]
    pod = job["spec"]["template"]["spec"]
    volume: dict[str, Any] = {"name": "tao-search", "configMap": {"name": names[0]}} if len(names) == 1 else \
        {"name": "tao-search", "projected": {"sources": [{"configMap": {"name": n}} for n in names]}}
    pod.setdefault("volumes", []).append(volume)
    main = next(c for c in pod["containers"] if c.get("name") == "main")
    main.setdefault("volumeMounts", []).append({"name": "tao-search", "mountPath": SEARCH_MOUNT, "readOnly": True})
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": name, "namespace": namespace,
                          "labels": {**render.labels_for(sweep_id), SWEEP_LABEL: sweep_id}},
             "binaryData": {k: base64.b64encode(v).decode() for k, v in group.items()}}
            for name, group in zip(names, groups)]


#: $1 a file of the search's folder: its text, nothing while it does not exist.
READ_SEARCH_FILE = 'f=$1; [ -f "$f" ] || exit 0; cat -- "$f"'


def read_search_file(rec: Record, path: str) -> str:
    """A file of the search's folder (the study's journal): ONE ``kubectl exec`` in a running pod of the sweep's
    Job, or, once none runs, a helper pod on its volume (:mod:`taobank.platforms.kubernetes.volume_job`)."""
    from . import volume_job

    facts = KubeFacts.of(rec)
    folder = facts.search_dir
    if not folder.startswith("/") or posixpath.dirname(path) != folder.rstrip("/") or "\n" in path:
        raise TaoError(f"job {rec.id} is not a trial of a search (its record names no search folder)")
    kube = Kubectl.for_record(rec)
    name = facts.name or render.job_name_for(rec.id)
    res = kube.run("exec", f"job/{name}", "-c", "main", "--", "sh", "-c", READ_SEARCH_FILE, "tao", path, check=False,
                   what="kubectl exec (read the study's journal)")
    if res.ok:
        return res.stdout
    spec = saved_spec(rec)
    if spec is None:
        raise TaoError(f"job {rec.id} has no saved job spec beside its record: its volume is unknown")
    with volume_job.reader(kube, spec, purpose="reading the study's journal", for_job=rec.id) as pod:
        got = pod.text(READ_SEARCH_FILE, [path], what="read the study's journal")
    if not got.ok:
        raise TaoError(f"could not read the study's journal {path}: {last_line(got.stderr)}")
    return got.stdout


def release(recs: list[Record]) -> None:
    """Unsuspend held trials of a sweep made by 0.3.x (one Job per trial, those past ``--max-concurrent`` created
    suspended; the core releases them as slots free, :mod:`taobank.core.sweep_slots`): ONE ``kubectl patch`` per
    namespace naming them all. A sweep made now is one Indexed Job and holds no trial."""
    groups: dict[tuple, list[str]] = {}
    for rec in recs:
        kube = Kubectl.for_record(rec)
        name = KubeFacts.of(rec).name or render.job_name_for(rec.id)
        groups.setdefault((kube.namespace, kube.context), []).append(name)
    for (namespace, context), names in groups.items():
        Kubectl(namespace, context).run("patch", "job", *names, "--type", "merge", "-p", '{"spec":{"suspend":false}}',
                                        what="kubectl patch job (release the held trials of a 0.3.x sweep)")


#: $1.. folders: each one's status files (READ_STATUS_SH) under a ``#trial-folder`` line.
READ_MANY_SH = "for d do printf '#trial-folder %s\\n' \"$d\"; sh -c " + shlex.quote(READ_STATUS_SH) + " tao \"$d\"; done"


def read_status_many(recs: list[Record]) -> dict[str, dict[str, str]]:
    """Every trial's status files with ONE ``kubectl exec`` in a running pod of the first one's Job (the trials
    share the results volume: a finished trial's folder is read there too); a trial whose folder that pod cannot
    see reads as no file yet. A job that ended is read from the last lines its pod printed as it ended (in the
    log saved then: no call). Without a running pod to ask for the others: refused, no call."""
    ended: dict[str, dict[str, str]] = {}
    for rec in recs:
        if rec.state != "RUNNING" and (final := final_status(rec.id)) is not None:
            ended[rec.id] = final
    recs = [r for r in recs if r.id not in ended]
    folders = {}
    for rec in recs:
        spec = saved_spec(rec)
        if spec is None:
            continue
        folder = render.results_plan(spec, staging=render.staging_dir(spec)).for_job(rec.id).pod_folder
        if folder and folder.startswith("/") and "\n" not in folder:
            folders[rec.id] = folder
    if not folders:
        return ended
    first = next((r for r in recs if r.id in folders and r.state == "RUNNING"), None)
    if first is None:
        if ended:
            return ended
        raise TaoError("no trial is running: its pod would read the others' status files")
    kube = Kubectl.for_record(first)
    name = KubeFacts.of(first).name or render.job_name_for(first.id)
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
    return {**ended, **{jid: split_files(parts.get(folder, "")) for jid, folder in folders.items()}}


def cancel_body(indexes: list[int]) -> str:
    """The merge patch that marks these trials canceled in the table (an index not started yet exits at once)."""
    return json.dumps({"data": {f"{i}.cancel": "canceled by tao-skill-bank" for i in indexes}})
