"""Tear the real nodes down: pods through the kubelets, then the kubelets, leftover
containers, containerd, CoreDNS, S3, the registry, mounts, cgroups and the bridge
(test infrastructure)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from ..procs import live_pid
from . import realnodes
from .cluster_kubectl import kubectl
from .cluster_state import _paths, _pidfile
from .daemons import _stop_daemon, status_daemons_alive
from .realnodes_ctr import _ctr, _real_nodes


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
