"""The bank's local Kubernetes cluster: a real control plane, real nodes and fake GPU nodes (test infrastructure).

Real etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built
from the Go module proxy at the versions pinned in versions.yaml
(``test_clusters.kubernetes``; see :mod:`.k8s_build`), plus:

- two real nodes (``REAL_NODES``): a kubelet with its own containerd + runc
  + CNI bridge each, advertising a fake ``nvidia.com/gpu`` capacity, with
  CoreDNS for cluster names and a local registry that demands credentials
  (:mod:`.realnodes`, images from :mod:`.images`). Select them with
  ``--node-selector REAL_NODE_LABEL=true``;
- kwok playing the kubelets of three fake 8-GPU nodes (busy, cordoned, ...
  capacity scenarios). Select them with ``--node-selector FAKE_NODE_LABEL=true``.

Everything listens on 127.0.0.1 or on the cluster's own bridge; the state
(certificates, kubeconfigs, etcd data, logs, pid files, node folders) lives in
``${TAO_LOCAL_CLUSTER_DIR:-~/.local/state/tao-skill-bank/clusters}/kubernetes``.

Fake pods follow the Stages in ``testclusters/kubernetes/kwok/stages.yaml``,
steered by the pod annotations of :mod:`.fake_pods` (put them in a Job's pod template).

One module per part; this package re-exports the names tests, benchmarks and
``scripts/local_cluster.py`` use:

- :mod:`.lifecycle`: ``up``, ``down``, ``status``; :mod:`.cluster_env`: ``env``;
- :mod:`.cluster_state`: the state folder, logs, pid files, cluster.json;
- :mod:`.daemons`: daemon processes (ports, spawn, wait, stop); :mod:`.health`;
- :mod:`.control_plane`: etcd, apiserver (Secrets encrypted at rest), controllers, scheduler, kwok,
  seeding; ``etcd_get`` reads a raw etcd value;
- :mod:`.fake_pods`: the annotations that steer kwok's fake pods;
- :mod:`.realnodes_start`, :mod:`.realnodes_stop`, :mod:`.realnodes_ctr`: the
  real nodes (with CoreDNS); :mod:`.registry`, :mod:`.node_images`: their images;
- :mod:`.cluster_kubectl`: the cluster's own kubectl; :mod:`.cluster_s3`: tier C objects;
- :mod:`.kueue_build`, :mod:`.kueue`: Kueue (queues, GPU quota) built from its module and run beside the API
  server, started alone by ``up`` when it is not healthy.
"""
from __future__ import annotations

from pathlib import Path

from taobank import BANK_ROOT
from taobank.errors import TaoError
from taobank.run import run
from .. import apt
from ..procs import live_pid, log_tail, pid_runs, stop_pid, wait_for
from . import images, k8s_build, k8s_objects, k8s_pki, realnodes, s3
from .cluster_env import (
    BRIDGE_IP_ENV, KUBECTL_ENV, NGC_KEY_FILE_ENV, PVC_ENV, S3_ENDPOINT_ENV, USER_KUBECONFIG_ENV, env,
)
from .cluster_kubectl import kubectl
from .cluster_s3 import s3_endpoint, s3_get, s3_keys, s3_make_bucket, s3_put
from .cluster_state import state_root
from .control_plane import ADMIN_CONTEXT, ENCRYPTED_PREFIX, POD_CIDR, USER_CONTEXT, etcd_get
from .daemons import DAEMONS, DEFAULT_START_TIMEOUT_S, START_TIMEOUT_S, all_daemons, node_daemons, status_daemons_alive
from .fake_pods import (
    DEFAULT_RUN_DURATION_S, DEFAULT_START_DELAY_S, FAIL_EXIT_CODE_ANNOTATION, FAIL_REASON_ANNOTATION,
    KEEP_RUNNING_ANNOTATION, OOM_EXIT_CODE, OOM_REASON, RUN_DURATION_ANNOTATION, STAGES_FILE,
    START_DELAY_ANNOTATION, WAITING_MESSAGE_ANNOTATION, WAITING_REASON_ANNOTATION,
)
from .images import HANG_IMAGE
from .k8s_objects import (
    CORDONED_NODE, FAKE_NODE_LABEL, FAKE_PREFIX, GPU_NODES, GPU_RESOURCE, GPUS_PER_NODE, NAMESPACE, PV_NAME,
    PVC_NAME, USER_NAME, busy_pod, cri_log, pod_logs,
)
from .lifecycle import down, status, up, up_to_date
from .node_images import REGISTRY_ONLY
from .realnodes import REAL_NODE_LABEL, REAL_NODES
from .realnodes_ctr import forget_image, running_containers
from .realnodes_start import NODE_PACKAGES, NODE_PINNED

#: The names this package has always offered (the cluster's contract, its functions,
#: and the helpers tests reach through it).
__all__ = [
    "ADMIN_CONTEXT", "BANK_ROOT", "BRIDGE_IP_ENV", "CORDONED_NODE", "DAEMONS", "DEFAULT_RUN_DURATION_S",
    "DEFAULT_START_DELAY_S", "DEFAULT_START_TIMEOUT_S", "ENCRYPTED_PREFIX", "FAIL_EXIT_CODE_ANNOTATION", "FAIL_REASON_ANNOTATION",
    "FAKE_NODE_LABEL", "FAKE_PREFIX", "GPUS_PER_NODE", "GPU_NODES", "GPU_RESOURCE", "HANG_IMAGE",
    "KEEP_RUNNING_ANNOTATION", "KUBECTL_ENV", "NAMESPACE", "NGC_KEY_FILE_ENV", "NODE_PACKAGES", "NODE_PINNED",
    "OOM_EXIT_CODE", "OOM_REASON", "POD_CIDR", "PVC_ENV", "PVC_NAME", "PV_NAME", "Path", "REAL_NODES",
    "REAL_NODE_LABEL", "REGISTRY_ONLY", "RUN_DURATION_ANNOTATION", "S3_ENDPOINT_ENV", "STAGES_FILE",
    "START_DELAY_ANNOTATION", "START_TIMEOUT_S", "TaoError", "USER_CONTEXT", "USER_KUBECONFIG_ENV", "USER_NAME",
    "WAITING_MESSAGE_ANNOTATION", "WAITING_REASON_ANNOTATION", "all_daemons", "apt", "busy_pod", "cri_log",
    "down", "env", "etcd_get", "forget_image", "images", "k8s_build", "k8s_objects", "k8s_pki", "kubectl", "live_pid",
    "log_tail", "node_daemons", "pid_runs", "pod_logs", "realnodes", "run", "running_containers", "s3",
    "s3_endpoint", "s3_get", "s3_keys", "s3_make_bucket", "s3_put", "state_root", "status",
    "status_daemons_alive", "stop_pid", "up", "up_to_date", "wait_for",
]
