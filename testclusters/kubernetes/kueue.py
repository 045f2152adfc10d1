"""Kueue on the local cluster: its objects rendered from the module's own config, and the controller manager as a
host process whose webhooks the API server reaches by URL (test infrastructure).

How it runs (the choice, and why):

- Kueue's controller manager runs on this host, like the other control-plane daemons (pid file, log, the cluster's
  PKI): the API server calls its webhooks at ``https://127.0.0.1:<port>/<path>`` and trusts them through
  ``caBundle`` = the cluster CA, which signs Kueue's serving certificate (:mod:`.k8s_pki`). No image, no Service,
  no cert rotation (``internalCertManagement`` off): nothing here could serve a Service's ClusterIP anyway.
- CRDs, ClusterRoles and webhook configurations are the module's ``config/components`` (read as data, what
  kustomize's ``config/default`` would do to them: the ``kueue-`` name prefix, the conversion webhook patches,
  ``clientConfig``), never hand-written.
- The cluster is shared by every test, and Kueue's Job webhooks would see EVERY ``batch/v1`` Job with
  ``failurePolicy: Fail``: a Kueue that is down or restarting would then refuse all Job creates. Only the
  integration the bank uses (``batch/job``) is enabled, ``manageJobsWithoutQueueName`` stays false (Kueue leaves an
  unlabelled Job alone anyway), and the Job webhooks get an ``objectSelector`` on the ``kueue.x-k8s.io/queue-name``
  label: the API server does not call Kueue for an unlabelled Job at all, while a labelled one still fails closed
  (it must never run unadmitted). The catch: Kueue's own default-LocalQueue defaulting of unlabelled Jobs is off;
  the bank labels a Job for a namespace's ``default`` LocalQueue itself. ``up`` health-checks Kueue and restarts it
  alone when it is down.
- The visibility API server (pending-workload positions) is off (``VisibilityOnDemand=false``): it needs an
  APIService and a Service; status reads Workload conditions instead.
- Kueue (v0.17) always opens ``/etc/kueue/metrics/certs/tls.{crt,key}`` when its own cert management is off, even
  with metrics disabled; that path is a symlink to the state folder's certificate folder (the key stays there).
"""
from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import yaml

from taobank.errors import TaoError
from ..procs import live_pid
from . import k8s_pki
from .cluster_kubectl import kubectl, wait_established
from .cluster_state import _load_cluster, _log, _paths, _pidfile, _save_cluster
from .health import _http_ok
from .k8s_objects import GPU_RESOURCE, GPUS_PER_NODE, NAMESPACE, USER_NAME

NAME = "kueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
API = "kueue.x-k8s.io/v1beta2"
SYSTEM_NAMESPACE = "kueue-system"
PREFIX = "kueue-"
#: The identity Kueue's client certificate carries (bound to the module's manager-role).
CONTROLLER_USER = "kueue-controller"
#: The local cluster's own queue: a user can try ``--queue tao-local`` (not named ``default``: the bank would
#: then send every other test's Job in the namespace through it).
LOCAL_QUEUE = "tao-local"
LOCAL_FLAVOR = "tao-local-gpu"
#: Integrations enabled: the bank makes batch/v1 Jobs only.
FRAMEWORKS = ("batch/job",)
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
#: Webhook paths kept: Kueue's own kinds and the batch/v1 Job (the other integrations are off).
_KEEP = ("-kueue-x-k8s-io-", "-batch-v1-job")
SYSTEM_NAMESPACES = ("kube-system", SYSTEM_NAMESPACE)
START_TIMEOUT_S = 120


# -- the objects, as data (pure: tests render them from a config folder) ---------------------------------------

def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def _resources(folder: Path) -> list[str]:
    """The ``resources:`` of a kustomization (file names, in order)."""
    return list((yaml.safe_load((folder / "kustomization.yaml").read_text(encoding="utf-8")) or {})
                .get("resources") or [])


def _prefixed(name: str) -> str:
    return name if name.startswith(PREFIX) else PREFIX + name


