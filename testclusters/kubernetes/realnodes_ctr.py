"""The real nodes' containerd through ``ctr``: the nodes cluster.json records, an
image to forget, the running tasks (test infrastructure)."""
from __future__ import annotations

from pathlib import Path

from taobank.run import run
from . import images, realnodes
from .cluster_state import _load_cluster


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


def _real_nodes(data: dict) -> list[realnodes.Node]:
    return [realnodes.Node(name, i, Path(n["dir"]), n["ip"], n["kubelet_port"], n["healthz_port"],
                           Path(n.get("run_dir") or Path(n["dir"]) / "containerd"),
                           Path(n.get("kubelet_dir") or Path(n["dir"]) / "kubelet"))
            for i, (name, n) in enumerate(sorted(data.get("nodes", {}).items()))]


def _ctr(node: realnodes.Node, *args: str, check: bool = True, timeout: float = 120):
    return run(["ctr", "--address", str(node.socket), "--namespace", "k8s.io", *args], check=check,
               timeout=timeout, what=f"ctr ({node.name})")


def ensure_image(image: "images.Image") -> str:
    """``image`` present on every real node (imported from the image cache only where ``ctr`` lacks it: a warm
    run costs one ``ctr images ls`` per node); returns its reference."""
    archive = None
    for node in _real_nodes(_load_cluster()):
        listed = _ctr(node, "images", "ls", "-q", check=False, timeout=60)
        if listed.ok and image.ref in listed.stdout.split():
            continue
        archive = archive or images.archive(image)
        _ctr(node, "images", "import", str(archive), timeout=900)
    return image.ref
