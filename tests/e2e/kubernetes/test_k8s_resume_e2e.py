"""Long runs on real kubelet pods: an evicted pod's replacement resumes from the checkpoint on the job's
volume; ``continue`` carries on a canceled job; a ``--parent`` child reads its parent's checkpoint.

The trainer is testclusters/fake_tao_train.sh on the PVC, run by busybox with an argv (``--args-json``):
TAO's ``train/model_epoch_EEE_step_SSSSS.pth`` per epoch in the job's folder, and TAO's resume override honoured.
"""
from __future__ import annotations

import json
import re
import time

import pytest
import k8s_verbs_support
from k8s_verbs_support import ON_REAL

import testclusters.kubernetes as lk
from taobank import pins

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s  # the fixtures the tests take
trainer_on_pvc = k8s_verbs_support.trainer_on_pvc

BUSYBOX = str(pins.resolve("images.busybox"))
BASE = ["--image", BUSYBOX, "--network-arch", "dino", "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_REAL,
        "--gpus", "1"]


def trainer(path: str, epochs: int) -> list[str]:
    # $(VAR) is expanded by the kubelet in an argv: the job's own folder on the volume
    return ["--action", "train", "--args-json", json.dumps(
        ["sh", path, "--results", "$(TAO_API_RESULTS_DIR)/$(TAO_API_JOB_ID)", "--epochs", str(epochs), "--sleep", "1"])]


def wait_file(path, timeout: float = 60) -> None:
    end = time.time() + timeout
    while not path.exists():
        assert time.time() < end, f"{path} never appeared"
        time.sleep(0.5)


def resumed_at(text: str) -> int:
    found = re.search(r"resumed from checkpoint \S+model_epoch_\d+_step_\d+\.pth at epoch (\d+)", text)
    assert found, text
    return int(found.group(1))


def terminal(st: dict) -> bool:
    return st["state"] in ("COMPLETE", "ERROR", "CANCELED")


def test_an_evicted_pod_is_replaced_by_one_that_resumes_from_the_checkpoint(k8s, trainer_on_pvc):
    out = k8s.submit(*BASE, *trainer(trainer_on_pvc, 25))
    folder = lk.state_root() / "pv" / out["id"]
    wait_file(folder / "train" / "model_epoch_003_step_00040.pth")
    (pod,) = k8s.kjson("get", "pods", "-l", f"tao-job-id={out['id']}")["items"]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"]}}
    k8s.kubectl("create", "--raw", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/"
                f"{pod['metadata']['name']}/eviction", "-f", "-", stdin=json.dumps(eviction))
    st = k8s.wait(out["id"], terminal, timeout=150)
    assert st["state"] == "COMPLETE" and st["pod_attempts"] == 2, \
        (st, k8s.tao("logs", out["id"], check=False).stdout[-3000:], k8s.kjson("get", "job", out["name"])["status"])
    logs = k8s.tao("logs", out["id"]).stdout
    assert resumed_at(logs) >= 3 and "tao: resuming from checkpoint" in logs
    kept = "".join(p.read_text() for p in (folder / "logs").glob("*.log"))
    assert kept.count("Epoch 0:") == 1 and "Epoch 24:" in kept  # the replacement did not start again


def test_continue_a_canceled_job_and_a_parent_child_reads_its_checkpoint(k8s, trainer_on_pvc):
    out = k8s.submit(*BASE, *trainer(trainer_on_pvc, 40))
    wait_file(lk.state_root() / "pv" / out["id"] / "train" / "model_epoch_003_step_00040.pth")
    k8s.tao("cancel", out["id"])
    early = k8s.tao("submit", *BASE, "--action", "evaluate", "--parent", out["id"], "--command", "true", check=False)
    assert early.returncode == 1 and "not COMPLETE" in early.stderr and len(early.stderr.strip().splitlines()) == 1
    new = json.loads(k8s.tao("continue", out["id"], "--json").stdout)
    k8s.ids.append(new["id"])
    assert new["continues"] == out["id"]
    st = k8s.wait(new["id"], terminal, timeout=150)
    assert st["state"] == "COMPLETE", st
    assert resumed_at(k8s.tao("logs", new["id"]).stdout) >= 3
    child = k8s.submit(*BASE, "--action", "evaluate", "--parent", new["id"], "--command",
                       'echo "evaluating {parent.checkpoint}"; test -f "{parent.checkpoint}"')
    assert child["parent"] == new["id"]
    st = k8s.wait(child["id"], terminal, timeout=120)
    assert st["state"] == "COMPLETE", st
    assert f"evaluating /results/{new['id']}/train/model_epoch_039_step_00400.pth" in k8s.tao("logs", child["id"]).stdout
