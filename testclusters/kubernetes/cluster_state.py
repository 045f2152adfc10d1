"""Where the local cluster keeps its state: the folder layout, daemon logs and pid
files, and cluster.json (ports, executables, nodes, readiness) (test infrastructure)."""
from __future__ import annotations

import json
import os
from pathlib import Path


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
