"""The whole local cluster: ``up`` (idempotent; a changed config restarts it; a lost
port race is retried once), ``down`` and ``status`` (test infrastructure)."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from taobank.errors import TaoError
from .. import apt
from ..procs import live_pid, stop_pid
from . import k8s_build, k8s_objects, k8s_pki, kueue, kueue_build, s3
from .cluster_env import env
from .cluster_state import _load_cluster, _log, _paths, _pidfile, _save_cluster, state_root
from .control_plane import ENCRYPTION_PROVIDER, _start_control_plane, _write_kubeconfigs, _write_kwok_config
from .daemons import DAEMONS, _free_ports, all_daemons
from .fake_pods import STAGES_FILE
from .health import _api_ready
from .k8s_objects import USER_NAME
from .node_images import _image_pins, _images, _load_images
from .realnodes_start import NODE_PACKAGES, NODE_PINNED, _prepare_real_nodes, _start_kubelets
from .realnodes_stop import _stop_real_nodes


def status() -> dict:
    """Daemon pids, the API address, versions, and ``ready`` (all alive and /readyz ok)."""
    data = _load_cluster()
    daemons = {}
    for name in all_daemons():
        exe = data.get("exes", {}).get(name)
        daemons[name] = live_pid(_pidfile(name), exe) if exe else None
    # ready_at is written only after every readiness check of up() passed.
    ready = bool(data.get("ready_at")) and all(daemons.values()) and _api_ready(data)
    # Kueue is checked apart: a cluster from before it, or with it down, is not restarted for it (up starts it alone)
    kueue_pid = kueue.pid()
    return {
        "ready": ready,
        "kueue": {"pid": kueue_pid, "version": data.get("kueue_version"),
                  "ready": bool(kueue_pid) and ready and kueue.healthy(data)},
        "server": data.get("server"),
        "version": data.get("pins", {}).get("version"),
        "pids": daemons,
        "state_dir": str(state_root()),
        "kubeconfig": str(_paths()["admin"]),
    }


def up_to_date(pins: dict | None = None, *, settle: float = 0.0) -> bool:
    """Ready, and started with the current pins, images and Stages: ``up`` then changes nothing (else it restarts).

    ``settle``: seconds to keep asking a cluster whose daemons all live and whose config is current but whose
    API did not answer ready. A busy machine (tests running against it) slows /readyz past its timeout, and
    restarting then would kill every job of the tests using it."""
    if _load_cluster().get("config") != _config_digest(pins or k8s_build.pins()):
        return False
    end = time.monotonic() + settle
    while True:
        st = status()
        if st["ready"]:
            return True
        if not all(st["pids"].values()) or not _load_cluster().get("ready_at") or time.monotonic() >= end:
            return False
        time.sleep(2)


def up() -> dict[str, str]:
    """Start the cluster (idempotent: a ready cluster is left alone) and wait for readiness."""
    root = state_root()
    root.parent.mkdir(parents=True, exist_ok=True)
    with _state_lock(root):
        pins = k8s_build.pins()
        if up_to_date(pins, settle=90.0):
            _ensure_kueue()
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
        _ensure_kueue()
    return env()


def _ensure_kueue() -> None:
    """Kueue built (cached by version), started when it is not running healthy: alone, the cluster untouched."""
    version = kueue_build.pin()
    d = kueue_build.ensure(version)
    kueue.ensure(d / "bin", d / "share" / "config", version)


def _state_lock(root: Path):
    """The lock of one state folder (up and down); says so when another up/down holds it."""
    return k8s_build._locked(root.parent / "kubernetes.lock", _paths(root)["logs"],
                             f"an up/down of the cluster in {root}")


def _config_digest(pins: dict) -> str:
    """Changes when the pins, the images, the kwok Stages or the Secret encryption change: a running cluster
    is then restarted."""
    import hashlib

    import yaml

    preload, served = _images()
    stages = list(yaml.safe_load_all(STAGES_FILE.read_text(encoding="utf-8")))  # its content: a comment edit restarts nothing
    blob = json.dumps([pins, _image_pins(), [i.key() for i in preload + served], ENCRYPTION_PROVIDER, stages],
                      sort_keys=True).encode()
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


def _stop_all() -> None:
    data = _load_cluster()
    exes = data.get("exes", {})
    kueue.stop()  # first: a client of the API server
    _stop_real_nodes(data)
    for name in reversed(DAEMONS):
        pidfile = _pidfile(name)
        pid = live_pid(pidfile, exes[name]) if name in exes else None
        if pid:
            stop_pid(pid, exes[name], grace=15.0)
        pidfile.unlink(missing_ok=True)
