"""submit / status / logs / cancel for Kubernetes jobs (the core never prints).

submit: gates -> open record -> render -> secret lint -> server dry-run ->
create the Job -> create its Secret(s) (stdin), Service, ConfigMap already owned
by it (ownerReferences to its UID) -> mark.
status: records -> ONE ``kubectl get jobs,pods -l tao-job-id`` per
(context, namespace) -> :func:`smap.observe` -> mark (+ final logs saved).
"""
from __future__ import annotations

import base64
import json
import os

from .. import envfile, fsio, pins, platform, records, redact, safeparse, states
from ..errors import TaoError
from . import JOB_LABEL, OWNER_UID_LABEL, gates, render
from . import results as resultsmod
from . import status as smap
from .kubectl import Kubectl

PLATFORM = "kubernetes"
#: The job spec as submitted, next to the record (artifact folder).
SPEC_FILE = "spec.json"


# -- credentials ---------------------------------------------------------------

def read_secrets_file(path: str) -> dict[str, str]:
    """KEY=VALUE lines from a file only its owner can read (mode 600 or stricter)."""
    return envfile.read(path, what="secrets file", private=True)


def collect_credentials(secret_env: list[str] | tuple[str, ...] = (), secrets_file: str | None = None) -> dict[str, str]:
    """Secret values from this process's environment (names given) and/or a mode-600 env-file."""
    creds: dict[str, str] = {}
    if secrets_file:
        creds.update(read_secrets_file(secrets_file))
    for name in secret_env:
        envfile.check_secret_name(name, "--secret-env name")
        value = os.environ.get(name)
        if value is None or value == "":
            raise TaoError(f"--secret-env {name}: {name} is not set in the environment: export it first")
        creds[name] = value
    return creds


def credential_names(secret_env: list[str] | tuple[str, ...] = (), secrets_file: str | None = None) -> list[str]:
    """The names submit puts in the per-job Secret, checked as submit checks them, for a dry run: each
    --secret-env variable must be set and the file private and well formed; no value is kept or shown."""
    found = list(read_secrets_file(secrets_file)) if secrets_file else []  # the keys only
    for name in secret_env:
        envfile.check_secret_name(name, "--secret-env name")
        if not os.environ.get(name):
            raise TaoError(f"--secret-env {name}: {name} is not set in the environment: export it first")
        found.append(name)
    return list(dict.fromkeys(found))


def check_ngc_key() -> None:
    """--ngc-pull-secret needs NGC_KEY set (a dry run checks only that)."""
    if not os.environ.get("NGC_KEY"):
        raise TaoError("--ngc-pull-secret needs NGC_KEY in the environment: export NGC_KEY first")


def _secret_object(name: str, namespace: str, job_id: str, creds: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace, "labels": render.labels_for(job_id)},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in creds.items()},
    }


def _pull_secret_object(name: str, namespace: str, job_id: str, key: str, registry: str = "nvcr.io") -> dict:
    user = "$oauthtoken"
    auth = base64.b64encode(f"{user}:{key}".encode()).decode()
    cfg = json.dumps({"auths": {registry: {"username": user, "password": key, "auth": auth}}})
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name, "namespace": namespace, "labels": render.labels_for(job_id)},
        "data": {".dockerconfigjson": base64.b64encode(cfg.encode()).decode()},
    }


#: What a dry run shows in place of every Secret value: never the value, not even its base64.
MASKED = "<masked>"


def masked(obj: dict) -> dict:
    """A Secret object with every data value replaced by :data:`MASKED` (the keys stay)."""
    return {**obj, "data": {key: MASKED for key in obj.get("data") or {}}}


def _create_secret(kube: Kubectl, obj: dict) -> None:
    """Create (or, on a resumed submit, replace) a Secret sent on stdin; never ``apply``
    (apply would copy the data into the last-applied-configuration annotation)."""
    body = json.dumps(obj)
    res = kube.run("create", "-f", "-", stdin=body, check=False, what="kubectl create secret")
    if res.ok:
        return
    if "AlreadyExists" in res.stderr or "already exists" in res.stderr:
        kube.run("replace", "-f", "-", stdin=body, what="kubectl replace secret")
        return
    raise TaoError(f"creating Secret {obj['metadata']['name']} failed: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else 'no output'}")


# -- gates ---------------------------------------------------------------------