def crds(config: Path, webhook_url: str, ca_bundle: str) -> list[dict]:
    """The CRDs of ``config/crd`` with the conversion webhook of its ``patches/webhook_in_*`` patches pointing at
    ``webhook_url`` (what kustomize renders, with a URL in place of the Service)."""
    folder = config / "crd"
    kust = yaml.safe_load((folder / "kustomization.yaml").read_text(encoding="utf-8")) or {}
    converted = set()
    for patch in kust.get("patches") or []:
        path = patch.get("path") if isinstance(patch, dict) else None
        if path and Path(path).name.startswith("webhook_in_"):
            converted |= {d["metadata"]["name"] for d in _docs(folder / path)}
    out = []
    for res in _resources(folder):
        for doc in _docs(folder / res):
            if doc["metadata"]["name"] in converted:
                doc["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                    "clientConfig": {"url": webhook_url + "/convert", "caBundle": ca_bundle},
                    "conversionReviewVersions": ["v1"]}}
            out.append(doc)
    missing = converted - {d["metadata"]["name"] for d in out}
    if missing or not out:
        raise TaoError(f"Kueue's config/crd lists no CRD for {sorted(missing) or 'anything'}: a changed layout")
    return out


def rbac(config: Path) -> list[dict]:
    """Every Role, ClusterRole and binding of ``config/rbac`` as ``config/default`` names them (``kueue-`` prefix,
    namespace ``system`` -> kueue-system); the bindings' ServiceAccount ``controller-manager`` is Kueue's user here
    (a host process authenticates with its client certificate)."""
    out = []
    for res in _resources(config / "rbac"):
        for doc in _docs(config / "rbac" / res):
            kind, meta = doc.get("kind"), doc["metadata"]
            if kind not in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
                continue
            meta["name"] = _prefixed(meta["name"])
            if kind in ("Role", "RoleBinding"):
                meta["namespace"] = SYSTEM_NAMESPACE
            if kind.endswith("Binding"):
                doc["roleRef"]["name"] = _prefixed(doc["roleRef"]["name"])
                doc["subjects"] = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": CONTROLLER_USER}
                                   if s.get("kind") == "ServiceAccount" else s for s in doc.get("subjects") or []]
            out.append(doc)
    names = {(d["kind"], d["metadata"]["name"]) for d in out}
    if not {("ClusterRole", PREFIX + "manager-role"), ("ClusterRoleBinding", PREFIX + "manager-rolebinding")} <= names:
        raise TaoError("Kueue's config/rbac has no manager-role and its binding: a changed layout")
    return out


def bindings(user: str = USER_NAME, namespace: str = NAMESPACE) -> list[dict]:
    """The local restricted user made a batch user of the jobs namespace (submit to its LocalQueues, read its
    Workloads) and a viewer of ClusterQueues (quota and usage in preflight): Kueue's own user-facing roles."""
    group = "rbac.authorization.k8s.io"

    def ref(name: str) -> dict:
        return {"apiGroup": group, "kind": "ClusterRole", "name": name}

    subjects = [{"apiGroup": group, "kind": "User", "name": user}]
    return [
        {"apiVersion": f"{group}/v1", "kind": "RoleBinding",
         "metadata": {"name": PREFIX + "batch-user", "namespace": namespace},
         "roleRef": ref(PREFIX + "batch-user-role"), "subjects": subjects},
        {"apiVersion": f"{group}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": PREFIX + "clusterqueue-viewer"},
         "roleRef": ref(PREFIX + "clusterqueue-viewer-role"), "subjects": subjects},
    ]


def webhooks(config: Path, webhook_url: str, ca_bundle: str) -> list[dict]:
    """The webhook configurations of ``config/webhook`` for Kueue's kinds and batch/v1 Jobs, called by URL; the
    Job webhooks only for Jobs labelled with a queue (see the module's docstring), none in the system namespaces."""
    out = []
    for doc in _docs(config / "webhook" / "manifests.yaml"):
        if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        kept = []
        for hook in doc.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            if not any(k in path for k in _KEEP):
                continue
            hook["clientConfig"] = {"url": webhook_url + path, "caBundle": ca_bundle}
            hook["namespaceSelector"] = {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(SYSTEM_NAMESPACES)}]}
            if path.endswith("-batch-v1-job"):
                hook["objectSelector"] = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
            kept.append(hook)
        doc["metadata"]["name"] = _prefixed(doc["metadata"]["name"])
        doc["webhooks"] = kept
        out.append(doc)
    job_hooks = [h for d in out for h in d["webhooks"] if h["clientConfig"]["url"].endswith("-batch-v1-job")]
    if len(out) != 2 or len(job_hooks) != 2:
        raise TaoError("Kueue's config/webhook lacks the batch/v1 Job webhooks: a changed layout")
    return out


