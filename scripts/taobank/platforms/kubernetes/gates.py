"""Read-only checks before a submit: GPU capacity (or the Kueue queue a job goes to), server version, RBAC,
the input paths on the job's volumes.

The capacity gate reads ``nvidia.com/gpu`` per node: allocatable, and free =
allocatable minus what non-terminal pods bound to the node request. Cordoned
and NotReady nodes, nodes whose taints the job does not tolerate and nodes
its nodeSelector does not match are not placement targets and do not count.
It refuses only a job that can never fit (no gang scheduling: fewer than
``nodes`` such nodes with ``gpus_per_node`` allocatable each would leave it,
or rank 0, waiting forever); a job that fits but finds the GPUs busy is
submitted and queues, and the gate says so with the per-node figures.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...errors import TaoError
from ... import fsio, records
from .spec import KubernetesSpec
from ...run import last_line
from ...text import one_line
from .kubectl import Kubectl, cluster_json
from ...tao_command import read_candidates, shell_words
from ...paths import is_under

GPU = "nvidia.com/gpu"
#: Why the multi-node version gate exists (stated in errors and the docs).
VERSION_REASON = (
    "rank labels on pods (batch.kubernetes.io/job-completion-index, PodIndexLabel) appear in 1.28; "
    "the bank reads them to tell ranks apart in status and logs (pod hostnames <job>-<index> "
    "themselves exist since 1.21, GA 1.24)"
)


@dataclass
class NodeGPUs:
    name: str
    allocatable: int
    used: int
    usable: bool
    why: str = ""

    @property
    def free(self) -> int:
        return max(self.allocatable - self.used, 0)


def _qty(value) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def pod_gpu_request(pod: dict) -> int:
    """Effective nvidia.com/gpu a pod holds: max(sum of containers, largest init container)."""
    spec = pod.get("spec") or {}

    def one(c: dict) -> int:
        res = c.get("resources") or {}
        req = (res.get("requests") or {}).get(GPU)
        return _qty(req if req is not None else (res.get("limits") or {}).get(GPU))

    main = sum(one(c) for c in spec.get("containers") or [])
    init = max((one(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def _tolerated(taint: dict, tolerations: list[dict]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol["key"] == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def untolerated_taints(node: dict, tolerations: list[dict] | None) -> list[dict]:
    """The node's scheduling taints (NoSchedule, NoExecute) that ``tolerations`` do not tolerate."""
    return [t for t in (node.get("spec") or {}).get("taints") or []
            if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(t, tolerations or [])]