def capacity_gate(kube: Kubectl, spec: dict, *, require_free: bool = False) -> str:
    """Allocatable and free GPUs on schedulable nodes (see :mod:`gates`); returns the figures line.
    Without permission to list nodes the gate cannot judge: it says so and lets the submit go on."""
    gpus, nodes = int(spec.get("gpus", 1)), int(spec.get("nodes", 1))
    try:
        node_items = kube.items("nodes", what="kubectl get nodes")
    except TaoError as exc:
        if "Forbidden" not in str(exc) and "forbidden" not in str(exc):
            raise
        if require_free:
            raise TaoError("--require-free needs to list nodes, which you may not"
                           f"{' (context ' + kube.context + ')' if kube.context else ''}: ask the cluster admin for "
                           "get/list on nodes, or submit without --require-free") from None
        return (f"warning: not checked: you may not list nodes, so the GPU capacity is unknown; a Job that can "
                f"never fit {gpus} nvidia.com/gpu x {nodes} would wait forever (tao_k8s.py status shows why)")
    res = kube.run("get", "pods", "--all-namespaces", "-o", "json",
                   "--field-selector=status.phase!=Succeeded,status.phase!=Failed", check=False,
                   what="kubectl get pods --all-namespaces")
    note = ""
    if res.ok:
        pods = json.loads(res.stdout).get("items") or []
    else:  # no cluster-wide pod read (RBAC): count what this namespace uses, and say so
        res = kube.run("get", "pods", "-o", "json", "--field-selector=status.phase!=Succeeded,status.phase!=Failed",
                       check=False, what="kubectl get pods")
        pods = json.loads(res.stdout).get("items") or [] if res.ok else []
        where = f"outside namespace {kube.namespace}" if res.ok else "in any namespace"
        note = f" (pods {where} are not visible to you: their GPUs are not subtracted)"
    figures = gates.node_gpus(node_items, pods, node_selector=spec.get("node_selector"),
                              tolerations=spec.get("tolerations"))
    return gates.check_capacity(figures, gpus, nodes, require_free=require_free) + note


def nccl_gate(kube: Kubectl, *, skip: bool) -> dict:
    """Multi-node submits need an ``ok`` NCCL probe verdict cached for this cluster (or ``--skip-nccl-probe``);
    returns what the record keeps (``nccl_probe: ok|skipped``)."""
    from .. import nccl_probe as core
    from .nccl_probe import HELPER, cluster_key

    return core.require_ok(PLATFORM, cluster_key(kube), helper=HELPER, skip=skip)


def version_gate(kube: Kubectl, nodes: int) -> tuple[bool, str]:
    """The server version decides two things: multi-node needs ``min_version_multinode`` (refused
    below it); podFailurePolicy (disruptions retried) needs ``min_version_pod_failure_policy``, below
    which the Job gets backoffLimit 0. Returns (retry disruptions?, the line for the gate report)."""
    found = gates.server_version(kube.json("version", what="kubectl version"))
    if nodes > 1:
        gates.check_version(found, pins.resolve("kubernetes.min_version_multinode"))
    retry = gates.at_least(found, pins.resolve("kubernetes.min_version_pod_failure_policy"))
    limit = int(pins.resolve("kubernetes.disruption_retries"))
    if not retry:
        line = f"server {found[0]}.{found[1]} has no podFailurePolicy: no retry (backoffLimit 0)"
    elif nodes > 1:
        line = ("a pod disruption (drain, preemption, eviction) fails the multi-node Job at once (a replaced rank "
                "cannot rejoin the others), as does a non-zero exit")
    else:
        line = (f"pod disruptions (drain, preemption, eviction) retried up to {limit} times, a non-zero exit fails "
                "at once")
    return retry, line


def needed_permissions(spec: dict, *, creds: bool, config: bool, inputs: bool = False) -> list[tuple[str, str]]:
    """Exactly what submit does: ``create`` of the Job and of each owned kind it uses; with inputs to check,
    the reads of the check Job's pod and its output."""
    kinds = ["jobs"] + (["secrets"] if creds else []) + (["services"] if int(spec.get("nodes", 1)) > 1 else []) \
        + (["configmaps"] if config else [])
    return [("create", k) for k in kinds] + ([("list", "pods"), ("get", "pods/log")] if inputs else [])


def permission_gate(kube: Kubectl, wanted: list[tuple[str, str]]) -> None:
    """``kubectl auth can-i`` for each (verb, resource) submit will use; one line naming what is missing."""
    missing = [f"{verb} {r}" for verb, r in wanted if not kube.can_i(verb, r)]
    if missing:
        raise TaoError(
            f"you may not {', '.join(missing)} in namespace {kube.namespace}"
            f"{' (context ' + kube.context + ')' if kube.context else ''}: ask for a Role that allows it or pick another namespace"
        )


# -- submit --------------------------------------------------------------------

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