def controller_config(*, webhook_port: int, health_port: int, cert_dir: str) -> dict:
    """Kueue's Configuration (config.kueue.x-k8s.io): loopback ports, our certificate, one integration."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": SYSTEM_NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": cert_dir},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }


def queue_objects(*, cluster_queue: str, local_queue: str, namespace: str, flavor: str, gpus: int,
                  cpu: str = "1000", memory: str = "4Ti") -> list[dict]:
    """A ResourceFlavor (every node), a ClusterQueue with ``gpus`` GPUs of quota (CPU and memory large: only
    the GPUs are scarce) and a LocalQueue in ``namespace`` pointing at it."""
    return [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": {}},
        {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": cluster_queue}, "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU_RESOURCE], "flavors": [{
                "name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu},
                                              {"name": "memory", "nominalQuota": memory},
                                              {"name": GPU_RESOURCE, "nominalQuota": gpus}]}]}]}},
        {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": local_queue, "namespace": namespace},
         "spec": {"clusterQueue": cluster_queue}},
    ]


# -- the process ------------------------------------------------------------------------------------------------

def _dir() -> Path:
    return _paths()["root"] / NAME


def exe(data: dict | None = None) -> str | None:
    return ((data if data is not None else _load_cluster()).get("exes") or {}).get(NAME)


def pid() -> int | None:
    path = exe()
    return live_pid(_pidfile(NAME), path) if path else None


def healthy(data: dict | None = None) -> bool:
    """Alive, ready (its /readyz), and its webhook server answers TLS with our CA."""
    data = data if data is not None else _load_cluster()
    ports = data.get("kueue_ports") or {}
    if not ports or not pid():
        return False
    return _http_ok(f"http://127.0.0.1:{ports['health']}/readyz") and _webhook_serves(ports["webhook"])


def _webhook_serves(port: int) -> bool:
    import socket
    import ssl

    ctx = ssl.create_default_context(cafile=str(_paths()["pki"] / "ca.crt"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
            with ctx.wrap_socket(sock, server_hostname="127.0.0.1"):
                return True
    except (OSError, ssl.SSLError):
        return False


def _certs() -> Path:
    """Kueue's client certificate (kubeconfig) and serving certificate (tls.crt/tls.key, mode 600 folder)."""
    pki = _paths()["pki"]
    certs = _dir() / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    os.chmod(certs, 0o700)
    if not (pki / "kueue.crt").exists():
        k8s_pki.issue(pki, k8s_pki.Cert("kueue", CONTROLLER_USER))
    if not (pki / "kueue-serving.crt").exists():
        k8s_pki.issue(pki, k8s_pki.Cert("kueue-serving", "kueue-webhook", server=True, client=False,
                                        sans=k8s_pki.LOOPBACK_SANS))
    for src, dst in (("kueue-serving.crt", "tls.crt"), ("kueue-serving.key", "tls.key")):
        k8s_pki.write_private(certs / dst, (pki / src).read_text(encoding="utf-8"))
    return certs


def _link_metrics_certs(certs: Path) -> None:
    """/etc/kueue/metrics/certs -> our certificate folder (see the module docstring); a real folder is left alone."""
    if METRICS_CERT_DIR.is_symlink() or not METRICS_CERT_DIR.exists():
        METRICS_CERT_DIR.parent.mkdir(parents=True, exist_ok=True)
        tmp = METRICS_CERT_DIR.with_name(".certs.tmp")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(certs)
        tmp.replace(METRICS_CERT_DIR)
    elif not (METRICS_CERT_DIR / "tls.crt").exists():
        raise TaoError(f"{METRICS_CERT_DIR} is a folder without tls.crt: Kueue cannot start (remove it)")


