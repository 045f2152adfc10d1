"""Real worker nodes beside the kwok ones: configs and argv as data (test infrastructure).

Each real node is a ``kubelet`` with its own ``containerd`` (runc, the CNI
``bridge`` + ``host-local`` plugins from Debian), its own cgroup root, pod log
and state folders, so two nodes live on one host without seeing each other's
containers. All nodes share one bridge the cluster creates for itself; its
first address is node 0's IP, the DNS server's address and the pods'
gateway; the other nodes get one more address on the same bridge. Pods of
every node are on that one L2 segment, so nothing needs routing or NAT.

CoreDNS (built from its Go module with only the plugins used here) answers
``cluster.local`` from the API, so headless-Service names resolve in pods. A
``docker-registry`` on loopback (TLS from the cluster CA, htpasswd) serves the
images named ``nvcr.io/...``: containerd mirrors ``nvcr.io`` to it, so a pull
works only with the right pull Secret.
"""
from __future__ import annotations

import hashlib
import ipaddress
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from taobank.errors import TaoError

#: Real kubelets (node names); pods reach them with ``--node-selector REAL_NODE_LABEL=true``.
REAL_NODES = ("tao-real-0", "tao-real-1")
REAL_NODE_LABEL = "tao-skill-bank.local/real-kubelet"
CLUSTER_DOMAIN = "cluster.local"
#: Registry host the skill's ``--ngc-pull-secret`` is for; containerd sends it to the local registry.
MIRRORED_REGISTRY = "nvcr.io"
REGISTRY_USER = "$oauthtoken"
CNI_BIN_DIR = "/usr/lib/cni"
CGROUP_V1 = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Net:
    """The cluster's own bridge and /24 (``prefix`` is the first three octets)."""

    bridge: str
    prefix: str

    @property
    def gateway(self) -> str:
        return f"{self.prefix}.1"

    def node_ip(self, index: int) -> str:
        return f"{self.prefix}.{1 + index}"

    def pod_range(self, index: int) -> tuple[str, str]:
        start = 32 + index * 96
        return f"{self.prefix}.{start}", f"{self.prefix}.{start + 95}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise TaoError(f"ip {' '.join(args)} failed: {res.stderr.strip()}")
    return res


def plan_network(root: Path) -> Net:
    """A bridge name and a 10.x.0.0/24 derived from the state folder, skipping subnets in use."""
    digest = hashlib.sha256(str(root).encode()).hexdigest()
    bridge = "tao" + digest[:8]
    used = set()
    for line in _ip("-4", "-o", "addr", "show").stdout.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[1] != bridge:
            used.add(".".join(parts[3].split("/")[0].split(".")[:3]))
    start = int(digest[8:12], 16)
    for k in range(150):
        prefix = f"10.{100 + (start + k) % 150}.0"
        if prefix not in used:
            return Net(bridge, prefix)
    raise TaoError("no free 10.x.0.0/24 for the local cluster's bridge")


def ensure_bridge(net: Net, nodes: int) -> None:
    """Create the bridge with the gateway first (the CNI bridge plugin checks the first address)."""
    if _ip("link", "show", net.bridge, check=False).returncode != 0:
        _ip("link", "add", "name", net.bridge, "type", "bridge")
    have = _ip("-4", "-o", "addr", "show", "dev", net.bridge).stdout
    wanted = [f"{net.gateway}/24"] + [f"{net.node_ip(i)}/32" for i in range(1, nodes)]
    for cidr in wanted:
        if f" {cidr} " not in have:
            _ip("addr", "add", cidr, "dev", net.bridge)
    _ip("link", "set", net.bridge, "up")


def remove_bridge(bridge: str) -> None:
    _ip("link", "del", bridge, check=False)


def short_dirs(root: Path) -> tuple[Path, Path]:
    """(sockets, kubelet roots) of this cluster: unix socket paths must stay under 108 bytes,
    which a deep state folder would not allow."""
    tag = hashlib.sha256(str(root).encode()).hexdigest()[:8]
    return Path("/run/tao-local") / tag, Path("/var/lib/tao-local") / tag