def preview(spec: dict, *, namespace: str, job_id: str, secret_env: list[str] | tuple[str, ...] = (),
            secrets_file: str | None = None, ngc_pull_secret: bool = False, config: dict | None = None) -> list[dict]:
    """What submit creates, in its order (the Job, its Secrets, then Service/ConfigMap): the same Secret
    names and references (envFrom, imagePullSecrets), every Secret value masked. Contacts nothing; no
    value is read from the environment (only that the variables are set) and of a secrets file only
    the keys are kept."""
    names = credential_names(secret_env, secrets_file)
    if ngc_pull_secret:
        check_ngc_key()
    cred_name = render.cred_secret_name(job_id) if names else None
    pull_name = render.pull_secret_name(job_id) if ngc_pull_secret else None
    objs = render.render_manifests(spec, job_id=job_id, namespace=namespace, cred_secret=cred_name,
                                   pull_secrets=[pull_name] if pull_name else [], config=config)
    _lint(objs, "the job spec")
    secrets = [masked(_secret_object(cred_name, namespace, job_id, dict.fromkeys(names, "")))] if cred_name else []
    if pull_name:
        secrets.append(masked(_pull_secret_object(pull_name, namespace, job_id, "")))
    job = render.find(objs, "Job")
    return [job, *secrets, *[o for o in objs if o is not job]]


def _lint(objs: list[dict], what: str) -> None:
    """The secret lint (redact_secrets.py rules) over the manifest text; the value is never echoed."""
    findings = redact.lint_objects(objs, what)
    if findings:
        raise TaoError(f"{what} holds what looks like a secret ({findings[0].rule} at manifest line "
                       f"{findings[0].line}): pass credentials with --secret-env/--secrets-file, never in env")


def _server_check(kube: Kubectl, objs: list[dict]) -> None:
    """Server dry-run of the spec preview: a missing namespace or a field the API rejects is refused
    before the record opens (nothing to clean up, no ERROR record for a typo)."""
    try:
        kube.apply(objs, dry_run=True, create=True)
    except TaoError as exc:
        text = str(exc)
        if f'namespaces "{kube.namespace}" not found' in text:
            where = f" in context {kube.context}" if kube.context else ""
            raise TaoError(f"namespace {kube.namespace} does not exist{where}: set TAO_K8S_NAMESPACE (or --namespace) "
                           f"to an existing one, or ask for it to be created") from None
        raise


def _find_jobs(kube: Kubectl, job_id: str) -> list[dict]:
    return kube.items("jobs", "-l", f"{JOB_LABEL}={job_id}", what="kubectl get jobs")


