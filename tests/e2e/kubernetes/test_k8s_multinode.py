"""Multi-node: Indexed Job + headless Service, rendezvous env, per-node gate, cancel removes the Service."""
from __future__ import annotations

import json
import subprocess
import time

import pytest
from k8s_verbs_support import ON_KWOK, k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk

pytestmark = pytest.mark.e2e

BASE = ["--image", "docker.io/library/busybox:1.37.0", "--network-arch", "dino", "--action", "train",
        "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_KWOK]


def _pods(k8s, jid: str, n: int, timeout: float = 60) -> list[dict]:
    end = time.time() + timeout
    while True:
        pods = k8s.kjson("get", "pods", "-l", f"tao-job-id={jid}")["items"]
        if len(pods) == n and all(p["status"].get("phase") == "Running" for p in pods):
            return sorted(pods, key=lambda p: p["spec"]["hostname"])
        assert time.time() < end, f"pods of {jid} not running: {[p['status'].get('phase') for p in pods]}"
        time.sleep(1)


def test_multinode_pods_have_rendezvous_identity_and_env(k8s):
    out = k8s.submit(*BASE, "--command", 'torchrun --nnodes="$NNODES" --node-rank="$NODE_RANK" train.py',
                     "--gpus", "1", "--nodes", "2", "--skip-nccl-probe", "--nccl-env", "NCCL_SOCKET_IFNAME=eth0",
                     "--pod-annotation", f"{lk.KEEP_RUNNING_ANNOTATION}=true")
    jid, name = out["id"], out["name"]
    svc = k8s.kjson("get", "service", name)
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["metadata"]["ownerReferences"][0]["uid"] == out["uid"]
    pods = _pods(k8s, jid, 2)
    for rank, pod in enumerate(pods):
        assert pod["spec"]["hostname"] == f"{name}-{rank}"
        assert pod["spec"]["subdomain"] == name
        assert pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == str(rank)
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["WORLD_SIZE"]["value"] == "2" and env["NNODES"]["value"] == "2"
        assert env["NUM_GPU_PER_NODE"]["value"] == "1" and env["NPROC_PER_NODE"]["value"] == "1"
        assert env["MASTER_ADDR"]["value"] == f"{name}-0.{name}"
        assert env["MASTER_PORT"]["value"] == "29500"
        assert env["NCCL_SOCKET_IFNAME"]["value"] == "eth0"
        ref = env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert ref == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        assert pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == str(rank)
    assert {p["spec"]["nodeName"] for p in pods} <= set(lk.GPU_NODES)
    st = k8s.wait(jid, lambda s: s["state"] == "RUNNING")
    assert [p["rank"] for p in st["pods"]] == [0, 1]
    logs = k8s.tao("logs", jid)
    lines = [ln for ln in logs.stdout.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("[rank ") for ln in lines)
    assert any(ln.startswith("[rank 0 ") for ln in lines) and any(ln.startswith("[rank 1 ") for ln in lines)
    try:  # --follow streams every pod with enough concurrent log requests for all ranks
        k8s.tao("logs", jid, "--follow", "--tail", "5", check=False, timeout=20)
    except subprocess.TimeoutExpired:
        pass
    follow = [a for a in k8s.calls() if a[:1] == ["kubectl"] and "--follow" in a]
    assert follow and "--max-log-requests=6" in follow[0] and "--prefix" in follow[0]
    (res,) = json.loads(k8s.tao("cancel", jid, "--json").stdout)
    assert res["deleted"] is True
    assert k8s.kubectl("get", "service", name, "--ignore-not-found", "-o", "name").stdout.strip() == ""


def test_multinode_refuses_user_override_of_rendezvous_env(k8s):
    proc = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "1", "--nodes", "2", "--env", "NODE_RANK=0",
                   check=False)
    assert proc.returncode == 1 and "NODE_RANK" in proc.stderr


def test_multinode_version_gate_passes_on_pinned_server(k8s):
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "0", "--nodes", "2", "--skip-nccl-probe")
    assert any(a[:1] == ["kubectl"] and "version" in a for a in k8s.calls())
    assert out["uid"]
