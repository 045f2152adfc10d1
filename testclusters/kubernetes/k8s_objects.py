"""Objects the local Kubernetes cluster is seeded with, built as data (test infrastructure).

Fake GPU nodes (played by kwok), the jobs namespace, a statically bound
PV + PVC (storage tier A), and RBAC for a restricted user who may run Jobs in
that namespace and read nodes, nothing else.
"""
from __future__ import annotations

#: Every annotation/label key the bank's kwok Stages read starts with this.
FAKE_PREFIX = "fake.tao-skill-bank.local/"
#: Nodes carrying this label are the ones kwok plays (kwok's --manage-nodes-with-label-selector).
FAKE_NODE_LABEL = FAKE_PREFIX + "node"

GPU_RESOURCE = "nvidia.com/gpu"
GPUS_PER_NODE = 8
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
#: Schedulable fake GPU nodes.
GPU_NODES = ("tao-gpu-0", "tao-gpu-1")
#: A GPU node with spec.unschedulable (kubectl cordon): never a placement target.
CORDONED_NODE = "tao-gpu-cordoned"
NAMESPACE = "tao-jobs"
PV_NAME = "tao-results-pv"
PVC_NAME = "tao-results"
PVC_SIZE = "100Gi"
USER_NAME = "tao-user"
USER_GROUP = "tao-users"
ROLE_NAME = "tao-job-runner"
NODE_READER_ROLE = "tao-node-reader"


def node(name: str, *, kubelet_version: str, unschedulable: bool = False) -> dict:
    """A fake 8-GPU node. kwok keeps ``status.allocatable`` and reports it Ready."""
    resources = {
        "cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti",
        GPU_RESOURCE: str(GPUS_PER_NODE),
    }
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "fake-8xh100",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": GPU_PRODUCT,
                "nvidia.com/gpu.count": str(GPUS_PER_NODE),
                FAKE_NODE_LABEL: "true",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                FAKE_PREFIX + "kubelet-version": kubelet_version,
            },
        },
        "spec": {},
        "status": {"allocatable": resources, "capacity": dict(resources)},
    }
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


def namespace() -> list[dict]:
    """The jobs namespace and its default ServiceAccount (made here rather than waiting
    for the controller-manager's informers: pods are admitted only once it exists)."""
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": NAMESPACE}}]


def storage(host_path: str) -> list[dict]:
    """PV pre-bound to the PVC (no provisioner needed); kwok never mounts it."""
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": PV_NAME, "labels": {"tao-skill-bank.local/storage-tier": "A"}},
        "spec": {
            "capacity": {"storage": PVC_SIZE},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": NAMESPACE, "name": PVC_NAME},
            "hostPath": {"path": host_path, "type": "DirectoryOrCreate"},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": PVC_NAME, "namespace": NAMESPACE},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": PV_NAME,
            "resources": {"requests": {"storage": PVC_SIZE}},
        },
    }
    return [pv, pvc]


def rbac() -> list[dict]:
    """Role + binding in the jobs namespace, and read-only access to nodes."""
    verbs = ["create", "get", "list", "watch", "delete", "patch", "update"]
    read = ["get", "list", "watch"]
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ROLE_NAME, "namespace": NAMESPACE},
        "rules": [
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": verbs},
            {"apiGroups": [""], "resources": ["secrets", "services", "configmaps"], "verbs": verbs},
            {"apiGroups": [""], "resources": ["pods"], "verbs": read + ["delete"]},
            {"apiGroups": [""], "resources": ["pods/log", "events", "persistentvolumeclaims"], "verbs": read},
            # artifacts / fetch / prune run their commands in a reader pod with kubectl exec
            {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": read},
        ],
    }
    subject = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER_NAME}]
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": ROLE_NAME, "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME},
        "subjects": subject,
    }
    node_reader = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": NODE_READER_ROLE},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": read}],
    }
    node_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": NODE_READER_ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NODE_READER_ROLE},
        "subjects": subject,
    }
    return [role, binding, node_reader, node_binding]


def cluster_logs(logs_file: str) -> dict:
    """Default ``kubectl logs`` content for every fake container (kwok ClusterLogs)."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": "tao-local-default"},
        "spec": {"selector": {}, "logs": [{"logsFile": logs_file, "follow": False}]},
    }


def pod_logs(pod: str, namespace: str, logs_file: str, container: str | None = None) -> dict:
    """A kwok ``Logs`` object: ``kubectl logs <pod>`` then serves ``logs_file`` (CRI log format)."""
    entry: dict = {"logsFile": logs_file, "follow": False}
    if container:
        entry["containers"] = [container]
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Logs",
        "metadata": {"name": pod, "namespace": namespace},
        "spec": {"logs": [entry]},
    }


def cri_log(lines: list[str], stamp: str = "2026-01-01T00:00:00.000000000Z") -> str:
    """``lines`` in the CRI container-log format kwok serves (``<time> stdout F <line>``)."""
    return "".join(f"{stamp} stdout F {line}\n" for line in lines)


def busy_pod(node_name: str, gpus: int = GPUS_PER_NODE, name: str | None = None) -> dict:
    """A plain Pod pinned to ``node_name`` holding ``gpus``: kwok keeps it Running, so the node is busy."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name or f"busy-{node_name}", "namespace": NAMESPACE,
                     "labels": {"tao-skill-bank.local/busy": "true"}},
        "spec": {
            "nodeName": node_name,
            "restartPolicy": "Never",
            "containers": [{
                "name": "hold", "image": "busybox",
                "resources": {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {GPU_RESOURCE: str(gpus)}},
            }],
        },
    }
