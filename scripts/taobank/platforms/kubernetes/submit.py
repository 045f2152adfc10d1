"""submit on Kubernetes: the hooks the core's submit runs (plan, check, launch, adopt) and the dry run.

plan renders the manifests once, with the job's final id and names, before any
cluster call (a bad spec costs nothing). check reads the cluster in as few
calls as it can: Kueue's queues, nodes and pods in one read (the namespace's
default queue, else the GPU capacity; a named queue: the queues alone), then one server
dry-run of the manifests, which also answers RBAC for what it creates and
whether the server keeps podFailurePolicy; the server version only for
multi-node, ``can-i`` only for what the dry run does not create (Secrets,
the input check's pod reads), then the job's input paths. A refusal leaves
no record. A plain single-node submit costs 3 kubectl calls with its create.
launch creates the Job first,
then its Secrets (on stdin), Service and ConfigMap already owned by it, so the
garbage collector removes them with the Job. A sweep is ONE Indexed Job
(:mod:`taobank.platforms.kubernetes.sweep`) created suspended, which is its server check
(no dry run), then what it owns (its trial table, at most one credential and
one pull Secret for all its trials) and the Job released in ONE server-side
apply: 3 kubectl calls for any N, like a single job.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from ... import envfile, names, pins, redact
from ...spec import GENERIC
from ...contract import UNSET, Batch, Facts, Gate, Launch, Plan, SubmitOptions
from ...errors import TaoError
from .spec import KubernetesSpec
from ...jobspec import given
from ...run import Result, last_line
from . import JOB_LABEL, OWNER_UID_LABEL, SPEC_FILE, SWEEP_LABEL, gates, render
from .objects import delete_options, find_jobs
from .kubectl import KubeFacts, Kubectl, cluster_json, json_objects
from ...records import Record

@dataclass
class KubePlan(Plan):
    """A Kubernetes submit's decisions: where, with which credentials, and the manifests (rendered once)."""

    spec: KubernetesSpec
    kube: Kubectl | None = None
    objs: list[dict] = field(default_factory=list)
    creds: dict = field(default_factory=dict)
    ngc_key: str | None = None
    config: dict | None = None
    pod_folder: str | None = None
    require_free: bool = False
    #: a sweep (on its first plan): the Indexed Job and its trial table, built and checked before any record
    sweep_objs: list[dict] = field(default_factory=list)


@dataclass
class JobFacts(Facts):
    """What the record keeps of a created (or adopted) Job: where it is, its UID and what it owns."""

    uid: str | None
    namespace: str
    name: str | None
    #: the kubeconfig context ("" for the current one)
    context: str
    #: what the Job owns, ``kind/name`` comma-separated (deleted with it)
    owned: str
    #: pods that run at once (the Job's parallelism)
    nodes: int
    #: a sweep's trial: its completion index in the sweep's Indexed Job
    index: int = UNSET


def target(opts: SubmitOptions, rec: Record | None) -> Kubectl:
    """Where to submit: the record's own namespace/context when finishing one (an explicit other one is
    refused, so its Job is found there, never created twice), else the flags or the environment."""
    if rec is not None and KubeFacts.of(rec).namespace:
        mine = Kubectl.for_record(rec)
        if (opts.namespace or opts.context) and (Kubectl(opts.namespace, opts.context).namespace, opts.context or None) \
                != (mine.namespace, mine.context or None):
            raise TaoError(f"record {rec.id} was submitted to namespace {mine.namespace} (context "
                           f"{mine.context or 'the current one'}): resume it without --namespace/--context, so "
                           "its Job is found there, never created twice")
        return mine
    return Kubectl(opts.namespace, opts.context)


# ------------------------------------------------------------ the per-job credentials
# Values from this process's environment (names given) or a mode-600 env-file, sent on stdin only; deleted
# when the job ends (:mod:`taobank.platforms.kubernetes.credentials`), or by the garbage collector with the Job.
def read_secrets_file(path: str) -> dict[str, str]:
    """KEY=VALUE lines from a file only its owner can read (mode 600 or stricter)."""
    return envfile.read(path, what="secrets file", private=True)


def collect_credentials(secret_env: list[str] | tuple[str, ...] = (), secrets_file: str | None = None) -> dict[str, str]:
    """Secret values from this process's environment (names given) and/or a mode-600 env-file."""
    creds = read_secrets_file(secrets_file) if secrets_file else {}
    return {**creds, **_from_env(secret_env)}