def cgroup_root(root: Path, node: str) -> str:
    """A cgroup root of this cluster's own per node (two kubelets must not share /kubepods)."""
    tag = hashlib.sha256(str(root).encode()).hexdigest()[:8]
    return f"/tao-{tag}-{node}"


def make_cgroup_roots(path: str) -> None:
    """kubelet refuses a cgroupRoot that does not exist in every v1 hierarchy."""
    for hierarchy in CGROUP_V1.iterdir():
        if (hierarchy / "cgroup.procs").exists() and hierarchy.name != "unified":
            (hierarchy / path.lstrip("/")).mkdir(exist_ok=True)


def remove_cgroup_roots(path: str) -> None:
    """Remove the (empty by now) cgroup tree of a node, deepest first."""
    for hierarchy in CGROUP_V1.iterdir():
        top = hierarchy / path.lstrip("/")
        if not top.is_dir():
            continue
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            try:
                d.rmdir()
            except OSError:
                pass
        try:
            top.rmdir()
        except OSError:
            pass


@dataclass(frozen=True)
class Node:
    """One real node's names, addresses, ports and folders."""

    name: str
    index: int
    dir: Path
    ip: str
    kubelet_port: int
    healthz_port: int
    run_dir: Path
    kubelet_dir: Path

    @property
    def socket(self) -> Path:
        return self.run_dir / "containerd.sock"


def containerd_config(node: Node, sandbox_image: str, registry: str, ca_file: Path) -> str:
    """containerd 1.6 config (TOML): own root/state/socket/runc root, CNI from this node's folder."""
    c = node.dir / "containerd"
    cri = 'plugins."io.containerd.grpc.v1.cri"'

    def q(value: str) -> str:
        return json.dumps(value)  # a TOML basic string is a JSON string for these values

    return "\n".join([
        "version = 2",
        f"root = {q(str(c / 'root'))}",
        f"state = {q(str(c / 'state'))}",
        "disabled_plugins = [\"io.containerd.snapshotter.v1.aufs\", \"io.containerd.snapshotter.v1.btrfs\","
        " \"io.containerd.snapshotter.v1.zfs\", \"io.containerd.snapshotter.v1.devmapper\","
        " \"io.containerd.tracing.processor.v1.otlp\", \"io.containerd.internal.v1.tracing\"]",
        "[grpc]",
        f"  address = {q(str(node.socket))}",
        "[ttrpc]",
        f"  address = {q(str(node.run_dir / 'containerd.ttrpc.sock'))}",
        f"[{cri}]",
        f"  sandbox_image = {q(sandbox_image)}",
        # Processes here lack CAP_SYS_RESOURCE: a negative oom_score_adj would fail every sandbox.
        "  restrict_oom_score_adj = true",
        "  stream_server_address = \"127.0.0.1\"",
        "  stream_server_port = \"0\"",
        f"  [{cri}.containerd]",
        "    snapshotter = \"overlayfs\"",
        "    default_runtime_name = \"runc\"",
        f"    [{cri}.containerd.runtimes.runc]",
        "      runtime_type = \"io.containerd.runc.v2\"",
        f"      [{cri}.containerd.runtimes.runc.options]",
        f"        Root = {q(str(c / 'runc'))}",
        "        SystemdCgroup = false",
        f"  [{cri}.cni]",
        f"    bin_dir = {q(CNI_BIN_DIR)}",
        f"    conf_dir = {q(str(node.dir / 'cni' / 'net.d'))}",
        f"  [{cri}.registry.mirrors.{q(MIRRORED_REGISTRY)}]",
        f"    endpoint = [{q('https://' + registry)}]",
        f"  [{cri}.registry.configs.{q(registry)}.tls]",
        f"    ca_file = {q(str(ca_file))}",
        "",
    ])


