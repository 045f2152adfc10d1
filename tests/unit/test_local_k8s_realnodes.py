"""Unit checks of the real nodes' configs and images (no cluster needed)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from taobank.errors import TaoError
from testclusters.kubernetes import images, k8s_build, realnodes

NET = realnodes.Net("taoabcdef01", "10.123.0")


def node(index: int = 1, root: Path = Path("/state")) -> realnodes.Node:
    name = realnodes.REAL_NODES[index]
    return realnodes.Node(name, index, root / "nodes" / name, NET.node_ip(index), 41000 + index, 42000 + index,
                          Path("/run/tao-local/x") / name, Path("/var/lib/tao-local/x") / name)


def test_node_addresses_and_pod_ranges_do_not_overlap():
    assert [NET.node_ip(i) for i in range(2)] == ["10.123.0.1", "10.123.0.2"]
    (a0, a1), (b0, b1) = NET.pod_range(0), NET.pod_range(1)
    last = [int(x.rsplit(".", 1)[1]) for x in (a0, a1, b0, b1)]
    assert last[0] > 2 and last[1] < last[2] and last[3] < 255


def test_containerd_config_is_private_to_the_node_and_mirrors_nvcr_to_the_local_registry():
    n = node()
    text = realnodes.containerd_config(n, "registry.k8s.io/pause:3.10", "127.0.0.1:5555", Path("/pki/ca.crt"))
    assert f'address = "{n.socket}"' in text and f'root = "{n.dir / "containerd" / "root"}"' in text
    assert "restrict_oom_score_adj = true" in text  # no CAP_SYS_RESOURCE here
    assert 'sandbox_image = "registry.k8s.io/pause:3.10"' in text
    assert f'conf_dir = "{n.dir / "cni" / "net.d"}"' in text and 'bin_dir = "/usr/lib/cni"' in text
    assert '.registry.mirrors."nvcr.io"]' in text and 'endpoint = ["https://127.0.0.1:5555"]' in text
    assert 'ca_file = "/pki/ca.crt"' in text
    assert f'Root = "{n.dir / "containerd" / "runc"}"' in text
    assert len(str(n.socket)) < 100  # unix socket paths are limited to 108 bytes


def test_cni_bridge_uses_the_cluster_bridge_without_nat():
    conf = realnodes.cni_conflist(NET, node())
    bridge = conf["plugins"][0]
    assert bridge["type"] == "bridge" and bridge["bridge"] == NET.bridge and bridge["ipMasq"] is False
    (rng,) = bridge["ipam"]["ranges"][0]
    assert rng["gateway"] == NET.gateway and (rng["rangeStart"], rng["rangeEnd"]) == NET.pod_range(1)


def test_kubelet_config_for_cgroup_v1_without_iptables_and_with_cluster_dns():
    n = node()
    cfg = realnodes.kubelet_config(n, ca_file=Path("/pki/ca.crt"), cgroup="/tao-x-tao-real-1", dns_ip=NET.gateway)
    assert cfg["failCgroupV1"] is False and cfg["cgroupDriver"] == "cgroupfs"
    assert cfg["cgroupRoot"] == "/tao-x-tao-real-1" and cfg["makeIPTablesUtilChains"] is False
    assert cfg["clusterDNS"] == [NET.gateway] and cfg["clusterDomain"] == "cluster.local"
    assert cfg["containerRuntimeEndpoint"] == f"unix://{n.socket}"
    assert cfg["address"] == n.ip and cfg["port"] == n.kubelet_port and cfg["readOnlyPort"] == 0
    assert cfg["authentication"]["anonymous"]["enabled"] is False
    argv = realnodes.kubelet_argv("/bin/kubelet", n, 8, "H100")
    assert f"--node-ip={n.ip}" in argv and f"--root-dir={n.kubelet_dir}" in argv
    labels = next(a for a in argv if a.startswith("--node-labels=")).split("=", 1)[1].split(",")
    assert f"{realnodes.REAL_NODE_LABEL}=true" in labels and "nvidia.com/gpu.count=8" in labels


def test_two_nodes_never_share_a_cgroup_root_socket_or_kubelet_folder():
    a, b = node(0), node(1)
    assert len({a.socket, b.socket}) == 2 and len({a.kubelet_dir, b.kubelet_dir}) == 2
    root = Path("/state")
    assert realnodes.cgroup_root(root, a.name) != realnodes.cgroup_root(root, b.name)
    assert realnodes.cgroup_root(root, a.name) != realnodes.cgroup_root(Path("/other"), a.name)


def test_corefile_answers_cluster_local_from_the_api_on_the_bridge_only():
    text = realnodes.corefile(NET.gateway, Path("/dns/kc"), 7001, 7002)
    assert "kubernetes cluster.local {" in text and "kubeconfig /dns/kc coredns" in text
    assert text.count(f"bind {NET.gateway}") == 2 and "forward" not in text  # nothing leaves the machine
    assert "ready 127.0.0.1:7001" in text


def test_registry_demands_credentials_over_tls_on_loopback():
    cfg = realnodes.registry_config(Path("/r/s"), 5555, Path("/p/r.crt"), Path("/p/r.key"), Path("/r/htpasswd"))
    assert cfg["http"]["addr"] == "127.0.0.1:5555" and cfg["http"]["tls"]["certificate"] == "/p/r.crt"
    assert cfg["auth"]["htpasswd"]["path"] == "/r/htpasswd"
    assert realnodes.registry_path("nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt") == "nvidia/tao/tao-toolkit:7.1.0-pyt"
    with pytest.raises(TaoError):
        realnodes.registry_path("docker.io/library/busybox:1.37.0")


def test_image_cache_key_changes_with_what_goes_into_the_image():
    a = images.busybox("docker.io/library/busybox:1.37.0")
    assert a.key() == images.busybox("docker.io/library/busybox:1.37.0").key()
    assert a.key() != images.busybox("docker.io/library/busybox:1.38.0").key()
    s3a, s3b = images.s3_client("x/aws:1", "1.46.3"), images.s3_client("x/aws:1", "1.46.4")
    assert s3a.key() != s3b.key() and s3a.files["/usr/bin/aws"].startswith("#!/usr/bin/python3")


def test_pause_image_exits_on_term():
    p = images.pause()
    assert p.ref == images.PAUSE_IMAGE and "trap 'exit 0' TERM" in p.entrypoint[-1]


def test_node_build_cache_key_and_coredns_module_match_the_pins(monkeypatch, tmp_path):
    monkeypatch.setenv("TAO_CACHE_DIR", str(tmp_path))
    p = k8s_build.pins()
    assert k8s_build.node_build_dir(p) == tmp_path / "k8s" / f"nodes-{p['version']}-coredns{p['coredns']}"
    assert k8s_build._coredns_matches(p)
    main_go = (k8s_build.MODULES_DIR / "coredns" / "main.go").read_text()
    assert "plugin/kubernetes" in main_go and "core/plugin\"" not in main_go  # not the every-plugin bundle
    assert json.dumps(p)  # plain strings


def test_a_long_build_prints_progress_with_elapsed_time(monkeypatch, tmp_path, capsys):
    import subprocess
    import sys
    import time

    monkeypatch.setattr(k8s_build, "PROGRESS_EVERY_S", 0.05)
    log = tmp_path / "build.log"
    log.write_text("k8s.io/kubernetes/pkg/kubelet\n")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.4)"])
    assert k8s_build._wait_with_progress(proc, "go build kubelet", time.monotonic(), log) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("local kubernetes: go build kubelet")]
    assert lines and "s elapsed" in lines[0] and "k8s.io/kubernetes/pkg/kubelet" in lines[0]


def test_a_second_process_says_it_waits_for_the_lock(tmp_path):
    import subprocess
    import sys

    lock = tmp_path / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", (  # holds the lock until a line arrives on its stdin
        "import fcntl, sys; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); "
        "print('held', flush=True); sys.stdin.readline()"), str(lock)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    waiter = subprocess.Popen([sys.executable, "-c", (
        "import sys; sys.path[:0] = sys.argv[2:]; from testclusters.kubernetes import k8s_build; "
        "from pathlib import Path; f = k8s_build._locked(Path(sys.argv[1]), Path('/x/build.log'), 'the build'); "
        "print('got it')"), str(lock), str(Path(k8s_build.__file__).parents[2] / "scripts"),
        str(Path(k8s_build.__file__).parents[2])], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = waiter.stderr.readline()  # printed before it blocks on the lock
    assert waiter.poll() is None  # still waiting
    holder.communicate("release\n", timeout=30)
    out, err = waiter.communicate(timeout=30)
    assert out.strip() == "got it"
    assert "waiting for the lock" in said and "the build" in said and "/x/build.log" in said, said + err