def _from_env(secret_env: list[str] | tuple[str, ...]) -> dict[str, str]:
    if not secret_env:  # no name to read
        return {}
    return envfile.secret_values(secret_env, os.environ, what="--secret-env name",
                                 unset="--secret-env {name}: {name} is not set in the environment: export it first")


def credential_names(secret_env: list[str] | tuple[str, ...] = (), secrets_file: str | None = None) -> list[str]:
    """The names submit puts in the per-job Secret, checked as submit checks them, for a dry run: each
    --secret-env variable must be set and the file private and well formed; no value is kept or shown."""
    found = list(read_secrets_file(secrets_file)) if secrets_file else []  # the keys only
    return list(dict.fromkeys(found + list(_from_env(secret_env))))


def check_ngc_key() -> None:
    """--ngc-pull-secret needs NGC_KEY set (a dry run checks only that)."""
    if not os.environ.get("NGC_KEY"):
        raise TaoError("--ngc-pull-secret needs NGC_KEY in the environment: export NGC_KEY first")


def create_secret(kube: Kubectl, obj: dict) -> None:
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


def plan(spec: KubernetesSpec, opts: SubmitOptions, rec: Record | None) -> KubePlan:
    """Credentials read, names chosen, manifests rendered: no cluster call yet (the secret lint is check's and
    adopt's, first thing: once per sweep, over what it sends)."""
    kube = target(opts, rec)
    arch, action = spec.network_arch or GENERIC["network_arch"], spec.action or GENERIC["action"]
    jid = rec.id if rec is not None else names.mint_job_id(arch, action)
    creds = collect_credentials(opts.secret_env, opts.secrets_file)
    ngc_key = None
    if opts.ngc_pull_secret:
        check_ngc_key()
        ngc_key = os.environ.get("NGC_KEY")
    config = dict(opts.config) if opts.config is not None else None
    objs, results = render.render_job(spec, job_id=jid, namespace=kube.namespace, name=render.job_name_for(jid),
                                   cred_secret=render.cred_secret_name(jid) if creds else None,
                                   pull_secrets=[render.pull_secret_name(jid)] if ngc_key else [], config=config)
    return KubePlan(spec=spec, image=str(spec.image), network_arch=arch, action=action,
                    storage_tier=spec.storage_tier or "A", results_dir=results.folder,
                    nodes=int(spec.nodes or 1), job_id=jid,
                    backend={"namespace": kube.namespace, "context": kube.context or ""},
                    kube=kube, objs=objs, creds=creds, ngc_key=ngc_key, config=config,
                    pod_folder=results.for_job(jid).pod_folder, require_free=opts.require_free,
                    # the spec (secret-free: linted) stays with the record: logs reads the volume copy through it
                    kept={SPEC_FILE: json.dumps(spec.to_dict(), sort_keys=True) + "\n"})


