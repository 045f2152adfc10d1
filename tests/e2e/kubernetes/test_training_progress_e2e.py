"""Training you can watch on real kubelet pods: status of the one running job reads its progress with one
kubectl exec, and metrics reads the KPI series from the results volume after the pods are gone.

The job is testclusters/fake_tao_train.sh, reached through the PVC (its host folder), run by busybox.
"""
from __future__ import annotations

import json
import time

import pytest
import k8s_verbs_support
from k8s_verbs_support import ON_REAL

import testclusters.kubernetes as lk
from taobank import pins
from tests.support.progress_wait import wait_for_progress
from tests.support.results_cli import tao_jobs

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s  # the fixtures the tests take
trainer_on_pvc = k8s_verbs_support.trainer_on_pvc

BUSYBOX = str(pins.resolve("images.busybox"))
EPOCHS = 6


def test_progress_while_running_and_metrics_after_the_pods_are_gone(k8s, trainer_on_pvc):
    out = k8s.submit("--image", BUSYBOX, "--network-arch", "dino", "--action", "train", "--pvc-mount",
                     f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "1", "--ttl", "5", "--command",
                     f'sh {trainer_on_pvc} --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs {EPOCHS} --sleep 3')
    jid = out["id"]
    seen = wait_for_progress(lambda: json.loads(k8s.tao("status", jid, "--json").stdout)[0])
    assert seen["progress"]["max_epoch"] == EPOCHS - 1 and "val_loss" in seen["progress"]["kpis"]  # TAO: 0-based
    assert f"/{EPOCHS} " in seen["progress"]["line"]  # shown from 1
    st = k8s.wait(jid, lambda s: s["state"] in ("COMPLETE", "ERROR", "CANCELED"), timeout=180)
    assert st["state"] == "COMPLETE", st
    gone = time.time() + 120  # the TTL controller removes the Job and its pods
    while time.time() < gone and k8s.kubectl("get", "pods", "-l", f"tao-job-id={jid}", "-o", "name").stdout.strip():
        time.sleep(2)
    assert not k8s.kubectl("get", "pods", "-l", f"tao-job-id={jid}", "-o", "name").stdout.strip()
    # issue 37: the finished job keeps the last [epoch ...] status saw, also once its pods are gone
    (after,) = json.loads(k8s.tao("status", jid, "--json").stdout)
    assert after["state"] == "COMPLETE" and after["progress"]["epoch"] >= seen["progress"]["epoch"], after
    assert f"epoch {EPOCHS}/{EPOCHS} " in k8s.tao("status", jid).stdout  # TAO's last status word may lead it
    rows = json.loads(tao_jobs("metrics", jid, "--json", env=k8s.env).stdout)["rows"]
    assert [r["epoch"] for r in rows] == list(range(EPOCHS))
    assert rows[0]["train_loss"] > rows[-1]["train_loss"]