def submit(
    spec: dict,
    *,
    kube: Kubectl | None = None,
    job_id: str | None = None,
    secret_env: list[str] | tuple[str, ...] = (),
    secrets_file: str | None = None,
    ngc_pull_secret: bool = False,
    config: dict | None = None,
    description: str | None = None,
    require_free: bool = False,
    skip_nccl_probe: bool = False,
    nccl_probe_run: bool = False,
) -> dict:
    """Launch ``spec``; returns {"id", "backend_ref", "uid", "state", "gate", "reconciled", ...}.

    ``job_id`` resumes a record opened earlier (``tao_job_record.py open``):
    if a Job with its label exists already, it is adopted, not created again.
    """
    rec = None
    if job_id:  # resuming: the cluster and namespace the record names, never this shell's defaults
        rec = platform.load_for(job_id, PLATFORM, "submit --job-id")
        if (rec.get("backend") or {}).get("namespace"):
            mine = Kubectl.for_record(rec)
            if kube is not None and (kube.namespace, kube.context or None) != (mine.namespace, mine.context or None):
                raise TaoError(f"record {job_id} was submitted to namespace {mine.namespace} (context "
                               f"{mine.context or 'the current one'}): resume it without --namespace/--context, so "
                               "its Job is found there, never created twice")
            kube = mine
    kube = kube or Kubectl()
    creds = collect_credentials(secret_env, secrets_file)
    ngc_key = None
    if ngc_pull_secret:
        check_ngc_key()
        ngc_key = os.environ.get("NGC_KEY")
    nodes = int(spec.get("nodes", 1))
    # the spec is checked (a pure render) before any cluster call: a bad spec costs nothing
    preview = render.render_manifests(spec, job_id="spec-check", namespace=kube.namespace,
                                      cred_secret="x" if creds else None, config=config)
    _lint(preview, "the job spec")
    results_plan = resultsmod.plan(spec, staging=render.staging_dir(spec))  # the folder the record keeps
    if rec is not None:
        if rec["state"] in states.TERMINAL:
            raise TaoError(f"record {job_id} is {rec['state']} already: open a new record to run again")
        existing = _find_jobs(kube, job_id)
        if existing:
            return _adopt(kube, rec, existing[0], spec, creds, ngc_key, config)

    gate = capacity_gate(kube, spec, require_free=require_free)  # read-only checks come first: a refusal leaves no record
    retry, retry_line = version_gate(kube, nodes)
    gate = f"{gate}; {retry_line}"
    nccl: dict = {}
    if nodes > 1 and not nccl_probe_run:  # the probe itself is the one multi-node job that needs no verdict
        nccl = nccl_gate(kube, skip=skip_nccl_probe)
        gate += "; NCCL probe " + ("skipped (--skip-nccl-probe)" if nccl["nccl_probe"] == "skipped"
                                   else f"ok (job {nccl.get('nccl_probe_job')}, {nccl.get('nccl_probe_at')})")
    from . import inputs as inputsmod

    input_paths = inputsmod.paths(spec, results_plan.pod_folder).all if spec.get("check_inputs", True) else []
    permission_gate(kube, needed_permissions(spec, creds=bool(creds or ngc_key), config=bool(config),
                                             inputs=bool(input_paths)))
    preview = render.render_manifests(spec, job_id="spec-check", namespace=kube.namespace,
                                      cred_secret="x" if creds else None, config=config, retry_disruptions=retry)
    _server_check(kube, preview)  # the server's verdict on the spec, still before any record exists
    if input_paths:  # test -e next to the volumes, before a record or a GPU
        gate += "; " + inputsmod.check(kube, spec, results_plan.pod_folder)

    if rec is None:
        rec = records.open_record(
            PLATFORM, spec["image"], spec.get("network_arch") or "custom", spec.get("action") or "run",
            spec.get("storage_tier", "A"), results_plan.folder,
            backend={"namespace": kube.namespace, "context": kube.context or "", **nccl}, description=description,
        )
    jid = rec["id"]
    # the spec (secret-free: linted above) stays with the record: logs reads the volume copy through it
    fsio.write_private(records.artifact_dir(jid) / SPEC_FILE, json.dumps(spec, sort_keys=True) + "\n")
    name = render.job_name_for(jid)
    cred_name = render.cred_secret_name(jid) if creds else None
    pull_name = render.pull_secret_name(jid) if ngc_key else None
    job: dict = {}
    owned: list[tuple[str, str]] = []
    try:
        objs = render.render_manifests(spec, job_id=jid, namespace=kube.namespace, name=name,
                                       cred_secret=cred_name, pull_secrets=[pull_name] if pull_name else [],
                                       config=config, retry_disruptions=retry)
        _lint(objs, f"manifest of {jid}")
        kube.apply(objs, dry_run=True, create=True)
        # the Job first: its UID owns everything else, which is then created owned (create is the only verb)
        (job,) = kube.apply([render.find(objs, "Job")], create=True)
        if cred_name:
            _create_secret(kube, owned_by(_secret_object(cred_name, kube.namespace, jid, creds), job))
            owned.append(("secret", cred_name))
        if pull_name:
            _create_secret(kube, owned_by(_pull_secret_object(pull_name, kube.namespace, jid, ngc_key or ""), job))
            owned.append(("secret", pull_name))
        rest = [owned_by(o, job) for o in objs if o.get("kind") in ("Service", "ConfigMap")]
        made = kube.apply(rest, create=True) if rest else []
        owned += [(o["kind"].lower(), o["metadata"]["name"]) for o in made]
        if config:
            _verify_config(made)
    except TaoError as exc:
        if job.get("metadata", {}).get("uid"):  # the owned objects go with it (garbage collector)
            kube.run("delete", "--raw", f"/apis/batch/v1/namespaces/{kube.namespace}/jobs/{name}", "-f", "-",
                     stdin=json.dumps(delete_options(job["metadata"]["uid"], "Background")), check=False)
        records.mark(jid, "ERROR", message=f"submit failed before launch: {exc}")
        raise
    return _record_launch(kube, jid, job, owned, gate, reconciled=False)


def _referenced_secrets(job: dict) -> set[str]:
    """Secret names the Job's pods need (envFrom and imagePullSecrets): missing ones stop its pods."""
    pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    out = {p.get("name") for p in pod.get("imagePullSecrets") or []}
    for c in (pod.get("containers") or []) + (pod.get("initContainers") or []):
        out |= {(e.get("secretRef") or {}).get("name") for e in c.get("envFrom") or []}
    return {n for n in out if n}


def _create_missing(kube: Kubectl, obj: dict) -> bool:
    """``kubectl create`` one object; one that exists already (a race with another resume) is left as it is."""
    res = kube.run("create", "-f", "-", "-o", "json", stdin=json.dumps(obj), check=False,
                   what=f"kubectl create {obj['kind'].lower()}")
    if res.ok:
        return True
    if "AlreadyExists" in res.stderr or "already exists" in res.stderr:
        return False
    last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else "no output"
    raise TaoError(f"creating {obj['kind']} {obj['metadata']['name']} failed: {last}")