def check(plans: list[KubePlan], gate: Gate, batch: Batch) -> None:
    """The read-only checks, cheapest first; the server's dry-run verdict on the very manifests launched (a
    sweep: its suspended Job's create, :func:`launch_sweep`). The jobs of one launch (a sweep's trials) differ
    only in their overrides: the first one is checked for all."""
    p = plans[0]
    kube = p.kube
    assert kube is not None
    if batch.sweep:  # the secret lint once over what is sent: the Indexed Job and every trial's argv in its table
        from . import sweep as sweepmod

        refuse_batch(p)
        p.sweep_objs = sweepmod.build([q.spec for q in plans], [str(q.job_id) for q in plans], batch.sweep,
                                      kube.namespace, batch.max_concurrent, creds=bool(p.creds), ngc=bool(p.ngc_key),
                                      search=batch.search)
        _lint([o for o in p.sweep_objs if "binaryData" not in o], "the sweep")
        if batch.search is not None:  # each trial's record names the study's folder (status, sweep best read it)
            folder = sweepmod.search_folder([q.spec for q in plans], [str(q.job_id) for q in plans], batch.sweep)
            for q in plans:
                q.backend["search_dir"] = folder
    else:
        for q in plans:
            _lint(q.objs, "the job spec")
    # GPUs admitted at once: all the pods' (a sweep's: one trial's, with partial admission)
    queue, cluster_queue, lines = gates.queue_or_capacity(
        kube, p.spec, capacity=lambda read: capacity_gate(kube, p.spec, require_free=p.require_free, read=read))
    gate.lines += lines
    if queue:  # Kueue admits it against the queue's quota: the node capacity gate stepped aside
        gate.backend.update({"queue": queue, "cluster_queue": cluster_queue})
        for q in plans:
            q.objs = gates.label_jobs(q.objs, queue)
        p.sweep_objs = gates.label_jobs(p.sweep_objs, queue, partial=True)
    if p.nodes > 1:
        multinode_version_gate(kube)
    input_paths = gates.input_paths(p.spec, p.pod_folder).all if p.spec.check_inputs is not False else []
    site_pod = batch.search is not None and not gate.dry_run  # a search's site check reads its pod's output too
    permission_gate(kube, needed_permissions(creds=bool(p.creds or p.ngc_key), inputs=bool(input_paths) or site_pod))
    # a sweep's Job is created suspended: that create is its server check (launch_sweep), one call less; a dry
    # run creates nothing, so the server's dry run of that same create stands in for it
    if batch.sweep and gate.dry_run:
        _sweep_server_check(kube, p.sweep_objs)
    retry = True if batch.sweep else _server_check(kube, p.objs)
    if not retry:
        for plan in plans:
            plan.objs = render.without_disruption_retry(plan.objs)
    gate.lines.append(retry_line(retry, p.nodes, _job(p.objs)["spec"].get("backoffLimit", 0)))
    if batch.sweep:
        gate.lines.append(f"one Indexed Job runs the {len(plans)} trials, at most {batch.max_concurrent} at once, "
                          "with nobody polling")
    if input_paths:  # test -e next to the volumes, before a record or a GPU
        gate.lines.append(gates.check_inputs(kube, p.spec, p.pod_folder))
    if batch.search is not None and batch.sweep:  # the search's site, where its trials will run (a pod: not a dry run's)
        folder = sweepmod.search_folder([q.spec for q in plans], [str(q.job_id) for q in plans], batch.sweep)
        if gate.dry_run:
            gate.lines.append("search site: checked at submit by a pod of the trials' image (a dry run makes none)")
        elif p.ngc_key:  # the pull secret the submit creates does not exist yet: a check pod would wait, pulling
            gate.lines.append("warning: search site not checked: the trials' image is pulled with the NGC pull "
                              "secret this submit creates, which no pod can use before it; a trial whose image "
                              "has no python3 3.10+ with numpy, or whose volume's lock fails, ends with one line "
                              "in its log saying so")
        else:
            gate.lines.append(sweepmod.check_search_site(kube, p.spec, folder, batch.search))


def refuse_batch(p: KubePlan) -> None:
    """What a sweep's one Indexed Job cannot run, refused before any record opens: a multi-node trial needs
    an Indexed Job (and a Service) of its own, and an action-request config is one file per job."""
    if p.nodes > 1:
        raise TaoError("a sweep on Kubernetes runs single-node trials (the sweep is one Indexed Job, one pod per "
                       "trial): submit multi-node trials one by one, or run the sweep on SLURM")
    if p.config is not None:
        raise TaoError("a sweep on Kubernetes takes no action-request config: submit --request trials one by one")


def launch(plans: list[KubePlan], recs: list[Record], batch: Batch) -> list[Launch]:
    """One Job created, then what it owns (Secrets on stdin, Service, ConfigMap) created owned by it, so the
    garbage collector removes them with it; a sweep: its one Indexed Job (:func:`launch_sweep`). A failure
    deletes what was made."""
    kube = plans[0].kube
    assert kube is not None
    if batch.sweep:
        return launch_sweep(kube, plans, recs, batch)
    jobs = [_job(p.objs) for p in plans]
    made: list[dict] = []
    try:
        # the Jobs first: each one's UID owns everything else, which is then created owned (create is the only verb)
        made = kube.apply(jobs, create=True)
        by_name = {(o.get("metadata") or {}).get("name"): o for o in made}
        return [launched(kube, server, _create_owned(kube, p, rec.id, server), reconciled=False)
                for p, rec, job in zip(plans, recs, jobs) for server in [by_name.get(job["metadata"]["name"]) or job]]
    except TaoError as exc:
        raise TaoError(f"{exc}{_undo(kube, made, batch)}") from None


