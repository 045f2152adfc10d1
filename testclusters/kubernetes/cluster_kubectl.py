"""The cluster's own kubectl (built with the server, same version), run as admin (test infrastructure)."""
from __future__ import annotations

import json
from pathlib import Path

from taobank.run import run
from . import k8s_build
from .cluster_state import _load_cluster, _paths


def _kubectl_binary() -> str:
    return _load_cluster().get("kubectl") or str(k8s_build.build_dir() / "bin" / "kubectl")


def kubectl(*args: str, stdin: str | None = None, check: bool = True, timeout: float = 60,
            kubeconfig: Path | None = None):
    """Run the cluster's own kubectl (server's version) as admin (or with ``kubeconfig``)."""
    cfg = kubeconfig or _paths()["admin"]
    return run([_kubectl_binary(), "--kubeconfig", str(cfg), *args], stdin=stdin, check=check, timeout=timeout)


def _apply(objs: list[dict]) -> None:
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
