"""The local cluster's control plane: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok, all on 127.0.0.1 (test infrastructure).

Their argv and configs, the kubeconfigs of the admin, the restricted user and
the components, the objects the API is seeded with (fake GPU nodes, the jobs
namespace, PV/PVC, RBAC), and the start order with a readiness wait per step.
"""
from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path

from . import k8s_build, k8s_objects, k8s_pki
from .cluster_kubectl import _apply, kubectl, wait_established
from .cluster_state import _paths
from .daemons import _spawn, _wait
from .fake_pods import STAGES_FILE
from .health import _api_ready, _http_ok, _https_ok
from .k8s_objects import CORDONED_NODE, GPU_NODES, NAMESPACE, PVC_NAME, USER_NAME

ADMIN_CONTEXT = "tao-local"
USER_CONTEXT = "tao-local-restricted"
POD_CIDR = "10.244.0.0/16"
#: Secrets are encrypted at rest in etcd with this provider (what the skill tells cluster owners to enable);
#: part of the cluster's config digest, so a running cluster without it is restarted by ``up``.
ENCRYPTION_PROVIDER = "secretbox"
#: the prefix the apiserver writes in front of every encrypted value in etcd
ENCRYPTED_PREFIX = f"k8s:enc:{ENCRYPTION_PROVIDER}:v1:"
ENCRYPTION_KEY_NAME = "tao-local-1"


def _start_control_plane(data: dict, bin_dir: Path, ports: dict, mark) -> None:
    """etcd, apiserver, seeded objects, controllers, scheduler, kwok; until the fake nodes and the PVC are ready."""
    p = _paths()
    exes = data["exes"]
    _spawn("etcd", _etcd_argv(exes["etcd"], ports))
    _wait("etcd", lambda: _http_ok(f"http://127.0.0.1:{ports['etcd']}/health", want='"health":"true"'))
    mark("etcd")
    _write_encryption_config()
    _spawn("kube-apiserver", _apiserver_argv(exes["kube-apiserver"], ports))
    _wait("kube-apiserver", lambda: _api_ready(data))
    mark("kube-apiserver")
    _seed_objects(bin_dir.parent / "share" / "crds")
    mark("seed objects")
    _spawn("kube-controller-manager", _controller_manager_argv(exes["kube-controller-manager"], ports))
    _spawn("kube-scheduler", _scheduler_argv(exes["kube-scheduler"], ports))
    _spawn("kwok", [exes["kwok"], "--kubeconfig", str(p["root"] / "kwok.kubeconfig"),
                    "--config", str(p["kwok_config"])])
    _wait("kube-controller-manager", lambda: _https_ok(ports["controller_manager"]))
    _wait("kube-scheduler", lambda: _https_ok(ports["scheduler"]))
    _wait("kwok", lambda: _https_ok(ports["kwok"]))
    mark("components healthy")
    _wait("kwok", _nodes_ready, what="fake nodes Ready (kwok)")
    mark("nodes Ready")
    _wait("kube-controller-manager", _namespace_ready, what=f"PVC {PVC_NAME} in {NAMESPACE} Bound by the PV binder")
    mark("namespace ready")


def _write_kubeconfigs(server: str) -> None:
    p = _paths()
    pki = p["pki"]
    admin = (ADMIN_CONTEXT, "tao-local-admin", "admin")
    user = (USER_CONTEXT, USER_NAME, "user")
    k8s_pki.write_private(p["admin"], k8s_pki.kubeconfig(server, pki, [admin, user], ADMIN_CONTEXT, NAMESPACE))
    k8s_pki.write_private(p["user"], k8s_pki.kubeconfig(server, pki, [user], USER_CONTEXT, NAMESPACE))
    for stem in ("controller-manager", "scheduler", "kwok"):
        k8s_pki.write_private(p["root"] / f"{stem}.kubeconfig",
                              k8s_pki.kubeconfig(server, pki, [(stem, stem, stem)], stem, None))


def _write_kwok_config(port: int) -> None:
    p = _paths()
    config = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "cidr": POD_CIDR,
            "nodeIP": "127.0.0.1",
            "nodePort": port,
            "serverAddress": f"127.0.0.1:{port}",
            "tlsCertFile": str(p["pki"] / "kwok-serving.crt"),
            "tlsPrivateKeyFile": str(p["pki"] / "kwok-serving.key"),
            "manageNodesWithLabelSelector": f"{k8s_objects.FAKE_NODE_LABEL}=true",
            "enableCRDs": ["Logs", "ClusterLogs"],
            "nodeLeaseDurationSeconds": 40,
            "nodeLeaseParallelism": 4,
            "podPlayStageParallelism": 4,
            "nodePlayStageParallelism": 4,
            "podsOnNodeSyncParallelism": 4,
            # A config file skips kwok's defaulting: spell out what we rely on.
            "enableDebuggingHandlers": True,  # serves kubectl logs
            "enableProfilingHandler": False,
            "enableContentionProfiling": False,
            "enablePodsOnNodeSyncListPager": True,
            "enablePodsOnNodeSyncStreamWatch": False,
        },
    }
    stages = STAGES_FILE.read_text(encoding="utf-8")
    p["kwok_config"].write_text(json.dumps(config, indent=2) + "\n---\n" + stages, encoding="utf-8")