def preview_sweep(specs: list[KubernetesSpec], ids: list[str], batch: Batch, *, namespace: str,
                  secret_env: list[str] | tuple[str, ...] = (), secrets_file: str | None = None,
                  ngc_pull_secret: bool = False, config: dict | None = None) -> tuple[list[dict], list[str]]:
    """What a sweep's launch creates, contacting nothing: its one Indexed Job and trial table as :func:`check`
    builds them and the Secrets it would own, values masked (none is read), refused as :func:`check` refuses the
    batch; and each trial's results folder."""
    from . import sweep as sweepmod

    spec = specs[0]
    names_only = dict.fromkeys(credential_names(secret_env, secrets_file), "")
    refuse_batch(KubePlan(spec=spec, image=given(spec.image, ""), network_arch="", action="",
                          storage_tier=given(spec.storage_tier, "A"), results_dir="", nodes=int(given(spec.nodes, 1)),
                          creds=names_only, ngc_key="<masked>" if ngc_pull_secret else None, config=config))
    assert batch.sweep
    sweep = batch.sweep
    objs = sweepmod.build(specs, ids, sweep, namespace, batch.max_concurrent, creds=bool(names_only),
                          ngc=ngc_pull_secret, search=batch.search)
    for o in objs:  # a search's bundle: its bytes are not shown
        if "binaryData" in o:
            o["binaryData"] = {k: f"<{len(v) * 3 // 4} bytes>" for k, v in o["binaryData"].items()}
    if names_only:  # the sweep's one Secret of each kind, its values masked
        objs.append(render.masked(render.secret_object(render.cred_secret_name(sweep), namespace, sweep,
                                                                 names_only)))
    if ngc_pull_secret:
        objs.append(render.masked(render.pull_secret_object(render.pull_secret_name(sweep), namespace,
                                                                      sweep, "")))
    folders = [render.results_plan(s, staging=render.staging_dir(s)).for_job(jid).folder for s, jid in zip(specs, ids)]
    return objs, folders


#: The field manager of the sweep's server-side apply (its trial table, its Secrets, its Job released).
FIELD_MANAGER = "tao-skill-bank"
#: Kueue's queue label: a Job that carries it is released by Kueue when admitted, never by the submit.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def launch_sweep(kube: Kubectl, plans: list[KubePlan], recs: list[Record], batch: Batch) -> list[Launch]:
    """The sweep's Indexed Job created SUSPENDED in ONE create: the server's check of it (a refusal makes nothing;
    a server that drops the per-trial retry fields gets it deleted). Then ONE server-side apply of what it owns,
    owned by its UID (its trial table and Secrets, their values on stdin, never printed back), and of the Job
    released last: no trial's pod starts before its table and Secrets exist. Each trial's launch names its
    completion index. A failure deletes the Job (what it owns goes with it)."""
    p = plans[0]
    job, table = render.find(p.sweep_objs, "Job"), render.find(p.sweep_objs, "ConfigMap")
    assert job is not None and table is not None and batch.sweep
    tables = [o for o in p.sweep_objs if o.get("kind") == "ConfigMap"]  # the trial table; a search's bundle
    sweep = batch.sweep
    held = {**job, "spec": {**job["spec"], "suspend": True}}
    made: list[dict] = []
    try:
        res = kube.run("create", "-f", "-", "-o", "json", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                           "items": [held]}),
                       check=False, what="kubectl create (the sweep's Indexed Job, suspended)")
        if not res.ok:
            refused = _refusal(kube, res, "kubectl create (the sweep's Indexed Job)")
            if "Error from server" in (res.stderr or ""):  # the server said no: nothing was made
                raise refused
            raise TaoError(f"{refused}{_undo(kube, made, batch)}")
        made = json_objects(res.stdout)
        server = made[0] if made else held
        _check_sweep_job(job, server)
        owned = [owned_by(t, server) for t in tables]
        if p.creds:
            owned.append(owned_by(render.secret_object(render.cred_secret_name(sweep), kube.namespace, sweep,
                                                            p.creds), server))
        if p.ngc_key:
            owned.append(owned_by(render.pull_secret_object(render.pull_secret_name(sweep), kube.namespace,
                                                                 sweep, p.ngc_key), server))
        release = [] if QUEUE_LABEL in (job["metadata"].get("labels") or {}) else \
            [{**job, "spec": {**job["spec"], "suspend": False}}]
        # server-side apply: creates the owned objects (no last-applied annotation: a Secret's value stays out of
        # its metadata) and takes the Job's suspend over from the create (--force-conflicts); the Job comes last
        kube.run("apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}", "-f", "-", "-o",
                 "name", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": owned + release}),
                 what="kubectl apply --server-side (the sweep's trial table and Secrets; its Job released)")
    except TaoError as exc:
        if not made:
            raise
        raise TaoError(f"{exc}{_undo(kube, made, batch)}") from None
    names_owned = [(o["kind"].lower(), o["metadata"]["name"]) for o in owned]
    out = []
    for i, rec in enumerate(recs):
        one = launched(kube, server, names_owned, reconciled=False)
        one.backend_ref = f"{one.backend_ref}#{i}"
        assert isinstance(one.backend, JobFacts)
        one.backend.index, one.backend.nodes = i, 1
        one.message = (f"trial {i} of Indexed Job {kube.namespace}/{server['metadata']['name']} (runs when one of "
                       f"its {batch.max_concurrent} slots is free)")
        out.append(one)
    return out