def _adopt(kube: Kubectl, rec: dict, job: dict, spec: dict, creds: dict, ngc_key: str | None, config: dict | None) -> dict:
    """A resumed submit found its Job: create the owned objects it lacks (a submit that died between
    the Job and its Service/ConfigMap/Secrets) and bind the record; never create a second Job."""
    jid = rec["id"]
    ns = kube.namespace
    name = (job.get("metadata") or {}).get("name") or render.job_name_for(jid)
    wanted = _referenced_secrets(job)
    cred_name, pull_name = render.cred_secret_name(jid), render.pull_secret_name(jid)
    existing: dict[str, set[str]] = {}
    for kind in ("secret", "service", "configmap"):
        existing[kind] = {o["metadata"]["name"] for o in kube.items(kind + "s", "-l", f"{JOB_LABEL}={jid}")}
    # credentials given again: (re)create the per-job Secrets (one deleted by hand leaves the pod in
    # CreateContainerConfigError); the object names are the ones the Job already references
    if creds:
        _create_secret(kube, owned_by(_secret_object(cred_name, ns, jid, creds), job))
        existing["secret"].add(cred_name)
    if ngc_key:
        _create_secret(kube, owned_by(_pull_secret_object(pull_name, ns, jid, ngc_key), job))
        existing["secret"].add(pull_name)
    objs = render.render_manifests(spec, job_id=jid, namespace=ns, name=name,
                                   cred_secret=cred_name if (creds or cred_name in wanted) else None,
                                   pull_secrets=[pull_name] if (ngc_key or pull_name in wanted) else [],
                                   config=config)
    made = []
    for obj in objs:
        kind = obj.get("kind", "").lower()
        if kind in ("service", "configmap") and obj["metadata"]["name"] not in existing[kind]:
            if _create_missing(kube, owned_by(obj, job)):
                made.append(obj)
            existing[kind].add(obj["metadata"]["name"])
    owned = [(kind, n) for kind in ("secret", "service", "configmap") for n in sorted(existing[kind])]
    gate = "skipped: the Job already exists"
    if made:
        gate += "; created what it lacked: " + ", ".join(f"{o['kind']} {o['metadata']['name']}" for o in made)
    out = _record_launch(kube, jid, job, owned, gate, reconciled=True)
    lacking = sorted(wanted - existing["secret"])
    if cred_name in lacking:
        raise TaoError(f"the Job's Secret {cred_name} is missing and its pods cannot start: resume again with the "
                       "same --secret-env/--secrets-file as the first submit")
    if pull_name in lacking:
        raise TaoError(f"the Job's pull Secret {pull_name} is missing and its pods cannot start: export NGC_KEY and "
                       "resume again with --ngc-pull-secret")
    if config is None and any(v.get("configMap") for v in ((job.get("spec") or {}).get("template") or {})
                              .get("spec", {}).get("volumes") or []) \
            and render.config_map_name(jid) not in existing["configmap"]:
        raise TaoError(f"the Job's ConfigMap {render.config_map_name(jid)} is missing and its pods cannot start: "
                       "resume again with the same config file as the first submit")
    return out


def _verify_config(made: list[dict]) -> None:
    """Check the content hash of the ConfigMap the server stored (what the pod mounts is what was staged)."""
    cm = render.find(made, "ConfigMap")
    if not cm:
        return
    want = (cm["metadata"].get("annotations") or {}).get(render.CONFIG_SHA_ANNOTATION)
    got = [render.sha256_text(v) for v in (cm.get("data") or {}).values()]
    if want not in got:
        raise TaoError(f"ConfigMap {cm['metadata']['name']} content does not match sha256 {want}: re-submit")


def _record_launch(kube: Kubectl, jid: str, job: dict, owned: list, gate: str, *, reconciled: bool) -> dict:
    meta = job.get("metadata") or {}
    ref = f"{kube.namespace}/{meta.get('name')}"
    backend = {"uid": meta.get("uid"), "namespace": kube.namespace, "name": meta.get("name"),
               "context": kube.context or "", "owned": ",".join(f"{k}/{n}" for k, n in owned),
               "nodes": (job.get("spec") or {}).get("parallelism") or 1}
    rec = records.load(jid)
    state = rec["state"] if rec["state"] in states.ACTIVE else "PENDING"
    msg = "reconciled with the existing Job" if reconciled else "Job created"
    rec = records.mark(jid, state, backend_ref=ref, backend=backend, message=msg)
    return {"id": jid, "backend_ref": ref, "uid": meta.get("uid"), "state": rec["state"], "gate": gate,
            "reconciled": reconciled, "namespace": kube.namespace, "context": kube.context, "name": meta.get("name")}


# -- status --------------------------------------------------------------------

def _last_message(rec: dict) -> str | None:
    tr = rec.get("transitions") or []
    return tr[-1].get("message") if tr else None


