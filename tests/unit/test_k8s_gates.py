"""Capacity, version and credential-file gates (recorded node/pod JSON)."""
from __future__ import annotations

import os

import pytest

from taobank.errors import TaoError
from taobank.platforms.kubernetes import gates
from taobank.platforms.kubernetes.submit import collect_credentials, read_secrets_file


def node(name, gpus=8, ready=True, cordoned=False, taints=None, labels=None):
    spec = {}
    if cordoned:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(node_name, gpus, phase="Running", init=0, limits_only=False):
    res = {"limits": {"nvidia.com/gpu": str(gpus)}} if limits_only else {"requests": {"nvidia.com/gpu": str(gpus)}}
    spec = {"nodeName": node_name, "containers": [{"name": "c", "resources": res}]}
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": {"nvidia.com/gpu": str(init)}}}]
    return {"spec": spec, "status": {"phase": phase}}


def test_free_is_allocatable_minus_running_requests():
    figs = gates.node_gpus([node("a"), node("b")], [pod("a", 6), pod("a", 2, phase="Succeeded"),
                                                     pod("b", 1, limits_only=True)])
    assert {f.name: f.free for f in figs} == {"a": 2, "b": 7}


def test_cordoned_notready_tainted_unmatched_nodes_do_not_count():
    nodes = [node("cordoned", cordoned=True), node("down", ready=False),
             node("tainted", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
             node("other", labels={"gpu": "a100"}), node("ok", gpus=2, labels={"gpu": "h100"})]
    figs = gates.node_gpus(nodes, [], node_selector={"gpu": "h100"})
    assert [f.name for f in figs if f.usable] == ["ok"]
    with pytest.raises(TaoError, match="can never run here: need 1 node with 4 nvidia.com/gpu.*the most on one is 2"):
        gates.check_capacity(figs, 4)
    assert "ok 2/2 free" in gates.check_capacity(figs, 2)


def test_tolerated_taint_counts():
    n = node("t", taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])
    figs = gates.node_gpus([n], [], tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert figs[0].usable


def test_multinode_needs_distinct_nodes_each_with_enough():
    figs = gates.node_gpus([node("a"), node("b"), node("c", cordoned=True)], [pod("b", 4)])
    # only node a has 6 free now, but b has 8 allocatable: the job queues (submitted), --require-free refuses
    line = gates.check_capacity(figs, 6, nodes=2)
    assert line.startswith("queued:") and "(1 now)" in line and "b 4/8 free" in line and "c 8/8 free (cordoned)" in line
    with pytest.raises(TaoError, match="--require-free.*need 2 nodes with 6 nvidia.com/gpu each free, 1 have it"):
        gates.check_capacity(figs, 6, nodes=2, require_free=True)
    assert gates.check_capacity(figs, 4, nodes=2).startswith("ok:")
    # three nodes of 8 would be needed but only two are schedulable: never fits, refused
    with pytest.raises(TaoError, match="can never run here: need 3 nodes with 1 nvidia.com/gpu each; 2 schedulable"):
        gates.check_capacity(figs, 1, nodes=3)


def test_busy_single_node_queues_with_per_node_figures():
    figs = gates.node_gpus([node("a", gpus=8), node("b", gpus=8)], [pod("a", 8), pod("b", 5)])
    line = gates.check_capacity(figs, 4)
    assert line.startswith("queued: the GPUs are busy") and "a 0/8 free" in line and "b 3/8 free" in line
    with pytest.raises(TaoError, match="insufficient free GPUs now"):
        gates.check_capacity(figs, 4, require_free=True)
    with pytest.raises(TaoError, match="can never run here"):
        gates.check_capacity(figs, 9)


def test_init_container_request_counts():
    assert gates.pod_gpu_request(pod("a", 1, init=4)) == 4


def test_version_gate_reason_is_accurate():
    assert gates.server_version({"serverVersion": {"gitVersion": "v1.34.4"}}) == (1, 34)
    gates.check_version((1, 28), "1.28")
    with pytest.raises(TaoError) as exc:
        gates.check_version((1, 27), "1.28")
    msg = str(exc.value)
    assert "batch.kubernetes.io/job-completion-index" in msg and "1.21" in msg and "1.24" in msg


def test_secrets_file_must_be_private(tmp_path, monkeypatch):
    f = tmp_path / "creds.env"
    f.write_text("AWS_ACCESS_KEY_ID=AKIAEXAMPLE\nexport HF_TOKEN='hf_x y'\n# comment\n")
    os.chmod(f, 0o644)
    with pytest.raises(TaoError, match="chmod 600"):
        read_secrets_file(str(f))
    os.chmod(f, 0o600)
    assert read_secrets_file(str(f)) == {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "HF_TOKEN": "hf_x y"}
    monkeypatch.setenv("MY_TOKEN", "s3cr3t")
    assert collect_credentials(["MY_TOKEN"], str(f))["MY_TOKEN"] == "s3cr3t"
    with pytest.raises(TaoError, match="not set"):
        collect_credentials(["ABSENT_VAR_X"])
    with pytest.raises(TaoError, match="NAME") as exc:
        collect_credentials(["HF_TOKEN=hf_leak"])
    assert "hf_leak" not in str(exc.value)


def test_secret_in_plain_env_is_refused_before_any_cluster_call(state_dir):
    from taobank import run
    from taobank.contract import SubmitOptions
    from taobank.platforms.kubernetes.adapter import PLATFORM

    before = len(run.CALLS)
    spec = {"image": "busybox", "command": "true", "env": {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz0123"}}
    with pytest.raises(TaoError, match="looks like a credential") as exc:
        PLATFORM.submit(spec, SubmitOptions(namespace="tao-jobs"))
    assert "hf_abcdef" not in str(exc.value)
    assert len(run.CALLS) == before  # no kubectl call, no record
    assert not state_dir.exists() or not list(state_dir.glob("*.json"))
