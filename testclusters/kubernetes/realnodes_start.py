"""Bring up the real nodes: the bridge, their files and certificates, the registry, S3
and one containerd each before the API server; CoreDNS, the kubelets and their
fake GPUs after it (test infrastructure)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from . import images, k8s_objects, k8s_pki, realnodes, s3
from .cluster_kubectl import kubectl
from .cluster_state import _load_cluster, _paths, _save_cluster
from .daemons import _free_ports, _free_ports_on, _spawn, _wait, _which
from .health import _http_ok
from .k8s_objects import GPU_RESOURCE, GPUS_PER_NODE
from .node_images import _image_pins
from .realnodes import REAL_NODES
from .registry import _start_registry

#: Debian packages of the real nodes; those in NODE_PINNED must match versions.yaml.
NODE_PACKAGES = ("containerd", "runc", "containernetworking-plugins", "umoci", "skopeo", "docker-registry",
                 "busybox-static", "apache2-utils", "iproute2", "openssl")
NODE_PINNED = {pkg: f"test_clusters.kubernetes.debs.{pkg}"
               for pkg in ("containerd", "runc", "umoci", "skopeo", "docker-registry")}


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
