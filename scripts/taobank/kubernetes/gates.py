"""Read-only checks before a submit: free GPUs, server version, RBAC.

The capacity gate counts FREE ``nvidia.com/gpu`` per node: allocatable minus
what non-terminal pods bound to the node request. Cordoned and NotReady nodes,
nodes whose taints the job does not tolerate and nodes its nodeSelector does
not match are not placement targets and do not count. A multi-node job needs
``nodes`` distinct nodes with ``gpus_per_node`` free each (there is no gang
scheduling: a partial start leaves rank 0 waiting forever).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import TaoError

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
            blocking = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")
                        and not _tolerated(t, tolerations or [])]
            if blocking:
                why = f"taint {blocking[0].get('key')}"
            elif node_selector and any((meta.get("labels") or {}).get(k) != v for k, v in node_selector.items()):
                why = "nodeSelector does not match"
        out.append(NodeGPUs(name, _qty((st.get("allocatable") or {}).get(GPU)), used.get(name, 0), not why, why))
    return out


def check_capacity(figures: list[NodeGPUs], gpus_per_node: int, nodes: int = 1) -> str:
    """Raise TaoError unless ``nodes`` usable nodes each have ``gpus_per_node`` free; return a summary."""
    usable = [n for n in figures if n.usable]
    free_total = sum(n.free for n in usable)
    fitting = [n for n in usable if n.free >= gpus_per_node]
    detail = ", ".join(f"{n.name} {n.free}/{n.allocatable} free" + (f" ({n.why})" if n.why else "") for n in figures)
    summary = f"free nvidia.com/gpu on schedulable nodes: {free_total} [{detail or 'no nodes'}]"
    if gpus_per_node == 0:
        return summary + " (0 GPUs requested: GPU scheduling not verified)"
    if nodes <= 1:
        if not fitting:
            best = max((n.free for n in usable), default=0)
            raise TaoError(
                f"insufficient GPUs: need {gpus_per_node} on one node, the most free on a schedulable node is "
                f"{best}; {summary}. Wait for GPUs to free up, lower gpus, or add nodes"
            )
    elif len(fitting) < nodes:
        raise TaoError(
            f"insufficient GPUs: need {nodes} nodes with {gpus_per_node} free nvidia.com/gpu each, "
            f"only {len(fitting)} have that; {summary}. No gang scheduling: a partial start would hang rank 0"
        )
    return summary


_VERSION = re.compile(r"v?(\d+)\.(\d+)")


def server_version(version_json: dict) -> tuple[int, int]:
    """(major, minor) of the API server from ``kubectl version -o json`` (gitVersion, e.g. v1.34.4)."""
    sv = version_json.get("serverVersion") or {}
    m = _VERSION.match(sv.get("gitVersion") or "")
    if not m:
        raise TaoError("kubectl version -o json did not report a server version: is the cluster reachable?")
    return int(m.group(1)), int(m.group(2))


def check_version(found: tuple[int, int], minimum: str) -> None:
    m = _VERSION.match(str(minimum))
    want = (int(m.group(1)), int(m.group(2))) if m else (1, 28)
    if found < want:
        raise TaoError(
            f"multi-node jobs need Kubernetes >= {want[0]}.{want[1]}, the server is {found[0]}.{found[1]}: "
            f"{VERSION_REASON}. Upgrade the cluster or run single-node"
        )