def _pod_logs(kube: Kubectl, pod: dict, tail: int) -> str:
    """Every container's output of one pod. When one container cannot answer (the main container
    still waiting behind a failed fetch initContainer, say), each container is asked on its own, so
    the one that failed is still shown."""
    name = pod["metadata"]["name"]
    res = kube.run("logs", name, "--all-containers=true", f"--tail={tail}", check=False, what="kubectl logs")
    if res.ok:
        return res.stdout
    spec = pod.get("spec") or {}
    containers = [c.get("name") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
    chunks = []
    for cname in [c for c in containers if c]:
        one = kube.run("logs", name, "-c", cname, f"--tail={tail}", check=False, what="kubectl logs")
        if one.ok and one.stdout:
            chunks.append(f"# container {cname}:\n" + one.stdout + ("" if one.stdout.endswith("\n") else "\n"))
    if chunks:
        return "".join(chunks)
    why = (res.stderr or "").strip().splitlines()
    return f"# no logs from pod {name}: {why[-1] if why else 'kubectl logs failed'}\n"


def save_final_logs(kube: Kubectl, rec: dict, pods: list[dict]) -> str | None:
    """Write the pods' logs next to the record (they vanish with ttlSecondsAfterFinished)."""
    if not pods:
        return None
    text = format_logs(kube, pods, int(pins.resolve("kubernetes.logs_tail")))
    path = records.artifact_dir(rec["id"]) / "logs.txt"
    fsio.write_private(path, redact.redact_text(text))
    return str(path)


def format_logs(kube: Kubectl, pods: list[dict], tail: int) -> str:
    """Logs of every pod, rank by rank; multi-pod output prefixes each line with [rank N pod]."""
    pods = smap.sort_pods(pods)
    chunks = []
    for pod in pods:
        name = pod["metadata"]["name"]
        text = _pod_logs(kube, pod, tail)
        if len(pods) == 1:
            chunks.append(text)
            continue
        rank = smap.pod_rank(pod)
        prefix = f"[rank {rank} {name}] " if rank is not None else f"[{name}] "
        chunks.append("".join(prefix + line + "\n" for line in text.splitlines()))
    return "".join(chunks)


def _observe_record(kube: Kubectl, rec: dict, entry: dict | None) -> tuple[smap.Observation, list[dict]]:
    b = rec.get("backend") or {}
    entry = entry or {"jobs": [], "pods": []}
    job = smap.pick_job(entry["jobs"], b.get("uid"), b.get("name"))
    pods = smap.pods_of(job, entry["pods"])
    obs = smap.observe(job, pods)
    if obs.state == "ERROR" and obs.failed_pod and rec["state"] not in states.TERMINAL:
        failed = next(p for p in pods if p["metadata"]["name"] == obs.failed_pod)
        logs = {obs.failed_pod: _pod_logs(kube, failed, 50)}
        obs = smap.observe(job, pods, logs)
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
             and res["state"] in states.TERMINAL and credential_secrets(rec) and (rec.get("backend") or {}).get("uid")]
    if not ended:
        return
    try:
        delete_credentials(kube, [rec["backend"]["uid"] for rec, _ in ended])
    except TaoError as exc:
        for _, res in ended:
            res["message"] = f"{res['message']}; {_kept_note(exc)}"


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
            saved = save_final_logs(kube, rec, pods)
        rec = records.mark(rec["id"], new, source=source, message=obs.message,
                           err_class=obs.err_class if new == "ERROR" else None)
    logs_file = records.artifact_dir(rec["id"]) / "logs.txt"
    result = {
        "id": rec["id"], "state": rec["state"], "observed": obs.state, "err_class": rec.get("err_class"),
        "reason": obs.reason, "message": obs.message, "backend_ref": rec.get("backend_ref"),
        "pods": obs.pods, "exit_code": obs.exit_code, "pod_attempts": obs.pod_attempts,
        "saved_logs": str(logs_file) if logs_file.exists() else None,
    }
    if obs.state == "UNKNOWN" and rec["state"] in states.TERMINAL:
        result["message"] = f"{obs.message}; the record is terminal ({rec['state']}) and stays the source of truth"
    if saved:
        result["saved_logs"] = saved
    return result


def status(job_ids: list[str] | None = None) -> list[dict]:
    """Status of the given records, or of every active kubernetes record (a sweep)."""
    recs = platform.select(PLATFORM, job_ids, "status")
    return status_records(recs) if recs else []


# -- logs ----------------------------------------------------------------------

def _live_pods(kube: Kubectl, rec: dict) -> list[dict]:
    """The job's pods (only those owned by the recorded Job UID)."""
    uid = (rec.get("backend") or {}).get("uid")
    return [p for p in kube.items("pods", "-l", f"{JOB_LABEL}={rec['id']}", what="kubectl get pods")
            if not uid or any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]