def stop() -> None:
    from .daemons import _stop_daemon

    _stop_daemon(NAME, exe(), grace=10.0)


def digest(version: str) -> str:
    """Changes with the version and with this install's code: a running Kueue set up otherwise is restarted."""
    import hashlib

    return f"{version}-{hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]}"


def ensure(bin_dir: Path, config_dir: Path, version: str) -> None:
    """Kueue running and healthy with this build, its objects applied, the local queue there: a healthy Kueue set up
    the same way is left alone; a dead, unhealthy or other one is (re)started, alone (the rest of the cluster is
    never touched)."""
    data = _load_cluster()
    if data.get("kueue_setup") == digest(version) and healthy(data):
        return
    stop()
    start(bin_dir, config_dir, version)


def start(bin_dir: Path, config_dir: Path, version: str) -> None:
    from .daemons import _free_ports, _spawn, _wait

    certs = _certs()
    _link_metrics_certs(certs)
    pki, root = _paths()["pki"], _dir()
    k8s_pki.write_private(root / "kueue.kubeconfig", k8s_pki.kubeconfig(
        _load_cluster()["server"], pki, [(NAME, CONTROLLER_USER, "kueue")], NAME, None))
    webhook_port, health_port = _free_ports(2)
    (root / "config.yaml").write_text(json.dumps(controller_config(
        webhook_port=webhook_port, health_port=health_port, cert_dir=str(certs)), indent=2) + "\n", encoding="utf-8")
    url = f"https://127.0.0.1:{webhook_port}"
    ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    crd_objs = crds(config_dir, url, ca)
    _apply_server_side([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}]
                       + crd_objs + rbac(config_dir) + bindings())
    wait_established([c["metadata"]["name"] for c in crd_objs])
    data = _load_cluster()
    data.setdefault("exes", {})[NAME] = str(bin_dir / NAME)
    data["kueue_ports"] = {"webhook": webhook_port, "health": health_port}
    data.pop("kueue_version", None)
    data.pop("kueue_setup", None)
    _save_cluster(data)
    _spawn(NAME, [str(bin_dir / NAME), f"--config={root / 'config.yaml'}", f"--kubeconfig={root / 'kueue.kubeconfig'}",
                  "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=info"])
    _wait(NAME, lambda: healthy(_load_cluster()), what="/readyz and its webhook server")
    # the webhooks only once Kueue serves them (a labelled Job create before would fail closed)
    _apply_server_side(webhooks(config_dir, url, ca))
    _apply_with_retry(queue_objects(cluster_queue=LOCAL_QUEUE, local_queue=LOCAL_QUEUE, namespace=NAMESPACE,
                                    flavor=LOCAL_FLAVOR, gpus=GPUS_PER_NODE))
    _wait(NAME, _local_queue_active, what=f"ClusterQueue {LOCAL_QUEUE} Active (Kueue's controllers working)")
    data = _load_cluster()
    data.update({"kueue_version": version, "kueue_setup": digest(version)})
    _save_cluster(data)


def _local_queue_active() -> bool:
    res = kubectl("get", "clusterqueue", LOCAL_QUEUE, "-o", "jsonpath={.status.conditions[?(@.type==\"Active\")].status}",
                  check=False)
    return res.ok and res.stdout.strip() == "True"


def _apply_server_side(objs: list[dict]) -> None:
    """Server-side apply: Kueue's CRDs are too large for client-side apply's last-applied annotation."""
    kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=tao-local-kueue", "-f", "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}), timeout=120)


def _apply_with_retry(objs: list[dict], timeout: float = 60) -> None:
    """Apply Kueue objects (they pass Kueue's own webhooks, just configured: the API server may need a moment)."""
    end = time.monotonic() + timeout
    while True:
        try:
            _apply_server_side(objs)
            return
        except TaoError:
            if time.monotonic() > end:
                raise
            time.sleep(2)


def log_path() -> Path:
    return _log(NAME)