def _check_sweep_job(sent: dict, kept: dict) -> None:
    """What the server must keep of a sweep's Job for its trials to fail one by one (its create is the check)."""
    spec = kept.get("spec") or {}
    if "backoffLimitPerIndex" in sent["spec"] and "backoffLimitPerIndex" not in spec:
        raise TaoError("this cluster drops a Job's backoffLimitPerIndex (Kubernetes before 1.29, or the "
                       "JobBackoffLimitPerIndex feature off), so its trials cannot fail one by one: submit them one "
                       "by one, or upgrade")
    if "podFailurePolicy" in sent["spec"] and "podFailurePolicy" not in spec:
        raise TaoError("this cluster does not keep a Job's podFailurePolicy (Kubernetes before "
                       f"{pins.resolve('kubernetes.min_version_pod_failure_policy')}, or the feature off), so one "
                       "trial's failure would end the sweep: submit the trials one by one, or upgrade")


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


def _create_owned(kube: Kubectl, p: KubePlan, jid: str, job: dict) -> list[tuple[str, str]]:
    """The objects a Job owns (its Secrets, Service, ConfigMap), created owned by it; (kind, name) of each."""
    owned: list[tuple[str, str]] = []
    if p.creds:
        cred_name = render.cred_secret_name(jid)
        create_secret(kube, owned_by(render.secret_object(cred_name, kube.namespace, jid, p.creds),
                                                 job))
        owned.append(("secret", cred_name))
    if p.ngc_key:
        pull_name = render.pull_secret_name(jid)
        create_secret(kube, owned_by(render.pull_secret_object(
            pull_name, kube.namespace, jid, p.ngc_key or ""), job))
        owned.append(("secret", pull_name))
    rest = [owned_by(o, job) for o in p.objs if o.get("kind") in ("Service", "ConfigMap")]
    made = kube.apply(rest, create=True) if rest else []
    owned += [(o["kind"].lower(), o["metadata"]["name"]) for o in made]
    if p.config:
        _verify_config(made)
    return owned


def _undo(kube: Kubectl, made: list[dict], batch: Batch) -> str:
    """Delete the Jobs a failed launch made (what they own goes with them); a note when that failed too.
    A sweep's by its label (a create that failed half-way made some), one Job by its UID."""
    if batch.sweep:
        res = kube.run("delete", "jobs", "-l", f"{SWEEP_LABEL}={batch.sweep}", "--cascade=background",
                       "--ignore-not-found", check=False, what="kubectl delete jobs (failed sweep)")
        return "" if res.ok else (f"; could not delete its Jobs ({last_line(res.stderr)}): kubectl delete jobs -l "
                                  f"{SWEEP_LABEL}={batch.sweep}")
    failed = []
    for job in made:
        uid, name = (job.get("metadata") or {}).get("uid"), (job.get("metadata") or {}).get("name")
        if uid:
            res = kube.run("delete", "--raw", f"/apis/batch/v1/namespaces/{kube.namespace}/jobs/{name}", "-f", "-",
                           stdin=json.dumps(delete_options(uid, "Background")), check=False)
            if not res.ok:
                failed.append(name)
    if failed:
        return f"; could not delete its Job ({last_line(res.stderr)}): kubectl delete job {failed[0]}"
    return "; the Job it made was deleted (what it owns goes with it)" if made else ""


