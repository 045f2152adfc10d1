"""Cluster preflight for Kubernetes: what a submit will need, checked once, with true figures.

Each check gives one finding: OK, WARN (submit may still work) or MISSING
(fix it first); an unreachable cluster's finding lists the kubeconfig
command of each kind of site. The GPU figure counts only nodes a Job can be placed on
(the capacity gate's own rule: cordoned, NotReady and untolerated-taint
nodes are left out), and a list of the GPU nodes says which can run the job
and why the others cannot; the Kueue LocalQueues (quota, usage, the queue a
submit goes to); ``can-i create jobs`` and every named PVC being Bound are checked; a kubectl more than one minor version away from the server is
reported (kubectl supports +/-1).
"""
from __future__ import annotations

from ...contract import Finding
from ...errors import TaoError
from . import gates
from .kubectl import Kubectl, cluster_json

#: kubectl's supported client/server minor version skew.
MAX_SKEW = 1
#: GPU node lines shown in the text output (all of them in --json)
MAX_NODE_LINES = 20


def kubeconfig_commands() -> dict[str, str]:
    """How each kind of site writes a kubeconfig entry (placeholders in capitals): the fix for an
    unreachable cluster, one command per site."""
    import shlex

    from ... import BANK_ROOT

    local = shlex.quote(str(BANK_ROOT / "scripts" / "local_cluster.py"))
    return {
        "EKS": "aws eks update-kubeconfig --name CLUSTER --region REGION",
        "GKE": "gcloud container clusters get-credentials CLUSTER --region REGION",
        "AKS": "az aks get-credentials --resource-group RG --name CLUSTER",
        "local": f'eval "$(python3 {local} env kubernetes)"',
    }


def _minor(version: dict | None) -> tuple[int, int] | None:
    try:
        return gates.server_version({"serverVersion": version or {}})
    except TaoError:
        return None


def version_findings(version_json: dict) -> list[Finding]:
    server, client = _minor(version_json.get("serverVersion")), _minor(version_json.get("clientVersion"))
    if server is None:
        return [Finding("MISSING", "cluster", "no reachable cluster (kubectl version reports no server): get "
                        "credentials with your cluster's command below, or fix $KUBECONFIG / TAO_K8S_CONTEXT",
                        details=tuple(f"{site}: {cmd}" for site, cmd in kubeconfig_commands().items()),
                        data={"kubeconfig_commands": kubeconfig_commands()})]
    out = [Finding("OK", "cluster", f"cluster reachable, server v{server[0]}.{server[1]}")]
    if client is not None and (client[0] != server[0] or abs(client[1] - server[1]) > MAX_SKEW):
        out.append(Finding("WARN", "version-skew",
                           f"kubectl v{client[0]}.{client[1]} is more than {MAX_SKEW} minor version from the server "
                           f"v{server[0]}.{server[1]} (unsupported skew): install kubectl "
                           f"v{server[0]}.{server[1]} (or v{server[0]}.{server[1] - 1} / v{server[0]}.{server[1] + 1})"))
    return out


def gpu_finding(nodes: list[dict], placement: dict | None = None) -> Finding:
    """GPUs on the nodes a job may use: schedulable, and matching ``placement``'s node_selector/tolerations
    (a job spec's) as the submit gate counts them."""
    placement = placement or {}
    figures = gates.node_gpus(nodes, [], node_selector=placement.get("node_selector"),
                              tolerations=placement.get("tolerations"))
    usable = [f for f in figures if f.usable]
    total = sum(f.allocatable for f in figures)
    schedulable = sum(f.allocatable for f in usable)
    left_out = ", ".join(f"{f.name} ({f.why})" for f in figures if not f.usable and f.allocatable)
    detail = f" of {total} allocatable; not schedulable: {left_out}" if left_out else ""
    if schedulable == 0:
        return Finding("WARN", "gpus", f"no schedulable nvidia.com/gpu{detail}: install the NVIDIA GPU Operator "
                       "(https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html) "
                       "or uncordon GPU nodes")
    biggest = max(f.allocatable for f in usable)
    return Finding("OK", "gpus", f"schedulable nvidia.com/gpu: {schedulable} on {len(usable)} node(s), at most "
                   f"{biggest} per node{detail}")


def _taint_text(taint: dict) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def nodes_finding(nodes: list[dict], placement: dict | None = None) -> Finding:
    """Which GPU nodes can run the job, one detail line per node: its allocatable GPUs, and what keeps it
    out (cordoned, NotReady, taints the job does not tolerate, a node_selector it does not match)."""
    placement = placement or {}
    selector = placement.get("node_selector") or {}
    rows = []
    for node in nodes:
        meta, st = node.get("metadata") or {}, node.get("status") or {}
        gpus = gates._qty((st.get("allocatable") or {}).get(gates.GPU))
        if not gpus:
            continue
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
        taints = [_taint_text(t) for t in gates.untolerated_taints(node, placement.get("tolerations"))]
        labels = meta.get("labels") or {}
        matches = all(labels.get(k) == v for k, v in selector.items()) if selector else None
        why = (["cordoned"] if (node.get("spec") or {}).get("unschedulable") else []) + \
              ([] if ready else ["NotReady"]) + \
              ([f"untolerated taint(s) {', '.join(taints)}"] if taints else []) + \
              (["node_selector does not match"] if matches is False else [])
        rows.append({"name": meta.get("name", "?"), "gpus": gpus, "can_run": not why, "untolerated_taints": taints,
                     "matches_node_selector": matches, "why_not": why})
    wanted = f" with node_selector {','.join(f'{k}={v}' for k, v in selector.items())}" if selector else ""
    if not rows:
        return Finding("INFO", "nodes", "no node advertises nvidia.com/gpu", data=[])
    able = sum(r["can_run"] for r in rows)
    lines = [f"{r['name']}: {r['gpus']} GPUs, " + ("can run it" if r["can_run"] else "; ".join(r["why_not"]))
             for r in sorted(rows, key=lambda r: (not r["can_run"], r["name"]))]
    if len(lines) > MAX_NODE_LINES:
        lines = lines[:MAX_NODE_LINES] + [f"... {len(lines) - MAX_NODE_LINES} more GPU nodes (--json lists all)"]
    return Finding("INFO", "nodes", f"GPU nodes that can run the job{wanted}: {able} of {len(rows)}",
                   details=tuple(lines), data=rows)