def encryption_config_path() -> Path:
    return _paths()["pki"] / "encryption-config.yaml"


def _write_encryption_config() -> Path:
    """Secrets encrypted at rest (secretbox), with a random 32-byte key made once per cluster and kept
    mode 600 in the private pki folder: etcd then never holds a Secret's value in plaintext."""
    path = encryption_config_path()
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    key = base64.b64encode(secrets.token_bytes(32)).decode()
    config = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "EncryptionConfiguration",
        "resources": [{
            "resources": ["secrets"],
            # the first provider encrypts every write; identity still reads anything stored before
            "providers": [{ENCRYPTION_PROVIDER: {"keys": [{"name": ENCRYPTION_KEY_NAME, "secret": key}]}},
                          {"identity": {}}],
        }],
    }
    k8s_pki.write_private(path, json.dumps(config, indent=2) + "\n")
    return path


def etcd_get(key: str) -> bytes | None:
    """The raw value etcd stores under ``key`` (e.g. ``/registry/secrets/NS/NAME``), read over etcd's v3
    HTTP gateway: what someone with etcd or its backups sees, below the apiserver. None when absent."""
    import urllib.request

    from .cluster_state import _load_cluster

    port = _load_cluster()["ports"]["etcd"]
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v3/kv/range", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        kvs = json.loads(resp.read()).get("kvs") or []
    return base64.b64decode(kvs[0].get("value") or "") if kvs else None


def _etcd_argv(exe: str, ports: dict) -> list[str]:
    client, peer = f"http://127.0.0.1:{ports['etcd']}", f"http://127.0.0.1:{ports['etcd_peer']}"
    return [exe, "--name", "tao-local", "--data-dir", str(_paths()["etcd_data"]),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"tao-local={peer}", "--initial-cluster-state", "new",
            "--unsafe-no-fsync", "--snapshot-count", "10000", "--log-level", "warn"]


def _apiserver_argv(exe: str, ports: dict) -> list[str]:
    pki = _paths()["pki"]
    issuer = "https://kubernetes.default.svc.cluster.local"
    return [exe,
            f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={ports['apiserver']}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-account-issuer={issuer}", f"--api-audiences={issuer}",
            "--authorization-mode=Node,RBAC",
            f"--encryption-provider-config={encryption_config_path()}",
            f"--service-cluster-ip-range={k8s_pki.SERVICE_CIDR}",
            "--allow-privileged=true", "--endpoint-reconciler-type=none", "--profiling=false"]


def _component_argv(exe: str, name: str, port: int) -> list[str]:
    kubeconfig = str(_paths()["root"] / f"{name}.kubeconfig")
    pki = _paths()["pki"]
    return [exe, f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1",
            f"--secure-port={port}", f"--tls-cert-file={pki / (name + '.crt')}",
            f"--tls-private-key-file={pki / (name + '.key')}", "--leader-elect=false", "--profiling=false"]


def _controller_manager_argv(exe: str, ports: dict) -> list[str]:
    pki = _paths()["pki"]
    return _component_argv(exe, "controller-manager", ports["controller_manager"]) + [
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=true",
        f"--cluster-cidr={POD_CIDR}", f"--service-cluster-ip-range={k8s_pki.SERVICE_CIDR}",
        "--controllers=*",
        # Bind the pre-made PV/PVC pair (and retry) within seconds, not the default 15 s.
        "--pvclaimbinder-sync-period=2s",
    ]


def _scheduler_argv(exe: str, ports: dict) -> list[str]:
    return _component_argv(exe, "scheduler", ports["scheduler"])


def _seed_objects(crd_dir: Path) -> None:
    kubectl("apply", *[a for f in sorted(crd_dir.glob("*.yaml")) for a in ("-f", str(f))])
    wait_established(["logs.kwok.x-k8s.io", "clusterlogs.kwok.x-k8s.io"])
    version = k8s_build.pins()["version"]
    nodes = [k8s_objects.node(n, kubelet_version=version) for n in GPU_NODES]
    nodes.append(k8s_objects.node(CORDONED_NODE, kubelet_version=version, unschedulable=True))
    _apply(k8s_objects.namespace() + k8s_objects.rbac() + k8s_objects.storage(str(_paths()["pv"]))
           + [k8s_objects.cluster_logs(str(_paths()["pod_logs"] / "default.log"))] + nodes)


def _nodes_ready() -> bool:
    res = kubectl("get", "nodes", "-o", "json", check=False)
    if not res.ok:
        return False
    ready = {
        item["metadata"]["name"]
        for item in json.loads(res.stdout)["items"]
        for cond in item.get("status", {}).get("conditions", [])
        if cond.get("type") == "Ready" and cond.get("status") == "True"
    }
    return ready >= set(GPU_NODES) | {CORDONED_NODE}


def _namespace_ready() -> bool:
    if not kubectl("-n", NAMESPACE, "get", "serviceaccount", "default", check=False).ok:
        return False
    res = kubectl("-n", NAMESPACE, "get", "pvc", PVC_NAME, "-o", "jsonpath={.status.phase}", check=False)
    return res.ok and res.stdout.strip() == "Bound"
