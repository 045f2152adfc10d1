"""Read-only checks before a submit: GPU capacity, server version, RBAC.

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

import re
from dataclasses import dataclass

from ...errors import TaoError

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