def launched(kube: Kubectl, job: dict, owned: list[tuple[str, str]], *, reconciled: bool,
             error: str | None = None) -> Launch:
    """What the record keeps of a created (or adopted) Job."""
    meta = job.get("metadata") or {}
    ref = f"{kube.namespace}/{meta.get('name')}"
    backend = JobFacts(uid=meta.get("uid"), namespace=kube.namespace, name=meta.get("name"),
                       context=kube.context or "", owned=",".join(f"{k}/{n}" for k, n in owned),
                       nodes=(job.get("spec") or {}).get("parallelism") or 1)
    return Launch(ref, backend, "reconciled with the existing Job" if reconciled else "Job created",
                  details={"uid": meta.get("uid"), "reconciled": reconciled, "namespace": kube.namespace,
                           "context": kube.context, "name": meta.get("name")}, error=error)


def adopt(p: KubePlan, rec: Record, gate: Gate) -> Launch | None:
    """A record being finished whose Job exists (found by its job-id label): adopt it, never create twice."""
    assert p.kube is not None
    _lint(p.objs, "the job spec")
    existing = find_jobs(p.kube, rec.id)
    return _adopt(p.kube, rec, existing[0], p.spec, p.creds, p.ngc_key, p.config, gate) if existing else None


def _forbidden(exc: TaoError) -> bool:
    return "forbidden" in str(exc).lower()


def capacity_gate(kube: Kubectl, spec: KubernetesSpec, *, require_free: bool = False,
                  read: list[dict] | None = None) -> str:
    """Allocatable and free GPUs on schedulable nodes (see :mod:`gates`); returns the figures line.
    Nodes and every namespace's pods come in ONE read (finished pods too: a field selector would refuse
    nodes; they count for nothing), or are ``read`` already (the gates' one read, :func:`gates.queue_or_capacity`);
    a user who may not read one of them gets the narrower reads below.
    Without permission to list nodes the gate cannot judge: it says so and lets the submit go on."""
    gpus, nodes = int(1 if spec.gpus is None else spec.gpus), int(spec.nodes or 1)
    try:
        both = read if read is not None else kube.items("nodes,pods", "--all-namespaces",
                                                        what="kubectl get nodes,pods --all-namespaces")
    except TaoError as exc:
        if not _forbidden(exc):
            raise
        return _capacity_gate_narrow(kube, spec, require_free)
    node_items = [o for o in both if o.get("kind") == "Node"]
    pods = [o for o in both if o.get("kind") == "Pod"]
    figures = gates.node_gpus(node_items, pods, node_selector=spec.node_selector,
                              tolerations=spec.tolerations)
    return gates.check_capacity(figures, gpus, nodes, require_free=require_free)


def _capacity_gate_narrow(kube: Kubectl, spec: KubernetesSpec, require_free: bool) -> str:
    """The capacity gate for a user without cluster-wide reads: nodes alone, then pods as widely as allowed."""
    gpus, nodes = int(1 if spec.gpus is None else spec.gpus), int(spec.nodes or 1)
    try:
        node_items = kube.items("nodes", what="kubectl get nodes")
    except TaoError as exc:
        if not _forbidden(exc):
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
        pods = cluster_json(res.stdout).get("items") or []
    else:  # no cluster-wide pod read (RBAC): count what this namespace uses, and say so
        res = kube.run("get", "pods", "-o", "json", "--field-selector=status.phase!=Succeeded,status.phase!=Failed",
                       check=False, what="kubectl get pods")
        pods = cluster_json(res.stdout).get("items") or [] if res.ok else []
        where = f"outside namespace {kube.namespace}" if res.ok else "in any namespace"
        note = f" (pods {where} are not visible to you: their GPUs are not subtracted)"
    figures = gates.node_gpus(node_items, pods, node_selector=spec.node_selector,
                              tolerations=spec.tolerations)
    return gates.check_capacity(figures, gpus, nodes, require_free=require_free) + note


def multinode_version_gate(kube: Kubectl) -> None:
    """Multi-node needs ``min_version_multinode`` (the rank labels on pods): refused below it."""
    found = gates.server_version(kube.json("version", what="kubectl version"))
    gates.check_version(found, pins.resolve("kubernetes.min_version_multinode"))


