"""What a skill user exports to drive the local cluster (test infrastructure)."""
from __future__ import annotations

from .cluster_kubectl import _kubectl_binary
from .cluster_state import _load_cluster, _paths
from .k8s_objects import NAMESPACE, PVC_NAME

#: env key naming the restricted user's kubeconfig (``up()``/``env()`` return it).
USER_KUBECONFIG_ENV = "TAO_LOCAL_K8S_USER_KUBECONFIG"
PVC_ENV = "TAO_LOCAL_K8S_PVC"
#: env key naming the kubectl built with the cluster (same version as the server).
KUBECTL_ENV = "TAO_LOCAL_K8S_KUBECTL"
#: env key naming a mode-600 file holding the local registry's password for user ``$oauthtoken``
#: (what ``--ngc-pull-secret`` reads from $NGC_KEY).
NGC_KEY_FILE_ENV = "TAO_LOCAL_K8S_NGC_KEY_FILE"
#: env key: the cluster bridge's gateway address (CoreDNS, S3; reachable from pods and this host).
BRIDGE_IP_ENV = "TAO_LOCAL_K8S_BRIDGE_IP"
#: env key: the local S3 endpoint URL (tier C), reachable from pods and this host.
S3_ENDPOINT_ENV = "TAO_LOCAL_K8S_S3_ENDPOINT"


def env() -> dict[str, str]:
    """What a skill user exports to drive this cluster (admin KUBECONFIG + restricted one)."""
    p = _paths()
    return {
        "KUBECONFIG": str(p["admin"]),
        USER_KUBECONFIG_ENV: str(p["user"]),
        "TAO_K8S_NAMESPACE": NAMESPACE,
        "TAO_K8S_SKIP_NODE_RUNTIME_CHECK": "1",
        PVC_ENV: PVC_NAME,
        KUBECTL_ENV: _kubectl_binary(),
        NGC_KEY_FILE_ENV: str(p["registry"] / "ngc-key"),
        BRIDGE_IP_ENV: _load_cluster().get("net", {}).get("gateway", ""),
        S3_ENDPOINT_ENV: _load_cluster().get("s3_endpoint", ""),
        # no GPUs here: the gloo-cpu probe's ok (a real all-reduce between the real nodes) opens the gate
        "TAO_NCCL_GATE_ACCEPTS": "nccl,gloo-cpu",
    }
