"""tao_k8s.py nccl-probe against the local cluster. kwok runs no containers: the fake pods succeed or
fail by annotation, so those tests prove the lifecycle (submit path, wait, verdict, per-cluster cache,
advice). On the two real kubelets the gloo-cpu backend runs a real all-reduce between two pods on two nodes;
NCCL over GPUs is never proven here (no GPUs)."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from k8s_verbs_support import gloo_probe_on_real_nodes, k8s  # noqa: F401  (k8s is a fixture)

from taobank.core import nccl_probe
import testclusters.kubernetes as lk

pytestmark = pytest.mark.e2e

FAST = ["--interval", "1", "--pod-annotation", f"{lk.RUN_DURATION_ANNOTATION}=1s",
        "--node-selector", f"{lk.FAKE_NODE_LABEL}=true"]


def _probe(k8s, *args: str, check: bool = True):
    proc = k8s.tao("nccl-probe", "--json", *FAST, *args, check=check, timeout=240)
    return proc, json.loads(proc.stdout)


def _launches(calls: list[list[str]]) -> list[list[str]]:
    """The writes of a launch: the Job, then what it owns (here the Service), each one ``kubectl create``."""
    return [a for a in calls if a[:1] == ["kubectl"] and "create" in a and "auth" not in a
            and "--dry-run=server" not in a]


def _cache(k8s) -> dict:
    path = Path(k8s.env["TAO_STATE_DIR"]) / nccl_probe.CACHE_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    return json.loads(path.read_text())["kubernetes"]


def test_probe_ok_is_cached_per_cluster_and_reused_until_force(k8s, tmp_path):
    nccl_file = tmp_path / "nccl.env"
    nccl_file.write_text("NCCL_SOCKET_IFNAME=eth0\n")
    env = {"TAO_K8S_NCCL_ENV": str(nccl_file)}
    proc = k8s.tao("nccl-probe", "--json", *FAST, env=env, timeout=240)
    first = json.loads(proc.stdout)
    k8s.ids.append(first["job_id"])
    assert first["verdict"] == "ok" and first["cached"] is False and first["state"] == "COMPLETE"
    assert first["nccl_env"] == {"NCCL_SOCKET_IFNAME": "eth0"}
    # the probe went through the normal submit path: a record, a 2-pod Indexed Job with the cluster NCCL env
    rec = k8s.record(first["job_id"])
    assert rec["platform"] == "kubernetes" and rec["state"] == "COMPLETE" and rec["network_arch"] == "nccl-probe"
    job = k8s.kjson("get", "job", rec["backend"]["name"])
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["parallelism"] == 2
    main = job["spec"]["template"]["spec"]["containers"][0]
    assert main["image"] == "nvcr.io/nvidia/pytorch:25.08-py3"
    pre = nccl_probe.gpu_precheck()  # PyTorch and a CUDA GPU first (else 127 / no-gpu), then torchrun
    # each rank runs it under the node guard (taobank.multinode: rank 0's name first)
    assert main["command"][3] == "tao-node" and main["command"][-3:-1] == ["/bin/sh", "-c"]
    assert main["command"][-1].startswith(pre + "timeout -k 10 300 torchrun")
    assert {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"} in main["env"]
    assert "envFrom" not in main  # Secret-less
    calls = k8s.calls()
    assert len(_launches(calls)) == 2 and any("version" in a for a in calls)  # Job + Service; gates ran
    key = first["cluster"]
    assert key.endswith(k8s.kjson("config", "view", "--minify")["clusters"][0]["cluster"]["server"])
    assert _cache(k8s)[key]["verdict"] == "ok"

    before = len(calls)
    proc = k8s.tao("nccl-probe", *FAST, env=env)
    assert proc.stdout.startswith("nccl-probe ok on ") and "cached" in proc.stdout
    again = k8s.calls()[before:]
    assert _launches(again) == [] and len(again) == 1 and "config" in again[0]  # only the cluster lookup

    proc, forced = _probe(k8s, "--force")
    k8s.ids.append(forced["job_id"])
    assert forced["verdict"] == "ok" and forced["cached"] is False and forced["job_id"] != first["job_id"]
    assert _cache(k8s)[key]["job_id"] == forced["job_id"]
    assert json.loads(k8s.tao("status", "--json").stdout) == []  # the cache file is no record

    # with the ok verdict cached, a multi-node submit goes ahead without --skip-nccl-probe, and says so
    out = k8s.submit("--image", "busybox", "--command", "true", "--gpus", "0", "--nodes", "2", "--no-results",
                     *FAST[2:])
    assert f"NCCL probe ok (job {forced['job_id']}" in out["gate"]
    assert k8s.record(out["id"])["backend"]["nccl_probe"] == "ok"


def test_multinode_submit_without_a_verdict_is_refused_and_a_skip_is_recorded(k8s):
    argv = ["--image", "busybox", "--command", "true", "--gpus", "0", "--nodes", "2", "--no-results", *FAST[2:]]
    proc = k8s.tao("submit", *argv, check=False)
    assert proc.returncode == 1 and "need an ok NCCL probe and no probe has run" in proc.stderr, proc.stderr
    assert not list(Path(k8s.env["TAO_STATE_DIR"]).glob("*.json"))
    out = k8s.submit(*argv, "--skip-nccl-probe")
    assert k8s.record(out["id"])["backend"]["nccl_probe"] == "skipped" and "NCCL probe skipped" in out["gate"]


def test_probe_timeout_gives_one_line_advice_and_is_not_cached_as_ok(k8s):
    proc, out = _probe(k8s, "--pod-annotation", f"{lk.FAIL_EXIT_CODE_ANNOTATION}=124", check=False)
    k8s.ids.append(out["job_id"])
    assert proc.returncode == 1
    assert out["verdict"] == "hang/timeout" and out["exit_code"] == 124 and out["state"] == "ERROR"
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "hang/timeout" in err[0] and "TAO_K8S_NCCL_ENV" in err[0]
    assert "NCCL_SOCKET_IFNAME" in err[0] and "--force" in err[0]
    assert _cache(k8s)[out["cluster"]]["verdict"] == "hang/timeout"
    # no ok cached: the next call probes again, without --force
    proc2, out2 = _probe(k8s, check=False)
    k8s.ids.append(out2["job_id"])
    assert out2["cached"] is False and out2["job_id"] != out["job_id"] and out2["verdict"] == "ok"
    assert proc2.returncode == 0 and _cache(k8s)[out["cluster"]]["verdict"] == "ok"


def test_probe_still_running_at_max_wait_is_canceled_as_a_hang(k8s):
    proc, out = _probe(k8s, "--timeout", "5", "--max-wait", "6",
                       "--pod-annotation", f"{lk.KEEP_RUNNING_ANNOTATION}=true", check=False)
    k8s.ids.append(out["job_id"])
    assert proc.returncode == 1 and out["verdict"] == "hang/timeout" and out["state"] == "CANCELED"
    assert k8s.record(out["job_id"])["state"] == "CANCELED"
    assert "TAO_K8S_NCCL_ENV" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_probe_pods_that_never_start_are_not_blamed_on_nccl(k8s):
    proc, out = _probe(k8s, "--max-wait", "6",
                       "--pod-annotation", f"{lk.WAITING_REASON_ANNOTATION}=ImagePullBackOff", check=False)
    k8s.ids.append(out["job_id"])
    assert proc.returncode == 1 and out["verdict"] == "pull-failed" and out["exit_code"] is None
    assert "could not be pulled" in proc.stderr and "--ngc-pull-secret" in proc.stderr
    assert "TAO_K8S_NCCL_ENV" not in proc.stderr
    assert _cache(k8s)[out["cluster"]]["verdict"] == "pull-failed"


ON_REAL = ["--interval", "1", "--node-selector", f"{lk.REAL_NODE_LABEL}=true"]


def test_probe_on_real_nodes_whose_image_cannot_be_pulled_says_so(k8s):
    """The pinned NGC PyTorch image is not in the local registry: the pull really fails."""
    proc = k8s.tao("nccl-probe", "--json", *ON_REAL, "--max-wait", "25", check=False, timeout=240)
    out = json.loads(proc.stdout)
    k8s.ids.append(out["job_id"])
    assert proc.returncode == 1 and out["verdict"] == "pull-failed" and out["exit_code"] is None, out
    assert "could not be pulled" in proc.stderr and "TAO_K8S_NCCL_ENV" not in proc.stderr


def test_probe_on_real_nodes_that_hangs_is_stopped_by_its_timeout(k8s):
    """Both ranks run on the real kubelets; torchrun waits forever; coreutils-style timeout kills it (exit 124)."""
    proc = k8s.tao("nccl-probe", "--json", *ON_REAL, "--image", lk.HANG_IMAGE, "--timeout", "5", "--force",
                   check=False, timeout=240)
    out = json.loads(proc.stdout)
    k8s.ids.append(out["job_id"])
    assert proc.returncode == 1 and out["verdict"] == "hang/timeout" and out["exit_code"] == 124, out
    assert "TAO_K8S_NCCL_ENV" in proc.stderr
    pods = k8s.kjson("get", "pods", "-l", f"tao-job-id={out['job_id']}")["items"]
    assert pods and {p["spec"]["nodeName"] for p in pods} <= set(lk.REAL_NODES)


def test_gloo_cpu_probe_all_reduces_between_two_real_nodes_and_opens_the_gate(k8s):
    out = gloo_probe_on_real_nodes(k8s)
    assert out["backend"] == "gloo-cpu" and out["gpus_per_node"] == 0
    assert out["proves"] == "gloo on CPU: the network path between nodes; NCCL over GPUs not proven"
    pods = k8s.kjson("get", "pods", "-l", f"tao-job-id={out['job_id']}")["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(lk.REAL_NODES)  # one pod per node
    logs = k8s.tao("logs", out["job_id"]).stdout
    for rank in (0, 1):
        assert f"gloo-cpu probe rank {rank}/2 on {out['job_id']}-{rank}: all_reduce sum=2 ok" in logs, logs
    assert _cache(k8s)[out["cluster"]]["backend"] == "gloo-cpu"
    # the gate passes for real: a two-node submit with no --skip-nccl-probe, saying what was proven
    sub = k8s.submit("--image", str(nccl_probe.pins.resolve("images.busybox")),
                     "--network-arch", "dino", "--action", "train", "--no-results", "--command", "true",
                     "--gpus", "0", "--nodes", "2", "--node-selector", f"{lk.REAL_NODE_LABEL}=true")
    rec = k8s.record(sub["id"])
    assert rec["backend"]["nccl_probe"] == "ok" and rec["backend"]["nccl_probe_backend"] == "gloo-cpu"
    assert "gloo on CPU: the network path between nodes; NCCL over GPUs not proven" in sub["gate"], sub["gate"]