def retry_line(retry: bool, nodes: int, limit: int) -> str:
    """The gate report's line on what a pod disruption does to this Job (``limit``: its rendered backoffLimit)."""
    if not retry:
        since = pins.resolve("kubernetes.min_version_pod_failure_policy")
        return (f"the server does not keep podFailurePolicy (Kubernetes before {since}, or its JobPodFailurePolicy "
                "feature off): no retry (backoffLimit 0)")
    if nodes > 1:
        return ("a pod disruption (drain, preemption, eviction) fails the multi-node Job at once (a replaced rank "
                "cannot rejoin the others), as does a non-zero exit")
    return f"pod disruptions (drain, preemption, eviction) retried up to {limit} times, a non-zero exit fails at once"


def needed_permissions(*, creds: bool, inputs: bool = False) -> list[tuple[str, str]]:
    """What submit does that its server dry run does not authorize: Secrets (created on their own, never
    dry-run with a value) and, with inputs to check, the reads of the check Job's pod and its output. The
    Job, Service and ConfigMap are in the dry run, whose Forbidden names them (:func:`_server_check`); a
    sweep's in its Job's create (:func:`launch_sweep`)."""
    return ([("create", "secrets")] if creds else []) + ([("list", "pods"), ("get", "pods/log")] if inputs else [])


def permission_gate(kube: Kubectl, wanted: list[tuple[str, str]]) -> None:
    """``kubectl auth can-i`` for each (verb, resource) submit will use; one line naming what is missing."""
    missing = [f"{verb} {r}" for verb, r in wanted if not kube.can_i(verb, r)]
    if missing:
        _refuse_permissions(kube, missing)


def _refuse_permissions(kube: Kubectl, missing: list[str]) -> None:
    raise TaoError(
        f"you may not {', '.join(missing)} in namespace {kube.namespace}"
        f"{' (context ' + kube.context + ')' if kube.context else ''}: ask for a Role that allows it or pick another namespace"
    )