def cni_conflist(net: Net, node: Node) -> dict:
    start, end = net.pod_range(node.index)
    return {
        "cniVersion": "0.4.0",
        "name": "tao-local",
        "plugins": [{
            "type": "bridge",
            "bridge": net.bridge,
            "isGateway": True,
            "ipMasq": False,
            "hairpinMode": True,
            "ipam": {
                "type": "host-local",
                "dataDir": str(node.dir / "cni" / "ipam"),
                "ranges": [[{"subnet": f"{net.prefix}.0/24", "rangeStart": start, "rangeEnd": end,
                             "gateway": net.gateway}]],
                "routes": [{"dst": "0.0.0.0/0"}],
            },
        }],
    }


def kubelet_config(node: Node, *, ca_file: Path, cgroup: str, dns_ip: str) -> dict:
    """KubeletConfiguration for this host (cgroup v1, no swap check, no iptables, own folders)."""
    endpoint = f"unix://{node.socket}"
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.ip,
        "port": node.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": node.healthz_port,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(ca_file)}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup,
        "cgroupsPerQOS": True,
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": endpoint,
        "imageServiceEndpoint": endpoint,
        "enforceNodeAllocatable": [],
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "clusterDNS": [dns_ip],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(node.dir / "resolv.conf"),
        "podLogsDir": str(node.dir / "pod-logs"),
        "volumePluginDir": str(node.dir / "volume-plugins"),
        "maxPods": 40,
        "makeIPTablesUtilChains": False,
        "protectKernelDefaults": False,
        "syncFrequency": "5s",
        "fileCheckFrequency": "5s",
        "nodeStatusUpdateFrequency": "5s",
        "shutdownGracePeriod": "0s",
        "staticPodPath": "",
    }


def kubelet_argv(exe: str, node: Node, gpus: int, gpu_product: str) -> list[str]:
    labels = {REAL_NODE_LABEL: "true", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": gpu_product,
              "nvidia.com/gpu.count": str(gpus)}
    return [exe, f"--config={node.dir / 'kubelet.yaml'}", f"--kubeconfig={node.dir / 'kubelet.kubeconfig'}",
            f"--hostname-override={node.name}", f"--node-ip={node.ip}", f"--root-dir={node.kubelet_dir}",
            "--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items()), "--v=1"]


def containerd_argv(node: Node) -> list[str]:
    return ["containerd", "--config", str(node.dir / "containerd.toml")]


def corefile(dns_ip: str, kubeconfig: Path, ready_port: int, health_port: int) -> str:
    """Answer cluster.local from the API (headless Services included); refuse everything else."""
    return "\n".join([
        f"{CLUSTER_DOMAIN}:53 {{",
        f"    bind {dns_ip}",
        "    errors",
        f"    health 127.0.0.1:{health_port}",
        f"    ready 127.0.0.1:{ready_port}",
        f"    kubernetes {CLUSTER_DOMAIN} {{",
        f"        kubeconfig {kubeconfig} coredns",
        "        ttl 5",
        "    }",
        "}",
        ".:53 {",
        f"    bind {dns_ip}",
        "    errors",
        "}",
        "",
    ])


def registry_config(storage: Path, port: int, cert: Path, key: Path, htpasswd: Path) -> dict:
    return {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(storage)}, "delete": {"enabled": True}},
        "http": {"addr": f"127.0.0.1:{port}", "tls": {"certificate": str(cert), "key": str(key)}},
        "auth": {"htpasswd": {"realm": "tao-local", "path": str(htpasswd)}},
    }


def registry_path(ref: str) -> str:
    """``nvcr.io/nvidia/x:1`` -> ``nvidia/x:1`` (the repository on the local mirror)."""
    host, _, rest = ref.partition("/")
    if host != MIRRORED_REGISTRY or not rest:
        raise TaoError(f"{ref} is not an {MIRRORED_REGISTRY} image: only those are served by the local registry")
    return rest


def in_subnet(ip: str, net: Net) -> bool:
    return ipaddress.ip_address(ip) in ipaddress.ip_network(f"{net.prefix}.0/24")
