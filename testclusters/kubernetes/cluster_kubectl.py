"""The cluster's own kubectl (built with the server, same version), run as admin (test infrastructure)."""
from __future__ import annotations

import json
import time
from pathlib import Path

from taobank.errors import TaoError
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


def wait_established(crds: list[str], timeout_s: float = 90.0) -> None:
    """Wait until every CRD in ``crds`` (names) is Established. Polled by hand: ``kubectl wait`` fails at once
    ("accessor error") when it reads a CRD the server has not given any condition yet, which a loaded machine sees."""
    deadline = time.monotonic() + timeout_s
    while True:
        res = kubectl("get", "crd", *crds, "-o", "json", check=False)
        items = json.loads(res.stdout).get("items", []) if res.ok else []
        ready = {i["metadata"]["name"] for i in items
                 if any(c.get("type") == "Established" and c.get("status") == "True"
                        for c in (i.get("status") or {}).get("conditions") or [])}
        if ready >= set(crds):
            return
        if time.monotonic() > deadline:
            raise TaoError(f"CRDs not Established within {timeout_s:.0f}s: {sorted(set(crds) - ready)}")
        time.sleep(0.5)