def preview(spec: KubernetesSpec, *, namespace: str, job_id: str, secret_env: list[str] | tuple[str, ...] = (),
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
    secrets = [render.masked(render.secret_object(cred_name, namespace, job_id, dict.fromkeys(names, "")))] if cred_name else []
    if pull_name:
        secrets.append(render.masked(render.pull_secret_object(pull_name, namespace, job_id, "")))
    job = _job(objs)
    return [job, *secrets, *[o for o in objs if o is not job]]


def _lint(objs: list[dict], what: str) -> None:
    """The secret lint (redact_secrets.py rules) over the manifest text; the value is never echoed."""
    findings = redact.lint_objects(objs, what)
    if findings:
        raise TaoError(f"{what} holds what looks like a secret ({findings[0].rule} at manifest line "
                       f"{findings[0].line}): pass credentials with --secret-env/--secrets-file, never in env")


_CANNOT = re.compile(r'cannot (\w+) resource "([\w./-]+)"')
#: What a server (or kubectl's schema check) from before podFailurePolicy says of the field.
_UNKNOWN_POLICY = re.compile(r'unknown field "(spec\.)?podFailurePolicy"')


def _dry_run(kube: Kubectl, objs: list[dict]) -> tuple[list[dict] | None, Result]:
    """The server's objects (None when it refused them) and the whole answer (one stderr line per object)."""
    res = kube.dry_run(objs)
    return (json_objects(res.stdout) if res.ok else None), res


def _job(objs: list[dict]) -> dict:
    """The Job of rendered manifests (every render makes one)."""
    job = next((o for o in objs if o.get("kind") == "Job"), None)
    assert job is not None
    return job


def _server_check(kube: Kubectl, objs: list[dict]) -> bool:
    """Server dry-run of the manifests launched: a missing namespace, a field the API rejects or a create
    RBAC forbids is refused before the record opens (nothing to clean up, no ERROR record for a typo).
    Returns whether the server keeps the Job's podFailurePolicy: a server that has it switched off drops
    it, one from before it rejects it as an unknown field; the Job then goes without (backoffLimit 0)."""
    wants = "podFailurePolicy" in _job(objs)["spec"]
    made, res = _dry_run(kube, objs)
    if made is None and wants and _UNKNOWN_POLICY.search(res.stderr):
        wants = False
        made, res = _dry_run(kube, render.without_disruption_retry(objs))
    if made is None:
        raise _refusal(kube, res, "kubectl create --dry-run=server")
    kept = next((o for o in made if o.get("kind") == "Job"), {})
    return wants and "podFailurePolicy" in (kept.get("spec") or {})


def _sweep_server_check(kube: Kubectl, objs: list[dict]) -> None:
    """A sweep's dry run: the server's dry run of the create :func:`launch_sweep` makes (its Indexed Job,
    suspended), refused as that create is refused (a missing namespace, a field the API rejects, what RBAC forbids,
    a server that drops the per-trial retry fields), so a sweep whose dry run passes is not refused there."""
    job = render.find(objs, "Job")
    assert job is not None
    held = {**job, "spec": {**job["spec"], "suspend": True}}
    made, res = _dry_run(kube, [held])
    if made is None:
        raise _refusal(kube, res, "kubectl create --dry-run=server (the sweep's Indexed Job)")
    _check_sweep_job(job, made[0] if made else held)


def _refusal(kube: Kubectl, res: Result, what: str) -> TaoError:
    """The one line for a create the server refused: a missing namespace, what RBAC forbids, else its last line."""
    text = res.stderr or res.stdout
    if f'namespaces "{kube.namespace}" not found' in text:
        where = f" in context {kube.context}" if kube.context else ""
        return TaoError(f"namespace {kube.namespace} does not exist{where}: set TAO_K8S_NAMESPACE (or --namespace) "
                        f"to an existing one, or ask for it to be created")
    denied = [f"{verb} {kind}" for verb, kind in _CANNOT.findall(text)]
    if denied:
        try:
            _refuse_permissions(kube, list(dict.fromkeys(denied)))
        except TaoError as exc:
            return exc
    return TaoError(f"{what} failed (exit {res.returncode}): {last_line(text)}")


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


def _adopt(kube: Kubectl, rec: Record, job: dict, spec: KubernetesSpec, creds: dict, ngc_key: str | None, config: dict | None,
           gate: Gate) -> Launch:
    """A resumed submit found its Job: create the owned objects it lacks (a submit that died between
    the Job and its Service/ConfigMap/Secrets); never create a second Job. The record is bound to it even
    when a Secret it needs cannot be made again (``Launch.error`` then says what to do)."""
    jid = rec.id
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
        create_secret(kube, owned_by(render.secret_object(cred_name, ns, jid, creds), job))
        existing["secret"].add(cred_name)
    if ngc_key:
        create_secret(kube, owned_by(render.pull_secret_object(pull_name, ns, jid, ngc_key), job))
        existing["secret"].add(pull_name)
    objs, results = render.render_job(spec, job_id=jid, namespace=ns, name=name,
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
    gate.lines.append("skipped: the Job already exists")
    if made:
        gate.lines.append("created what it lacked: " + ", ".join(f"{o['kind']} {o['metadata']['name']}" for o in made))
    lacking = sorted(wanted - existing["secret"])
    error = None
    if cred_name in lacking:
        error = (f"the Job's Secret {cred_name} is missing and its pods cannot start: resume again with the "
                 "same --secret-env/--secrets-file as the first submit")
    elif pull_name in lacking:
        error = (f"the Job's pull Secret {pull_name} is missing and its pods cannot start: export NGC_KEY and "
                 "resume again with --ngc-pull-secret")
    elif config is None and any(v.get("configMap") for v in ((job.get("spec") or {}).get("template") or {})
                                .get("spec", {}).get("volumes") or []) \
            and render.config_map_name(jid) not in existing["configmap"]:
        error = (f"the Job's ConfigMap {render.config_map_name(jid)} is missing and its pods cannot start: "
                 "resume again with the same config file as the first submit")
    return launched(kube, job, owned, reconciled=True, error=error)


def _verify_config(made: list[dict]) -> None:
    """Check the content hash of the ConfigMap the server stored (what the pod mounts is what was staged)."""
    cm = render.find(made, "ConfigMap")
    if not cm:
        return
    want = (cm["metadata"].get("annotations") or {}).get(render.CONFIG_SHA_ANNOTATION)
    got = [render.sha256_text(v) for v in (cm.get("data") or {}).values()]
    if want not in got:
        raise TaoError(f"ConfigMap {cm['metadata']['name']} content does not match sha256 {want}: re-submit")