def read_logs(rec: dict, *, tail: int | None = None) -> tuple[str, str]:
    """(text, source): the pods' logs ("live") or, once the pods are gone, the copy saved at the end ("saved")."""
    kube = Kubectl.for_record(rec)
    tail = tail if tail is not None else int(pins.resolve("kubernetes.logs_tail"))
    pods = _live_pods(kube, rec)
    if pods:
        return format_logs(kube, pods, tail), "live"
    saved = records.artifact_dir(rec["id"]) / "logs.txt"
    if saved.exists():
        lines = (fsio.read_regular(saved, "saved logs", follow_links=False) or b"").decode(
            "utf-8", "replace").splitlines(keepends=True)
        return "".join(lines[-tail:]), "saved"
    kept = volume_logs(kube, rec, tail)
    if kept:
        return kept, "volume"
    raise TaoError(f"job {rec['id']} has no pods (not started, or deleted by TTL), no saved logs and no output "
                   "copy on a results volume")


#: Prints the last N lines of every <pod>.log the job kept in its results folder.
_READ_LOGS = ('for f in "$1"/*.log; do [ -f "$f" ] || continue; echo "==> ${f##*/} <=="; tail -n "$2" "$f"; done')


def volume_logs(kube: Kubectl, rec: dict, tail: int) -> str | None:
    """The output copy the job appended to ``<results folder>/logs`` (read by a short helper Job), or None."""
    from . import volume_job

    path = records.artifact_dir(rec["id"]) / SPEC_FILE
    if not path.is_file():
        return None
    spec = safeparse.json_value(fsio.read_regular(path, "saved job spec", follow_links=False) or b"", f"saved job spec {path}")
    if not isinstance(spec, dict):
        return None
    if spec.get("storage_tier", "A") != "A" or not spec.get("log_copy", True):
        return None
    folder = resultsmod.plan(spec).for_job(rec["id"]).pod_folder
    if not folder:
        return None
    _, text = volume_job.run(kube, spec, ["/bin/sh", "-c", _READ_LOGS, "tao-logs", f"{folder}/{render.LOG_COPY_DIR}",
                                          str(tail)], purpose="reading the logs kept on the results volume")
    return text or None


def follow_logs(rec: dict, *, tail: int | None = None) -> int:
    """Stream every pod's output (rank-prefixed) to stdout until the pods end; kubectl's exit code."""
    kube = Kubectl.for_record(rec)
    tail = tail if tail is not None else int(pins.resolve("kubernetes.logs_tail"))
    pods = _live_pods(kube, rec)
    if not pods:
        text, _ = read_logs(rec, tail=tail)
        import sys

        sys.stdout.write(text)
        return 0
    nodes = int((rec.get("backend") or {}).get("nodes") or len(pods))
    return kube.stream("logs", "-l", f"{JOB_LABEL}={rec['id']}", "--follow", "--prefix", "--all-containers=true",
                       f"--tail={tail}", f"--max-log-requests={max(2 * nodes + 2, 5)}")


# -- credentials of finished jobs -----------------------------------------------

def credential_secrets(rec: dict) -> list[str]:
    """The names of the credential Secrets submit made for the record's Job (``backend.owned``)."""
    owned = str((rec.get("backend") or {}).get("owned") or "")
    return [item.split("/", 1)[1] for item in owned.split(",") if item.startswith("secret/")]


def delete_credentials(kube: Kubectl, uids: list[str]) -> list[str]:
    """Delete the Secrets made for the Jobs with these UIDs, in one call; the names deleted.

    The selector is the owner-UID label submit puts on them, so a Secret of the same name made for
    another Job (or by someone else) is never touched.
    """
    selector = f"{OWNER_UID_LABEL} in ({','.join(sorted(set(uids)))})"
    res = kube.run("delete", "secret", "-l", selector, "--ignore-not-found", "--wait=false", "-o", "name",
                   what="kubectl delete secret")
    return [line.strip().split("/", 1)[-1] for line in res.stdout.splitlines() if line.strip()]


def _kept_note(exc: Exception) -> str:
    return (f"its credential Secrets were not deleted now ({exc}): the garbage collector removes them with the "
            "Job at its TTL")


def remove_credentials(rec: dict) -> str | None:
    """``cancel`` of a job that already finished: delete its credential Secrets (status does it when it sees
    the end; this covers a job nobody polled). The note for the cancel line, or None (nothing held)."""
    uid = (rec.get("backend") or {}).get("uid")
    if rec["state"] == "CANCELED" or not uid or not credential_secrets(rec):
        return None  # a canceled Job was deleted: the garbage collector took its Secrets with it
    return _credentials_note(Kubectl.for_record(rec), uid)