def pvc_finding(kube: Kubectl, claim: str) -> Finding:
    res = kube.run("get", "pvc", claim, "-o", "json", check=False, what="kubectl get pvc")
    if not res.ok:
        text = (res.stderr or "").strip()
        if "NotFound" in text or "not found" in text:
            return Finding("MISSING", "pvc", f"PVC {claim} does not exist in namespace {kube.namespace}: create it "
                           "or fix the mount (kubectl get pvc)")
        if "forbidden" in text.lower():
            return Finding("WARN", "pvc", f"PVC {claim}: you may not read PVCs, so Bound is not checked")
        raise TaoError(f"kubectl get pvc {claim} failed: {text.splitlines()[-1] if text else 'no output'}")
    phase = ((cluster_json(res.stdout) or {}).get("status") or {}).get("phase") or "unknown"
    if phase != "Bound":
        return Finding("MISSING", "pvc", f"PVC {claim} is {phase}, not Bound: a pod mounting it stays Pending "
                       "(kubectl describe pvc shows why)")
    return Finding("OK", "pvc", f"PVC {claim} is Bound")


def queues_finding(kube: Kubectl, wanted: str | None = None) -> Finding:
    """Kueue: where a submit goes (submit's own rule and refusals) and each LocalQueue with its quota and use."""

    try:
        queue, _, _ = gates.choose(kube, wanted, gpus=0)
        lqs = gates.local_queues(kube) or []
    except TaoError as exc:
        return Finding("MISSING" if wanted else "WARN", "queues", str(exc))
    if not lqs:
        return Finding("INFO", "queues", "no Kueue LocalQueue in namespace " + kube.namespace + ": not queued")
    rows = [dict(zip(("name", "cluster_queue", "gpu_quota", "gpus_in_use"), ((q.get("metadata") or {}).get("name"),
                                                                          *gates.describe(kube, q)))) for q in lqs]
    return Finding("OK" if queue else "INFO", "queues", f"Kueue LocalQueues in namespace {kube.namespace}: {len(rows)}; "
                   + (f"a submit goes to LocalQueue {queue}" if queue else "a submit is not queued (--queue NAME)"),
                   details=tuple(f"{r['name']} -> ClusterQueue {r['cluster_queue']}: GPU quota "
                                 f"{'unknown' if r['gpu_quota'] is None else r['gpu_quota']}, {r['gpus_in_use']} in use"
                                 for r in rows), data=rows)


def run(kube: Kubectl, pvcs: list[str] | tuple[str, ...] = (), placement: dict | None = None,
        queue: str | None = None) -> list[Finding]:
    """Every check, in order; stops after an unreachable cluster (the rest would only repeat it)."""
    res = kube.run("version", "-o", "json", check=False, timeout=30, what="kubectl version")
    try:
        answer = cluster_json(res.stdout) if res.stdout.strip() else {}
    except ValueError:
        answer = {}
    out = version_findings(answer)
    if out[0].level == "MISSING":
        return out
    ns = kube.run("get", "namespace", kube.namespace, "-o", "name", check=False, what="kubectl get namespace")
    if not ns.ok and "NotFound" in ns.stderr:
        return out + [Finding("MISSING", "namespace", f"namespace {kube.namespace} does not exist: set "
                              "TAO_K8S_NAMESPACE to one you may use (kubectl get namespaces) or ask for it")]
    out.append(Finding("OK", "namespace", f"namespace {kube.namespace}"))
    if kube.can_i("create", "jobs"):
        out.append(Finding("OK", "rbac", f"you may create jobs in namespace {kube.namespace}"))
    else:
        out.append(Finding("MISSING", "rbac", f"you may not create jobs in namespace {kube.namespace}: ask for a "
                           "Role that allows it or pick another namespace"))
    try:
        nodes = kube.items("nodes", what="kubectl get nodes")
        out += [gpu_finding(nodes, placement), nodes_finding(nodes, placement)]
    except TaoError as exc:
        if "forbidden" not in str(exc).lower():
            raise
        out.append(Finding("WARN", "gpus", "you may not list nodes: GPU capacity unknown (submit warns and goes on)"))
    out.append(queues_finding(kube, queue or (placement or {}).get("queue")))
    out += [pvc_finding(kube, c) for c in dict.fromkeys(pvcs)]
    return out


def as_dicts(findings: list[Finding]) -> list[dict]:
    return [f.to_dict() for f in findings]
