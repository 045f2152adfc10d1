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
steered by the pod annotations below (put them in a Job's pod template).
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

from taobank import BANK_ROOT
from taobank.errors import TaoError
from taobank.run import run
from .. import apt
from . import images, k8s_build, k8s_objects, k8s_pki, realnodes, s3
from .k8s_objects import (  # noqa: F401  (re-exported: the names tests and skills use)
    CORDONED_NODE, FAKE_NODE_LABEL, FAKE_PREFIX, GPU_NODES, GPU_RESOURCE, GPUS_PER_NODE, NAMESPACE, PV_NAME,
    PVC_NAME, USER_NAME, busy_pod, cri_log, pod_logs,
)
from .images import HANG_IMAGE  # noqa: F401
from .realnodes import REAL_NODE_LABEL, REAL_NODES  # noqa: F401
from ..procs import live_pid, log_tail, pid_runs, stop_pid, wait_for

# -- the contract other engineers code against --------------------------------

#: Go duration ("3s") a fake pod waits before Running (default 1s).
START_DELAY_ANNOTATION = FAKE_PREFIX + "start-delay"
#: Go duration a fake Job pod stays Running before it ends (default 6s).
RUN_DURATION_ANNOTATION = FAKE_PREFIX + "run-duration"
#: Non-zero exit code ("3"): the container terminates with it and the pod is Failed.
FAIL_EXIT_CODE_ANNOTATION = FAKE_PREFIX + "exit-code"
#: Terminated reason ("OOMKilled", "Error", ...): the pod is Failed with it.
FAIL_REASON_ANNOTATION = FAKE_PREFIX + "fail-reason"
#: "true": a Job pod never finishes (cancel/delete tests).
KEEP_RUNNING_ANNOTATION = FAKE_PREFIX + "keep-running"
#: Waiting reason ("ImagePullBackOff", "CreateContainerConfigError", ...): the pod stays Pending with it.
WAITING_REASON_ANNOTATION = FAKE_PREFIX + "waiting-reason"
#: Message of that waiting state (optional).
WAITING_MESSAGE_ANNOTATION = FAKE_PREFIX + "waiting-message"
OOM_REASON = "OOMKilled"
OOM_EXIT_CODE = 137
DEFAULT_START_DELAY_S = 1
DEFAULT_RUN_DURATION_S = 6

ADMIN_CONTEXT = "tao-local"
USER_CONTEXT = "tao-local-restricted"
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

DAEMONS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
STAGES_FILE = BANK_ROOT / "testclusters" / "kubernetes" / "kwok" / "stages.yaml"
POD_CIDR = "10.244.0.0/16"

START_TIMEOUT_S = {"etcd": 60, "kube-apiserver": 180, "kube-controller-manager": 90,
                   "kube-scheduler": 90, "kwok": 90}
DEFAULT_START_TIMEOUT_S = 90
#: Debian packages of the real nodes; those in NODE_PINNED must match versions.yaml.
NODE_PACKAGES = ("containerd", "runc", "containernetworking-plugins", "umoci", "skopeo", "docker-registry",
                 "busybox-static", "apache2-utils", "iproute2", "openssl")
NODE_PINNED = {pkg: f"test_clusters.kubernetes.debs.{pkg}"
               for pkg in ("containerd", "runc", "umoci", "skopeo", "docker-registry")}
#: Images only the credential-checking registry serves (a pull needs the pull Secret).
REGISTRY_ONLY = ("tao_toolkit",)


def node_daemons() -> tuple[str, ...]:
    """Daemons of the real nodes, in start order."""
    return (("registry", "coredns", "s3") + tuple(f"containerd-{n}" for n in REAL_NODES)
            + tuple(f"kubelet-{n}" for n in REAL_NODES))


def all_daemons() -> tuple[str, ...]:
    return DAEMONS + node_daemons()


# -- layout ------------------------------------------------------------------

def state_root() -> Path:
    base = os.environ.get("TAO_LOCAL_CLUSTER_DIR") or os.path.join(
        os.path.expanduser("~"), ".local", "state", "tao-skill-bank", "clusters")
    return Path(base) / "kubernetes"


def _paths(root: Path | None = None) -> dict[str, Path]:
    root = root or state_root()
    return {
        "root": root,
        "cluster": root / "cluster.json",
        "pki": root / "pki",
        "admin": root / "admin.kubeconfig",
        "user": root / "user.kubeconfig",
        "kwok_config": root / "kwok.yaml",
        "etcd_data": root / "etcd",
        "logs": root / "logs",
        "run": root / "run",
        "pv": root / "pv",
        "pod_logs": root / "pod-logs",
        "nodes": root / "nodes",
        "registry": root / "registry",
        "dns": root / "dns",
    }


def _log(name: str) -> Path:
    return _paths()["logs"] / f"{name}.log"


def _pidfile(name: str) -> Path:
    return _paths()["run"] / f"{name}.pid"


def _load_cluster() -> dict:
    try:
        return json.loads(_paths()["cluster"].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _save_cluster(data: dict) -> None:
    path = _paths()["cluster"]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


# -- public API --------------------------------------------------------------

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
    }


def _kubectl_binary() -> str:
    return _load_cluster().get("kubectl") or str(k8s_build.build_dir() / "bin" / "kubectl")


def status() -> dict:
    """Daemon pids, the API address, versions, and ``ready`` (all alive and /readyz ok)."""
    data = _load_cluster()
    daemons = {}
    for name in all_daemons():
        exe = data.get("exes", {}).get(name)
        daemons[name] = live_pid(_pidfile(name), exe) if exe else None
    # ready_at is written only after every readiness check of up() passed.
    ready = bool(data.get("ready_at")) and all(daemons.values()) and _api_ready(data)
    return {
        "ready": ready,
        "server": data.get("server"),
        "version": data.get("pins", {}).get("version"),
        "pids": daemons,
        "state_dir": str(state_root()),
        "kubeconfig": str(_paths()["admin"]),
    }


def up() -> dict[str, str]:
    """Start the cluster (idempotent: a ready cluster is left alone) and wait for readiness."""
    root = state_root()
    root.parent.mkdir(parents=True, exist_ok=True)
    with _state_lock(root):
        pins = k8s_build.pins()
        if up_to_date(pins):
            return env()
        found, _ = apt.ensure(NODE_PACKAGES, "Kubernetes cluster's real nodes")
        apt.check_pins(found, NODE_PINNED)
        bin_dir = k8s_build.ensure_binaries(pins) / "bin"
        node_bin = k8s_build.ensure_node_binaries(pins) / "bin"
        s3.ensure_venv(_image_pins()["moto"])
        for attempt in (1, 2):
            _stop_all()
            shutil.rmtree(root, ignore_errors=True)
            try:
                _start(bin_dir, node_bin)
                break
            except TaoError as exc:
                _stop_all()  # keep logs and state for the post-mortem; the next up wipes them
                if attempt == 2 or not _lost_port_race():
                    raise exc from None
            except BaseException:
                _stop_all()
                raise
    return env()


def up_to_date(pins: dict | None = None) -> bool:
    """Ready, and started with the current pins, images and Stages: ``up`` then changes nothing (else it restarts)."""
    return bool(status()["ready"]) and _load_cluster().get("config") == _config_digest(pins or k8s_build.pins())


def _state_lock(root: Path):
    """The lock of one state folder (up and down); says so when another up/down holds it."""
    return k8s_build._locked(root.parent / "kubernetes.lock", _paths(root)["logs"],
                             f"an up/down of the cluster in {root}")


def _config_digest(pins: dict) -> str:
    """Changes when the pins, the images or the kwok Stages change: a running cluster is then restarted."""
    import hashlib

    preload, served = _images()
    blob = (json.dumps([pins, _image_pins(), [i.key() for i in preload + served]], sort_keys=True).encode()
            + STAGES_FILE.read_bytes())
    return hashlib.sha256(blob).hexdigest()[:16]


def _lost_port_race() -> bool:
    """True when a daemon died because another process took its free port first (retry once)."""
    for name in all_daemons():
        try:
            if "address already in use" in _log(name).read_text(encoding="utf-8", errors="replace"):
                return True
        except OSError:
            pass
    return False


def down() -> None:
    """Stop every daemon this module started (by pid file) and remove the cluster state."""
    root = state_root()
    root.parent.mkdir(parents=True, exist_ok=True)
    with _state_lock(root):
        _stop_all()
        shutil.rmtree(root, ignore_errors=True)


# -- start -------------------------------------------------------------------

def _free_ports_on(host: str, n: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _free_ports(n: int) -> list[int]:
    return _free_ports_on("127.0.0.1", n)


def _start(bin_dir: Path, node_bin: Path) -> None:
    t0 = time.monotonic()
    p = _paths()
    for key in ("root", "logs", "run", "pv", "pod_logs", "etcd_data", "nodes", "registry", "dns"):
        p[key].mkdir(parents=True, exist_ok=True)
    os.chmod(p["root"], 0o700)
    os.chmod(p["etcd_data"], 0o700)
    pins = k8s_build.pins()
    names = ("etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kwok")
    ports = dict(zip(names, _free_ports(len(names))))
    server = f"https://127.0.0.1:{ports['apiserver']}"
    k8s_pki.make_pki(p["pki"], USER_NAME, k8s_objects.USER_GROUP)
    _write_kubeconfigs(server)
    exes = {name: str(bin_dir / name) for name in DAEMONS}
    data = {"pins": pins, "ports": ports, "server": server, "exes": exes, "bin_dir": str(bin_dir),
            "kubectl": str(bin_dir / "kubectl"), "config": _config_digest(pins)}
    _save_cluster(data)
    (p["pod_logs"] / "default.log").write_text(k8s_objects.cri_log([
        "[tao-local] fake container on a kwok node: no process ran, this is canned log text",
    ]), encoding="utf-8")
    _write_kwok_config(ports["kwok"])

    phases = data["phases_s"] = {}

    def mark(phase: str) -> None:
        phases[phase] = round(time.monotonic() - t0, 1)

    mark("pki")
    plan = _prepare_real_nodes(data, node_bin)
    mark("node runtimes spawned")
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        loading = pool.submit(_load_images, plan)
        _start_control_plane(data, bin_dir, ports, mark)
        loading.result()
    mark("images loaded")
    _start_kubelets(data, plan)
    mark("real nodes Ready")
    data["started_s"] = round(time.monotonic() - t0, 1)
    data["ready_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _save_cluster(data)


def _start_control_plane(data: dict, bin_dir: Path, ports: dict, mark) -> None:
    """etcd, apiserver, seeded objects, controllers, scheduler, kwok; until the fake nodes and the PVC are ready."""
    p = _paths()
    exes = data["exes"]
    _spawn("etcd", _etcd_argv(exes["etcd"], ports))
    _wait("etcd", lambda: _http_ok(f"http://127.0.0.1:{ports['etcd']}/health", want='"health":"true"'))
    mark("etcd")
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


def _spawn(name: str, argv: list[str]) -> None:
    """Start a daemon detached from this process (own session), log to logs/<name>.log, record its pid."""
    with open(_log(name), "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    _pidfile(name).write_text(f"{proc.pid}\n", encoding="utf-8")


def _wait(name: str, check, what: str | None = None) -> None:
    timeout = START_TIMEOUT_S.get(name, DEFAULT_START_TIMEOUT_S)
    exe = _load_cluster().get("exes", {}).get(name, "")

    def alive_and_ok() -> bool:
        if not pid_runs(int(_pidfile(name).read_text().strip() or 0), exe):
            raise _Died()
        return check()

    try:
        ok = wait_for(alive_and_ok, timeout, interval=0.25)
    except _Died:
        raise TaoError(f"{name} exited during start-up: see {_log(name)} (last line: {log_tail(_log(name))})") from None
    if not ok:
        goal = f" ({what})" if what else ""
        raise TaoError(f"{name} did not come up within {timeout}s{goal}: see {_log(name)} "
                       f"(last line: {log_tail(_log(name))})")


class _Died(Exception):
    pass


def _stop_all() -> None:
    data = _load_cluster()
    exes = data.get("exes", {})
    _stop_real_nodes(data)
    for name in reversed(DAEMONS):
        pidfile = _pidfile(name)
        pid = live_pid(pidfile, exes[name]) if name in exes else None
        if pid:
            stop_pid(pid, exes[name], grace=15.0)
        pidfile.unlink(missing_ok=True)


# -- readiness ---------------------------------------------------------------

def _http_ok(url: str, want: str = "ok", context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as resp:  # noqa: S310 (loopback only)
            return resp.status == 200 and want in resp.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return False


def _https_ok(port: int) -> bool:
    """A component's /healthz (its serving cert is ours; only liveness matters here)."""
    ctx = ssl.create_default_context(cafile=str(_paths()["pki"] / "ca.crt"))
    return _http_ok(f"https://127.0.0.1:{port}/healthz", context=ctx)


def _api_ready(data: dict) -> bool:
    server = data.get("server")
    pki = _paths()["pki"]
    if not server or not (pki / "admin.crt").exists():
        return False
    try:
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    except (OSError, ssl.SSLError):
        return False
    return _http_ok(f"{server}/readyz", context=ctx)


def kubectl(*args: str, stdin: str | None = None, check: bool = True, timeout: float = 60,
            kubeconfig: Path | None = None):
    """Run the cluster's own kubectl (server's version) as admin (or with ``kubeconfig``)."""
    cfg = kubeconfig or _paths()["admin"]
    return run([_kubectl_binary(), "--kubeconfig", str(cfg), *args], stdin=stdin, check=check, timeout=timeout)


def _apply(objs: list[dict]) -> None:
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))


def _seed_objects(crd_dir: Path) -> None:
    kubectl("apply", *[a for f in sorted(crd_dir.glob("*.yaml")) for a in ("-f", str(f))])
    kubectl("wait", "--for=condition=Established", "--timeout=60s",
            "crd/logs.kwok.x-k8s.io", "crd/clusterlogs.kwok.x-k8s.io", timeout=90)
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


# -- real nodes ----------------------------------------------------------------

def s3_endpoint() -> str:
    return _load_cluster()["s3_endpoint"]


def s3_make_bucket(bucket: str) -> None:
    data = _load_cluster()
    s3.make_bucket(data["s3_python"], data["s3_endpoint"], bucket)


def s3_put(bucket: str, key: str, body: str) -> None:
    data = _load_cluster()
    s3.put(data["s3_python"], data["s3_endpoint"], bucket, key, body)


def s3_get(bucket: str, key: str) -> str:
    data = _load_cluster()
    return s3.get(data["s3_python"], data["s3_endpoint"], bucket, key)


def s3_keys(bucket: str, prefix: str = "") -> list[str]:
    data = _load_cluster()
    return s3.keys(data["s3_python"], data["s3_endpoint"], bucket, prefix)


def forget_image(ref: str) -> None:
    """Remove ``ref`` from every real node's containerd, so the next pod that uses it must pull it."""
    for n in _real_nodes(_load_cluster()):
        _ctr(n, "images", "rm", ref, check=False)


def running_containers() -> set[str]:
    """IDs of the containers that have a running task on some real node (to prove a kill)."""
    ids: set[str] = set()
    for n in _real_nodes(_load_cluster()):
        res = _ctr(n, "tasks", "ls", check=False, timeout=30)
        for line in res.stdout.splitlines()[1:] if res.ok else []:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "RUNNING":
                ids.add(parts[0])
    return ids


def _stop_daemon(name: str, exe: str | None, grace: float = 15.0) -> None:
    pidfile = _pidfile(name)
    pid = live_pid(pidfile, exe) if exe else None
    if pid:
        stop_pid(pid, exe, grace=grace)
    pidfile.unlink(missing_ok=True)


def _real_nodes(data: dict) -> list[realnodes.Node]:
    return [realnodes.Node(name, i, Path(n["dir"]), n["ip"], n["kubelet_port"], n["healthz_port"],
                           Path(n.get("run_dir") or Path(n["dir"]) / "containerd"),
                           Path(n.get("kubelet_dir") or Path(n["dir"]) / "kubelet"))
            for i, (name, n) in enumerate(sorted(data.get("nodes", {}).items()))]


def _ctr(node: realnodes.Node, *args: str, check: bool = True, timeout: float = 120):
    return run(["ctr", "--address", str(node.socket), "--namespace", "k8s.io", *args], check=check,
               timeout=timeout, what=f"ctr ({node.name})")


def _prepare_real_nodes(data: dict, node_bin: Path) -> dict:
    """Bridge, folders, certificates and configs; spawn the registry, S3 and one containerd per node.

    Needs no API server, so it runs before the control plane starts; returns what the later steps use.
    """
    p = _paths()
    pki = p["pki"]
    net = realnodes.plan_network(p["root"])
    data["net"] = {"bridge": net.bridge, "prefix": net.prefix, "gateway": net.gateway}
    _save_cluster(data)  # the bridge is ours from here on: down removes it
    realnodes.ensure_bridge(net, len(REAL_NODES))
    ports = _free_ports(3 + 2 * len(REAL_NODES))
    registry_port, dns_ready, dns_health = ports[:3]
    s3_port = _free_ports_on(net.gateway, 1)[0]
    data["s3_endpoint"] = f"http://{net.gateway}:{s3_port}"
    data["s3_python"] = str(s3.ensure_venv(_image_pins()["moto"]))
    registry = f"127.0.0.1:{registry_port}"
    run_base, lib_base = realnodes.short_dirs(p["root"])
    data["short_dirs"] = [str(run_base), str(lib_base)]
    nodes = [realnodes.Node(name, i, p["nodes"] / name, net.node_ip(i), ports[3 + 2 * i], ports[4 + 2 * i],
                            run_base / name, lib_base / name)
             for i, name in enumerate(REAL_NODES)]
    data["nodes"] = {n.name: {"dir": str(n.dir), "ip": n.ip, "kubelet_port": n.kubelet_port,
                              "healthz_port": n.healthz_port, "run_dir": str(n.run_dir),
                              "kubelet_dir": str(n.kubelet_dir), "cgroup": realnodes.cgroup_root(p["root"], n.name)}
                     for n in nodes}
    data["registry"] = registry
    exes = data["exes"]
    exes.update({"registry": _which("docker-registry"), "coredns": str(node_bin / "coredns"),
                 "s3": os.path.realpath(data["s3_python"])})
    for n in nodes:
        exes[f"containerd-{n.name}"] = _which("containerd")
        exes[f"kubelet-{n.name}"] = str(node_bin / "kubelet")
    _save_cluster(data)

    _start_registry(registry_port)
    _spawn("s3", s3.server_argv(Path(data["s3_python"]), net.gateway, s3_port))
    for n in nodes:
        _write_node_files(n, net, registry, data["nodes"][n.name]["cgroup"])
        _spawn(f"containerd-{n.name}", realnodes.containerd_argv(n))
    k8s_pki.issue(pki, k8s_pki.Cert("coredns", "tao-local-coredns", "system:masters"))
    k8s_pki.write_private(p["dns"] / "coredns.kubeconfig",
                          k8s_pki.kubeconfig(data["server"], pki, [("coredns", "coredns", "coredns")], "coredns"))
    (p["dns"] / "Corefile").write_text(
        realnodes.corefile(net.gateway, p["dns"] / "coredns.kubeconfig", dns_ready, dns_health), encoding="utf-8")
    return {"nodes": nodes, "registry_port": registry_port, "dns_ready": dns_ready}


def _load_images(plan: dict) -> None:
    """Build (cached) and hand out the images: push the registry-only ones, import the rest on every node.

    Runs in a thread while the control plane starts: it only waits and runs clients, never writes cluster.json.
    """
    nodes, registry_port = plan["nodes"], plan["registry_port"]
    registry = f"127.0.0.1:{registry_port}"
    preload, served = _images()
    archives = {img.ref: images.archive(img) for img in preload + served}
    _wait("registry", lambda: _registry_answers(registry_port))
    for img in served:
        _push(archives[img.ref], registry, realnodes.registry_path(img.ref))
    for n in nodes:
        _wait(f"containerd-{n.name}", lambda n=n: _ctr(n, "version", check=False, timeout=10).ok)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(nodes) * len(preload)) as pool:  # I/O bound: one ctr per image and node
        jobs = [pool.submit(_ctr, n, "images", "import", str(archives[img.ref])) for n in nodes for img in preload]
        for job in jobs:
            job.result()


def _start_kubelets(data: dict, plan: dict) -> None:
    """CoreDNS and the kubelets (they need the API server and the images); then fake GPUs on Ready nodes."""
    nodes, dns_ready = plan["nodes"], plan["dns_ready"]
    exes = data["exes"]
    dns = _paths()["dns"]
    _spawn("coredns", [exes["coredns"], "-conf", str(dns / "Corefile"), "-dns.port", "53"])
    for n in nodes:
        _spawn(f"kubelet-{n.name}", realnodes.kubelet_argv(exes[f"kubelet-{n.name}"], n, GPUS_PER_NODE,
                                                            k8s_objects.GPU_PRODUCT))
    _wait("coredns", lambda: _http_ok(f"http://127.0.0.1:{dns_ready}/ready", want="OK"))
    _wait("s3", lambda: _http_ok(data["s3_endpoint"] + "/", want="ListAllMyBucketsResult"))
    for n in nodes:
        _wait(f"kubelet-{n.name}", lambda n=n: _node_ready(n.name), what=f"node {n.name} Ready")
    _apply_fake_gpus(nodes)
    _wait(f"kubelet-{nodes[-1].name}", lambda: all(_node_gpus(n.name) == GPUS_PER_NODE for n in nodes),
          what=f"{GPU_RESOURCE} allocatable on the real nodes")


def _which(program: str) -> str:
    found = shutil.which(program)
    if not found:
        raise TaoError(f"{program} not found: apt-get install containerd runc containernetworking-plugins "
                       "docker-registry umoci skopeo busybox-static apache2-utils")
    return os.path.realpath(found)


def _images() -> tuple[list[images.Image], list[images.Image]]:
    """(imported on every real node, served only by the credential-checking registry)."""
    pins = _image_pins()
    preload = [images.pause(), images.busybox(pins["busybox"]), images.s3_client(pins["s3_client"], pins["awscli"]),
               images.hanging_torchrun()]
    return preload, [images.busybox(pins[k]) for k in REGISTRY_ONLY]


def _image_pins() -> dict[str, str]:
    from taobank import pins as pinsmod

    return {"busybox": str(pinsmod.resolve("images.busybox")),
            "tao_toolkit": str(pinsmod.resolve("images.tao_toolkit.pyt")),
            "s3_client": str(pinsmod.resolve("images.s3_client")),
            "awscli": str(pinsmod.resolve("test_clusters.kubernetes.awscli")),
            "moto": str(pinsmod.resolve("test_clusters.kubernetes.moto"))}


def _write_node_files(node: realnodes.Node, net: realnodes.Net, registry: str, cgroup: str) -> None:
    p = _paths()
    for d in ("containerd", "cni/net.d", "cni/ipam", "pod-logs", "volume-plugins"):
        (node.dir / d).mkdir(parents=True, exist_ok=True)
    for d in (node.run_dir, node.kubelet_dir):
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o700)
    os.chmod(node.dir, 0o700)
    (node.dir / "containerd.toml").write_text(
        realnodes.containerd_config(node, images.PAUSE_IMAGE, registry, p["pki"] / "ca.crt"), encoding="utf-8")
    (node.dir / "cni" / "net.d" / "10-tao-local.conflist").write_text(
        json.dumps(realnodes.cni_conflist(net, node), indent=2) + "\n", encoding="utf-8")
    (node.dir / "resolv.conf").write_text("", encoding="utf-8")
    (node.dir / "kubelet.yaml").write_text(json.dumps(realnodes.kubelet_config(
        node, ca_file=p["pki"] / "ca.crt", cgroup=cgroup, dns_ip=net.gateway), indent=2) + "\n", encoding="utf-8")
    stem = f"kubelet-{node.name}"
    k8s_pki.issue(p["pki"], k8s_pki.Cert(stem, f"system:node:{node.name}", "system:nodes"))
    k8s_pki.write_private(node.dir / "kubelet.kubeconfig", k8s_pki.kubeconfig(
        _load_cluster()["server"], p["pki"], [(node.name, f"system:node:{node.name}", stem)], node.name))
    realnodes.make_cgroup_roots(cgroup)


def _start_registry(port: int) -> None:
    """docker-registry on loopback: TLS from the cluster CA, one htpasswd user with a random password."""
    import secrets

    d = _paths()["registry"]
    (d / "storage").mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    pki = _paths()["pki"]
    k8s_pki.issue(pki, k8s_pki.Cert("registry", "tao-local-registry", server=True, client=False,
                                    sans=k8s_pki.LOOPBACK_SANS))
    key = secrets.token_urlsafe(24)
    k8s_pki.write_private(d / "ngc-key", key)
    res = run(["htpasswd", "-niB", realnodes.REGISTRY_USER], stdin=key + "\n", timeout=60, what="htpasswd")
    k8s_pki.write_private(d / "htpasswd", res.stdout.strip() + "\n")
    config = realnodes.registry_config(d / "storage", port, pki / "registry.crt", pki / "registry.key",
                                       d / "htpasswd")
    (d / "config.yml").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    import base64

    auth = base64.b64encode(f"{realnodes.REGISTRY_USER}:{key}".encode()).decode()
    k8s_pki.write_private(d / "auth.json", json.dumps({"auths": {f"127.0.0.1:{port}": {"auth": auth}}}))
    (d / "certs").mkdir(exist_ok=True)
    shutil.copyfile(pki / "ca.crt", d / "certs" / "ca.crt")
    _spawn("registry", [_which("docker-registry"), "serve", str(d / "config.yml")])


def _registry_answers(port: int) -> bool:
    """The registry is up when /v2/ answers 401 (it demands credentials)."""
    import urllib.error

    ctx = ssl.create_default_context(cafile=str(_paths()["pki"] / "ca.crt"))
    try:
        urllib.request.urlopen(f"https://127.0.0.1:{port}/v2/", timeout=3, context=ctx)  # noqa: S310
    except urllib.error.HTTPError as exc:
        return exc.code == 401
    except (OSError, ValueError):
        return False
    return False


def _push(archive: Path, registry: str, path: str) -> None:
    d = _paths()["registry"]
    run(["skopeo", "copy", "--quiet", "--dest-authfile", str(d / "auth.json"), "--dest-cert-dir", str(d / "certs"),
         f"oci-archive:{archive}", f"docker://{registry}/{path}"], timeout=300, what=f"skopeo copy to {path}")


def _node_ready(name: str) -> bool:
    res = kubectl("get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
                  check=False, timeout=20)
    return res.ok and res.stdout.strip() == "True"


def _node_gpus(name: str) -> int:
    res = kubectl("get", "node", name, "-o", "json", check=False, timeout=20)
    if not res.ok:
        return -1
    alloc = json.loads(res.stdout).get("status", {}).get("allocatable", {})
    return int(alloc.get(GPU_RESOURCE, "0") or 0)


def _apply_fake_gpus(nodes: list[realnodes.Node]) -> None:
    """Advertise GPUs the real kubelets do not have (an extended resource kept across status updates)."""
    patch = json.dumps({"status": {"capacity": {GPU_RESOURCE: str(GPUS_PER_NODE)},
                                   "allocatable": {GPU_RESOURCE: str(GPUS_PER_NODE)}}})
    for n in nodes:
        kubectl("patch", "node", n.name, "--subresource=status", "--type=merge", "-p", patch)


def _stop_real_nodes(data: dict) -> None:
    """Pods first (through the kubelets), then kubelets, leftover containers, containerd, DNS, registry."""
    nodes = _real_nodes(data)
    exes = data.get("exes", {})
    if nodes and status_daemons_alive(data, [f"kubelet-{n.name}" for n in nodes] + ["kube-apiserver"]):
        for n in nodes:
            kubectl("delete", "pods", "--all-namespaces", f"--field-selector=spec.nodeName={n.name}",
                    "--grace-period=1", "--timeout=30s", check=False, timeout=45)
    for n in nodes:
        _stop_daemon(f"kubelet-{n.name}", exes.get(f"kubelet-{n.name}"))
    for n in nodes:
        if live_pid(_pidfile(f"containerd-{n.name}"), exes.get(f"containerd-{n.name}", "")):
            _remove_containers(n)
        _stop_daemon(f"containerd-{n.name}", exes.get(f"containerd-{n.name}"))
    for name in ("s3", "coredns", "registry"):
        _stop_daemon(name, exes.get(name))
    for d in [_paths()["root"]] + [Path(s) for s in data.get("short_dirs", [])]:
        _unmount_under(d)
    for d in data.get("short_dirs", []):
        shutil.rmtree(d, ignore_errors=True)
        try:
            Path(d).parent.rmdir()  # /run/tao-local, /var/lib/tao-local: only when no other cluster uses them
        except OSError:
            pass
    for n in data.get("nodes", {}).values():
        realnodes.remove_cgroup_roots(n["cgroup"])
    if data.get("net", {}).get("bridge"):
        realnodes.remove_bridge(data["net"]["bridge"])


def status_daemons_alive(data: dict, names: list[str]) -> bool:
    exes = data.get("exes", {})
    return all(name in exes and live_pid(_pidfile(name), exes[name]) for name in names)


def _remove_containers(node: realnodes.Node) -> None:
    """Kill what the kubelet left (its pods were deleted first); free the sandboxes' network namespaces."""
    res = _ctr(node, "containers", "ls", "-q", check=False, timeout=30)
    netns = []
    for cid in res.stdout.split() if res.ok else []:
        info = _ctr(node, "containers", "info", cid, check=False, timeout=30)
        if info.ok:
            try:
                spaces = json.loads(info.stdout).get("Spec", {}).get("linux", {}).get("namespaces", [])
            except ValueError:
                spaces = []
            netns += [s["path"] for s in spaces if s.get("type") == "network" and s.get("path")]
        _ctr(node, "tasks", "kill", "--signal", "SIGKILL", cid, check=False, timeout=30)
        _ctr(node, "tasks", "delete", "--force", cid, check=False, timeout=30)
        _ctr(node, "containers", "delete", cid, check=False, timeout=30)
    for path in netns:
        if path.startswith(("/var/run/netns/", "/run/netns/")):
            subprocess.run(["umount", path], capture_output=True, timeout=30)
            Path(path).unlink(missing_ok=True)


def _unmount_under(root: Path) -> None:
    """Lazy-unmount whatever containerd/kubelet left mounted below the state folder (deepest first)."""
    prefix = str(root.resolve()) + "/"
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    points = []
    for line in lines:
        point = line.split()[4].encode().decode("unicode_escape")
        if point.startswith(prefix):
            points.append(point)
    for point in sorted(set(points), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=30)