def _credentials_note(kube: Kubectl, uid: str) -> str:
    try:
        gone = delete_credentials(kube, [uid])
    except TaoError as exc:
        return _kept_note(exc)
    return f"deleted its credential Secret(s) {', '.join(gone)}" if gone else "its credential Secrets are gone already"


# -- cancel --------------------------------------------------------------------

def delete_options(uid: str, propagation: str = "Foreground") -> dict:
    """DeleteOptions for cancel: foreground (pods go before the Job) and only the Job with this UID."""
    return {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation,
            "preconditions": {"uid": uid}}


def cancel(job_id: str) -> dict:
    """Delete the recorded Job (only if its UID matches), its Secrets/Service/ConfigMap; mark CANCELED."""
    rec = platform.load_for(job_id, PLATFORM, "cancel")
    if rec["state"] in states.TERMINAL:
        return {"id": job_id, "state": rec["state"], "deleted": False,
                "message": f"already {rec['state']}: nothing to cancel"}
    kube = Kubectl.for_record(rec)  # checks every backend value before it reaches kubectl
    b = rec.get("backend") or {}
    name, uid = b.get("name"), b.get("uid")
    if not rec.get("backend_ref") or not uid:
        # an interrupted submit may have created its Secret and even its Job before binding the record:
        # find them by the job-id label (the id is random, so the label is ours)
        found = _find_jobs(kube, job_id)
        if not found:
            kube.run("delete", "secret,service,configmap", "-l", f"{JOB_LABEL}={job_id}", "--ignore-not-found",
                     "--wait=false", what="kubectl delete secret,service,configmap")
            rec = records.mark(job_id, "CANCELED", message="canceled before launch")
            return {"id": job_id, "state": "CANCELED", "deleted": False, "message": "never launched: record canceled"}
        name, uid = found[0]["metadata"]["name"], found[0]["metadata"]["uid"]
    job = kube.json("get", "job", name, "--ignore-not-found", what="kubectl get job")
    if not job or job["metadata"].get("uid") != uid:
        other = " (a Job with that name but another UID exists and was left alone)" if job else ""
        rec = records.mark(job_id, "CANCELED", message=f"the Job was already gone{other}")
        return {"id": job_id, "state": "CANCELED", "deleted": False, "message": f"Job {name} already deleted{other}"}
    pods = smap.pods_of(job, kube.items("pods", "-l", f"{JOB_LABEL}={job_id}"))
    obs = smap.observe(job, pods)
    if obs.state in ("COMPLETE", "ERROR"):
        save_final_logs(kube, rec, pods)
        rec = records.mark(job_id, obs.state, message=obs.message, err_class=obs.err_class)
        note = _credentials_note(kube, uid) if credential_secrets(rec) else None
        return {"id": job_id, "state": obs.state, "deleted": False,
                "message": f"already finished ({obs.state}): nothing to cancel" + (f"; {note}" if note else "")}
    save_final_logs(kube, rec, pods)
    # Server-side precondition: the API deletes only the object with this UID,
    # so a Job re-created under the same name between our read and the delete is safe.
    body = json.dumps(delete_options(uid))
    res = kube.run("delete", "--raw", f"/apis/batch/v1/namespaces/{kube.namespace}/jobs/{name}", "-f", "-",
                   stdin=body, check=False, what="kubectl delete job")
    if not res.ok:
        text = res.stderr + res.stdout
        if "Precondition failed" in text or "Conflict" in text or "UID in precondition" in text:
            rec = records.mark(job_id, "CANCELED", message="the Job was replaced by another with the same name; left alone")
            return {"id": job_id, "state": "CANCELED", "deleted": False,
                    "message": f"Job {name} now has another UID: not deleted"}
        if "NotFound" not in text and "not found" not in text:
            raise TaoError(f"deleting Job {name} failed: {text.strip().splitlines()[-1] if text.strip() else 'no output'}")
    # the Job is gone: the record says so first, whatever happens to the cleanup below
    rec = records.mark(job_id, "CANCELED", message="canceled by the agent (Job deleted, foreground)")
    message = f"Job {kube.namespace}/{name} deleted"
    try:
        kube.run("delete", "secret,service,configmap", "-l", f"{JOB_LABEL}={job_id}", "--ignore-not-found",
                 "--wait=false", what="kubectl delete secret,service,configmap")
    except TaoError as exc:  # owned by the Job, so the garbage collector removes them anyway
        message += (f"; its Secret/Service/ConfigMap were not deleted now ({exc}): the garbage collector removes "
                    f"them with the Job, or run kubectl delete secret,service,configmap -l {JOB_LABEL}={job_id}")
    return {"id": job_id, "state": "CANCELED", "deleted": True, "message": message}