def node_gpus(nodes: list[dict], pods: list[dict], *, node_selector: dict | None = None,
              tolerations: list[dict] | None = None) -> list[NodeGPUs]:
    """Per-node allocatable / used / usable figures from ``kubectl get nodes,pods -o json`` items."""
    used: dict[str, int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            used[node] = used.get(node, 0) + pod_gpu_request(pod)
    out = []
    for node in nodes:
        meta, spec, st = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
        name = meta.get("name", "?")
        why = ""
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
        if spec.get("unschedulable"):
            why = "cordoned"
        elif not ready:
            why = "NotReady"
        else:
            blocking = untolerated_taints(node, tolerations)
            if blocking:
                why = f"taint {blocking[0].get('key')}"
            elif node_selector and any((meta.get("labels") or {}).get(k) != v for k, v in node_selector.items()):
                why = "nodeSelector does not match"
        out.append(NodeGPUs(name, _qty((st.get("allocatable") or {}).get(GPU)), used.get(name, 0), not why, why))
    return out


def check_capacity(figures: list[NodeGPUs], gpus_per_node: int, nodes: int = 1, *, require_free: bool = False) -> str:
    """Refuse only what can never fit; say when the job will queue behind busy GPUs.

    Never fits (refused): fewer than ``nodes`` schedulable nodes whose *allocatable*
    GPUs reach ``gpus_per_node``. Fits but busy: the Job is submitted and waits
    in the queue (the returned line starts with ``queued:``), unless
    ``require_free`` asks for the free GPUs now. Returns the figures line.
    """
    usable = [n for n in figures if n.usable]
    free_total = sum(n.free for n in usable)
    detail = ", ".join(f"{n.name} {n.free}/{n.allocatable} free" + (f" ({n.why})" if n.why else "") for n in figures)
    summary = f"free/allocatable nvidia.com/gpu per node: [{detail or 'no nodes'}], free on schedulable nodes: {free_total}"
    if gpus_per_node == 0:
        return summary + " (0 GPUs requested: GPU scheduling not verified)"
    big_enough = [n for n in usable if n.allocatable >= gpus_per_node]
    free_now = [n for n in big_enough if n.free >= gpus_per_node]
    want = f"{nodes} node{'s' if nodes > 1 else ''} with {gpus_per_node} nvidia.com/gpu{' each' if nodes > 1 else ''}"
    if len(big_enough) < nodes:
        most = max((n.allocatable for n in usable), default=0)
        raise TaoError(
            f"insufficient GPUs, the job can never run here: need {want}; {len(big_enough)} schedulable node(s) "
            f"have that many allocatable (the most on one is {most}); {summary}. Lower gpus/nodes, or use a "
            "cluster with bigger nodes" + (" (no gang scheduling: a partial start would hang rank 0)" if nodes > 1 else "")
        )
    if len(free_now) >= nodes:
        return "ok: " + summary
    if require_free:
        raise TaoError(f"insufficient free GPUs now (--require-free): need {want} free, {len(free_now)} have it; "
                       f"{summary}. Submit without --require-free to queue, or wait")
    gang = (" (multi-node: pods that start first hold their GPUs while they wait for the rest, "
            "--require-free refuses instead)") if nodes > 1 else ""
    return f"queued: the GPUs are busy, the Job waits until {want} free up ({len(free_now)} now){gang}; {summary}"


_VERSION = re.compile(r"v?(\d+)\.(\d+)")


def server_version(version_json: dict) -> tuple[int, int]:
    """(major, minor) of the API server from ``kubectl version -o json`` (gitVersion, e.g. v1.34.4)."""
    sv = version_json.get("serverVersion") or {}
    m = _VERSION.match(sv.get("gitVersion") or "")
    if not m:
        raise TaoError("kubectl version -o json did not report a server version: is the cluster reachable?")
    return int(m.group(1)), int(m.group(2))


def at_least(found: tuple[int, int], minimum: str) -> bool:
    """``found`` (major, minor) >= the ``"1.26"``-style ``minimum``."""
    m = _VERSION.match(str(minimum))
    if not m:
        raise TaoError(f"version {minimum!r} in versions.yaml is not MAJOR.MINOR: fix it")
    return found >= (int(m.group(1)), int(m.group(2)))


def check_version(found: tuple[int, int], minimum: str) -> None:
    m = _VERSION.match(str(minimum))
    want = (int(m.group(1)), int(m.group(2))) if m else (1, 28)
    if found < want:
        raise TaoError(
            f"multi-node jobs need Kubernetes >= {want[0]}.{want[1]}, the server is {found[0]}.{found[1]}: "
            f"{VERSION_REASON}. Upgrade the cluster or run single-node"
        )


# ------------------------------------------------------------ Kueue queues
# Kueue queues: which LocalQueue a submit goes to, its Job labelled and created suspended, and why Kueue holds it.
#
# Kueue admits a labelled, suspended Job as ONE Workload: a multi-node Job's pods all-or-nothing, a sweep's Indexed
# Job with up to ``parallelism`` pods (partial admission down to one). The quota is then the ClusterQueue's, not the
# nodes': the bank's capacity gate steps aside. No Kueue is needed where no queue is used.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Kueue's partial admission of a batch/v1 Job: it may start with fewer pods than ``parallelism`` (not below this).
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
#: The label Kueue puts on the Workload it makes for a Job: that Job's UID (it copies none of the Job's labels).
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
LOCAL_QUEUES, CLUSTER_QUEUES, WORKLOADS = (f"{k}.kueue.x-k8s.io" for k in ("localqueues", "clusterqueues", "workloads"))
#: The LocalQueue a namespace's Jobs go to when none is named (Kueue's own convention).
DEFAULT_QUEUE = "default"
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?")
_NO_API = ("doesn't have a resource type", "the server could not find the requested resource")
#: Everything a submit's gates read, in ONE call where the user may list it all: the Kueue queues and the nodes
#: and pods the capacity gate counts (a cluster without Kueue refuses the whole read: see :func:`remember`).
GATE_READ = f"{LOCAL_QUEUES},{CLUSTER_QUEUES},nodes,pods"
#: What the gates' one read met on a cluster is believed this long: a cluster without Kueue is then read the plain
#: way, a user who may not list it all step by step, with no refused read first.
MEMORY_TTL_S = 600
MEMORY_FILE = "kueue-gate-read.cache"  # not *.json: the folder's JSON files are the records
ABSENT, FORBIDDEN = "no-kueue", "forbidden"


def label_jobs(objs: list[dict], queue: str, *, partial: bool = False) -> list[dict]:
    """``objs`` with their Job labelled for ``queue`` and suspended (Kueue unsuspends it on admission); ``partial``:
    a sweep's Indexed Job may be admitted with fewer pods than its slots (one at least)."""
    out = []
    for obj in objs:
        if obj.get("kind") == "Job":
            obj = copy.deepcopy(obj)
            obj["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), QUEUE_LABEL: queue}
            obj["spec"]["suspend"] = True
            if partial:
                obj["metadata"].setdefault("annotations", {})[MIN_PARALLELISM_ANNOTATION] = "1"
        out.append(obj)
    return out


def queue_of(job: dict | None) -> str | None:
    return (((job or {}).get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)


def _get(kube: Kubectl, *args: str) -> tuple[dict | None, str]:
    """(the answer, or None; kubectl's error text) of ``kubectl get ARGS -o json``."""
    res = kube.run("get", *args, "-o", "json", check=False, what=f"kubectl get {args[0].split('.')[0]}")
    return (cluster_json(res.stdout or "{}"), "") if res.ok else (None, res.stderr or one_line(res.stdout))


def no_api(err: str) -> bool:
    """kubectl's error says the cluster has no Kueue API."""
    return any(s in err for s in _NO_API)


def _cluster(kube: Kubectl) -> str:
    """Which cluster kubectl talks to, with no call and no read: the context and the kubeconfig files' identity
    and modification time (``kubectl config use-context`` rewrites the file: a new key)."""
    try:
        paths = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    except RuntimeError:  # no home folder
        paths = ""
    digest = hashlib.sha256((kube.context or "").encode())
    for path in paths.split(os.pathsep):
        try:
            st = os.stat(path)
            digest.update(f"{path}\0{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}\0".encode())
        except OSError:
            digest.update(f"{path}\0-\0".encode())
    return digest.hexdigest()[:32]


def _memory_path() -> Path:
    return records.state_dir() / MEMORY_FILE


def _memory() -> dict[str, dict]:
    """Cluster key -> {"what": ABSENT or FORBIDDEN, "at": time}, the entries younger than :data:`MEMORY_TTL_S`."""
    now = time.time()
    return {k: v for k, v in fsio.read_cache(_memory_path(), "Kueue cache", max_bytes=64 * 1024).items()
            if isinstance(v, dict) and v.get("what") in (ABSENT, FORBIDDEN)
            and isinstance(v.get("at"), (int, float)) and 0 <= now - v["at"] < MEMORY_TTL_S}


def remembered(kube: Kubectl) -> str | None:
    """What the gates' one read met on this cluster less than :data:`MEMORY_TTL_S` ago: :data:`ABSENT` (no Kueue),
    :data:`FORBIDDEN` (this user may not list it all), or None (nothing known: read it all at once)."""
    return (_memory().get(_cluster(kube)) or {}).get("what")


def remember(kube: Kubectl, what: str | None) -> None:
    """Keep (or, with None, drop) what the gates' one read met; a cache that cannot be written is no error."""
    entries, key = _memory(), _cluster(kube)
    if (entries.get(key) or {}).get("what") == what:
        return
    if what is None:
        entries.pop(key, None)
    else:
        entries[key] = {"what": what, "at": time.time()}
    try:
        fsio.write_private(_memory_path(), json.dumps(entries) + "\n")
    except (OSError, TaoError):
        pass


def local_queues(kube: Kubectl) -> list[dict] | None:
    """The namespace's LocalQueues; None when the cluster has no Kueue (no LocalQueue API)."""
    got, err = _get(kube, LOCAL_QUEUES)
    if got is not None:
        return got.get("items") or []
    if no_api(err):
        return None
    if "forbidden" in err.lower():
        raise TaoError(f"you may not list Kueue LocalQueues in namespace {kube.namespace}: ask for Kueue's "
                       "batch-user role there (kueue-batch-user-role), or submit without --queue")
    raise TaoError(f"kubectl get localqueues failed: {last_line(err)}")


def gpu_quota(cq: dict) -> int | None:
    """The ClusterQueue's nominal nvidia.com/gpu quota over its flavors (None: it covers no GPUs)."""
    found = [_qty(r.get("nominalQuota")) for g in (cq.get("spec") or {}).get("resourceGroups") or []
             for f in g.get("flavors") or [] for r in f.get("resources") or [] if r.get("name") == GPU]
    return sum(found) if found else None


def gpu_usage(status: dict) -> int:
    """GPUs reserved, from a LocalQueue's or ClusterQueue's ``flavorsReservation`` status."""
    return sum(_qty(r.get("total")) for f in status.get("flavorsReservation") or [] for r in f.get("resources") or []
               if r.get("name") == GPU)


def describe(kube: Kubectl, lq: dict, cqs: dict[str, dict] | None = None) -> tuple[str, int | None, int]:
    """(ClusterQueue name, its GPU quota or None when unreadable, GPUs in use) of a LocalQueue (users often may not
    read ClusterQueues: the LocalQueue's own usage then); ``cqs``: the ClusterQueues already read, by name."""
    name = str((lq.get("spec") or {}).get("clusterQueue") or "?")
    if cqs is not None:
        cq = cqs.get(name)
    else:
        cq, err = _get(kube, CLUSTER_QUEUES, name)
        if cq is None and "forbidden" not in err.lower() and "NotFound" not in err:
            raise TaoError(f"kubectl get clusterqueue {name} failed: {last_line(err)}")
    return name, gpu_quota(cq) if cq else None, gpu_usage((cq or lq).get("status") or {})


def check_name(wanted: str | None) -> None:
    if wanted is not None and not _NAME.fullmatch(wanted):
        raise TaoError(f"--queue {wanted!r} is not a LocalQueue name (lowercase letters, digits, '-' and '.', at most "
                       "63 characters)")


#: ``choose``'s ``lqs`` when the LocalQueues are still to be read (one by one, as the user's rights allow).
UNREAD: object = object()


def choose(kube: Kubectl, wanted: str | None, *, gpus: int, lqs=UNREAD,
           cqs: dict[str, dict] | None = None) -> tuple[str | None, str | None, list[str]]:
    """(LocalQueue, its ClusterQueue, report lines) of a submit: ``wanted`` (refused in one line when the namespace
    has no such queue or the cluster no Kueue), else the namespace's ``default`` LocalQueue (said so), else none.
    A quota smaller than ``gpus`` (what the Job asks at once) is a warning: Kueue keeps it waiting. ``lqs``/``cqs``:
    the namespace's LocalQueues (None: no Kueue) and the ClusterQueues by name, when already read."""
    check_name(wanted)
    if lqs is UNREAD:
        try:
            lqs = local_queues(kube)
        except TaoError as exc:
            if wanted or "you may not" not in str(exc):
                raise
            return None, None, [f"warning: not queued: {str(exc).split(':')[0]}, so a default one is not used either"]
    if lqs is None:
        if wanted:
            raise TaoError(f"--queue {wanted}: this cluster has no Kueue (no LocalQueue API): submit without --queue")
        return None, None, []
    by_name = {(q.get("metadata") or {}).get("name"): q for q in lqs}
    lines = []
    if wanted is None:
        if DEFAULT_QUEUE not in by_name:
            return None, None, []
        wanted = DEFAULT_QUEUE
        lines.append(f"queued: no --queue given: the Job goes to namespace {kube.namespace}'s default LocalQueue "
                     f"{DEFAULT_QUEUE} (--queue NAME picks another)")
    elif wanted not in by_name:
        there = f"its LocalQueues: {', '.join(sorted(str(n) for n in by_name))}" if by_name else "it has none"
        raise TaoError(f"--queue {wanted}: no LocalQueue {wanted} in namespace {kube.namespace} ({there}; "
                       "tao_k8s.py preflight lists them)")
    cq, quota, used = describe(kube, by_name[wanted], cqs)
    figures = f"GPU quota {quota}, {used} in use" if quota is not None else "GPU quota not readable"
    lines.append(f"queue: LocalQueue {wanted} -> ClusterQueue {cq} ({figures}); Kueue admits the Job whole when the "
                 "quota allows (the node capacity check steps aside)")
    if quota is not None and gpus > quota:
        lines.append(f"warning: the Job asks {gpus} {GPU} at once but ClusterQueue {cq} has a GPU quota of {quota}: "
                     "Kueue keeps it waiting (inadmissible) unless its cohort lends the rest")
    return wanted, cq, lines


def split_gate_read(kube: Kubectl, objs: list[dict]) -> tuple[list[dict], dict[str, dict], list[dict], list[dict]]:
    """(the namespace's LocalQueues, ClusterQueues by name, nodes, pods) of the one :data:`GATE_READ` answer."""
    def of(kind: str) -> list[dict]:
        return [o for o in objs if o.get("kind") == kind]
    lqs = [q for q in of("LocalQueue") if (q.get("metadata") or {}).get("namespace") == kube.namespace]
    cqs = {str((q.get("metadata") or {}).get("name")): q for q in of("ClusterQueue")}
    return lqs, cqs, of("Node"), of("Pod")


def queue_or_capacity(kube: Kubectl, spec: KubernetesSpec, *,
                      capacity: Callable[[list[dict] | None], str]) -> tuple[str | None, str | None, list[str]]:
    """(LocalQueue, ClusterQueue, report lines) of a submit: Kueue's queue when one applies (:func:`choose`),
    else the capacity gate's line, in as few reads as the user's rights allow. A named queue: the namespace's
    LocalQueues and the ClusterQueues in one read (no pods: Kueue's quota decides). Else queues, nodes and pods in
    ONE read, unless this cluster was lately found without Kueue (nodes and pods) or that read forbidden to this
    user (the reads one by one, as rights allow); both are remembered (:func:`remember`). ``capacity``: the
    capacity gate's line, from the one read's nodes and pods, or (given None) from its own reads."""
    gpus = int(1 if spec.gpus is None else spec.gpus) * int(spec.nodes or 1)  # admitted at once: all the pods'
    check_name(spec.queue)
    if spec.queue is not None:
        res = kube.run("get", f"{LOCAL_QUEUES},{CLUSTER_QUEUES}", "-o", "json", check=False,
                       what="kubectl get localqueues,clusterqueues")
        if res.ok:
            lqs, cqs, _, _ = split_gate_read(kube, _items(res.stdout, "kubectl get localqueues"))
            return choose(kube, spec.queue, gpus=gpus, lqs=lqs, cqs=cqs)
        return choose(kube, spec.queue, gpus=gpus, lqs=None if no_api(res.stderr) else UNREAD)
    known = remembered(kube)
    if known is None:
        res = kube.run("get", GATE_READ, "--all-namespaces", "-o", "json", check=False,
                       what="kubectl get localqueues,clusterqueues,nodes,pods --all-namespaces")
        err = res.stderr or res.stdout
        if res.ok:  # nothing was remembered for this cluster (known is None): nothing to drop
            lqs, cqs, node_items, pods = split_gate_read(kube, _items(res.stdout, "kubectl get nodes,pods"))
            queue, cq, lines = choose(kube, None, gpus=gpus, lqs=lqs, cqs=cqs)
            return queue, cq, lines if queue else [*lines, capacity([*node_items, *pods])]
        if no_api(err):
            known = ABSENT
        elif "forbidden" in err.lower():
            known = FORBIDDEN
        else:
            raise TaoError(f"kubectl get localqueues,clusterqueues,nodes,pods failed: {last_line(err)}")
        remember(kube, known)
    queue, cq, lines = (None, None, []) if known == ABSENT else choose(kube, None, gpus=gpus)
    return queue, cq, lines if queue else [*lines, capacity(None)]


def _items(stdout: str, what: str) -> list[dict]:
    try:
        return cluster_json(stdout or "{}").get("items") or []
    except (ValueError, AttributeError):
        raise TaoError(f"{what} returned output that is not a JSON list: check the kubectl version") from None


def workloads(kube: Kubectl, uids: list[str]) -> dict[str | None, dict]:
    """Job UID -> its Workload, for these Jobs in ONE call ({} when unreadable: they then read as suspended)."""
    got, _ = _get(kube, WORKLOADS, "-l", f"{JOB_UID_LABEL} in ({','.join(sorted(set(uids)))})")
    return {((w.get("metadata") or {}).get("labels") or {}).get(JOB_UID_LABEL): w for w in (got or {}).get("items") or []}


def _cond(obj: dict, ctype: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), {})


def explain(job: dict, workload: dict | None, cluster_queue: str | None) -> tuple[str, str]:
    """(reason, message) of a suspended queued Job from its Workload: waiting for quota, inadmissible, evicted."""
    queue = queue_of(job) or "?"
    where = f"ClusterQueue {cluster_queue}" if cluster_queue else f"LocalQueue {queue}"
    if workload is None:
        return "Queued", f"QUEUED in LocalQueue {queue}: waiting for Kueue to make its Workload"
    evicted, reserved = _cond(workload, "Evicted"), _cond(workload, "QuotaReserved")
    if evicted.get("status") == "True":
        return "Evicted", (f"QUEUED again: evicted by Kueue ({evicted.get('reason') or 'Evicted'}: "
                           f"{evicted.get('message') or 'no message'}); it waits for quota in {where}")
    if _cond(workload, "Admitted").get("status") == "True":
        return "Admitted", f"admitted by Kueue in {where}: its pods are being created"
    message = reserved.get("message") or ""
    if reserved.get("reason") == "Inadmissible":
        return "Inadmissible", f"QUEUED, inadmissible: {message or 'Kueue gave no message'}"
    requeued = ((workload.get("status") or {}).get("requeueState") or {}).get("count")
    return "Queued", (f"QUEUED: waiting for quota in {where}" + (f" (requeued {requeued} times)" if requeued else "")
                      + (f": {message}" if message else ""))


# ------------------------------------------------------------ the input paths
# Inputs checked before GPUs are spent: the paths a job reads from its volumes must exist.
#
# The agent's machine cannot see a PVC, so a short GPU-less Job mounting the
# same volumes runs ``test -e`` on each path (as SLURM's submit does over SSH).
# A command names outputs as readily as inputs (``-r /workspace/results``,
# ``mkdir -p /workspace/out``), so only paths that are plainly inputs refuse
# the submit: the spec's ``inputs``, the word after an input flag (``-e``,
# ``--spec``, ``--config``, ``--data-dir``...) and values of input keys
# (``dataset.root=``, ``spec_file=``). Other absolute paths under a mount are
# checked too, but a missing one is only reported: it may be an output.
_INPUT_KEY = re.compile(r"(spec|config|dataset|data_?(root|dir|path|file)|annotation|label|image_dir|pretrain|"
                        r"resume|inputs?$)", re.IGNORECASE)
_INPUT_FLAGS = frozenset({"-e", "--experiment_spec", "--experiment_spec_file", "--experiment-spec", "--spec",
                          "--spec-file", "--spec_file", "--config", "--config-file", "--config_file", "--data",
                          "--dataset", "--data-dir", "--data_dir", "--data-root", "--data_root", "--inputs"})
_NOT_A_PATH = re.compile(r"[*?\[\]$`{}]")  # globs and shell expansions: the check cannot name them
#: One line per path: "ok PATH" or "missing PATH".
CHECK_SCRIPT = 'for p in "$@"; do if [ -e "$p" ]; then echo "ok $p"; else echo "missing $p"; fi; done'


@dataclass
class Inputs:
    """``required``: a missing one refuses the submit; ``possible``: a missing one is reported only."""

    required: list[str]
    possible: list[str]

    @property
    def all(self) -> list[str]:
        return self.required + self.possible


def _input_words(spec: KubernetesSpec) -> list[str]:
    if spec.args:
        return list(spec.args)
    return shell_words(str(spec.command or ""))


def input_paths(spec: KubernetesSpec, results_folder: str | None) -> Inputs:
    """The paths of ``spec`` to check, each once, split into required and possible inputs."""
    roots = [m["mount_path"] for m in spec.mounts or []]
    for p in spec.inputs or []:
        if not any(is_under(p, r) for r in roots):
            raise TaoError(f"input {p} is on no mounted volume (mounted: {', '.join(roots) or 'none'}): mount it "
                           "(--pvc-mount CLAIM:PATH) or fix the path")
    required = list(spec.inputs or [])
    possible: list[str] = []
    words = _input_words(spec)
    for before, cand, key in read_candidates(words):
        if not cand.startswith("/") or _NOT_A_PATH.search(cand) or not any(is_under(cand, r) for r in roots):
            continue
        if results_folder and is_under(cand, results_folder):
            continue
        input_key = bool(key) and bool(_INPUT_KEY.search(key))
        (required if before in _INPUT_FLAGS or input_key else possible).append(cand)
    required = list(dict.fromkeys(required))
    return Inputs(required, [p for p in dict.fromkeys(possible) if p not in required])


def input_verdict(wanted: list[str], output: str) -> tuple[list[str], list[str]]:
    """(missing, unchecked) from the check Job's output."""
    seen: dict[str, str] = {}
    for line in output.splitlines():
        word, _, path = line.partition(" ")
        if word in ("ok", "missing"):
            seen[path] = word
    return [p for p in wanted if seen.get(p) == "missing"], [p for p in wanted if p not in seen]


def check_inputs(kube, spec: KubernetesSpec, results_folder: str | None) -> str:
    """Refuse when a required input is missing; the line for the gate report otherwise (``warning: ...``,
    free of ``; `` so the helper can show it on its own, when the check could not run or a path that may be
    an output was not found)."""
    from . import volume_job

    found = input_paths(spec, results_folder)
    wanted = found.all
    if not wanted:
        return "inputs: none named on a mounted volume"
    try:
        code, output = volume_job.run(kube, spec, ["/bin/sh", "-c", CHECK_SCRIPT, "tao-inputs", *wanted],
                                      purpose="checking the inputs on the volumes")
    except TaoError as exc:  # a helper pod that cannot run must not block every submit
        return (f"warning: inputs not checked ({exc}), submit with --no-input-check to skip the check, "
                "or fix what kept the helper pod from running")
    missing, unchecked = input_verdict(wanted, output)
    refused = [p for p in missing if p in found.required]
    if refused:
        raise TaoError(f"input path(s) missing on the job's volumes: {', '.join(refused)} (checked by a GPU-less "
                       "pod mounting the same volumes): fix the paths or put the data there, then submit again "
                       "(--no-input-check skips the check)")
    if unchecked:
        return (f"inputs: {len(unchecked)} of {len(wanted)} path(s) not checked (the check pod printed nothing, "
                f"exit {code}: a node that runs no containers?)")
    if missing:
        return (f"warning: not found on the volumes: {', '.join(missing)} (the command names them, fine if the job "
                f"creates them), {len(wanted) - len(missing)} other path(s) found")
    return f"inputs: {len(wanted)} path(s) found on the volumes"
