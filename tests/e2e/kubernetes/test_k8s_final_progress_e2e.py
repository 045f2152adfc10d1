"""Issue 49 on real kubelet pods: a job status saw running (epoch 1/6), then another poller saw end (the core's
refresh alone: a sweep's supervisor, an MCP status, a watch in another shell), shows its last epoch and KPIs on
its status line, not the stale `epoch 1/6`; ``logs ID --tail N`` of the finished pod prints the job's last lines
(it printed nothing: they were the bank's final status lines, left out); ``metrics`` reads it.

The job is testclusters/fake_tao_train.sh, reached through the PVC (its host folder), run by busybox.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import k8s_verbs_support
from k8s_verbs_support import BANK, ON_REAL

import testclusters.kubernetes as lk
from taobank import pins
from tests.support.progress_wait import wait_for_progress
from tests.support.results_cli import tao_jobs

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s  # the fixtures the tests take
trainer_on_pvc = k8s_verbs_support.trainer_on_pvc

BUSYBOX = str(pins.resolve("images.busybox"))
EPOCHS = 6
#: the core's refresh of one job, as any poller other than status does it (no progress read, none remembered)
REFRESH = ("import sys; sys.path.insert(0, sys.argv[1]); from taobank import platform; "
           "(v,) = platform.refresh([platform.load_for(sys.argv[2], 'kubernetes', 'status')]); print(v.state)")


def test_a_job_seen_running_then_ended_under_another_poller_shows_its_last_epoch_and_its_logs(k8s, trainer_on_pvc):
    out = k8s.submit("--image", BUSYBOX, "--network-arch", "dino", "--action", "train", "--pvc-mount",
                     f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "1", "--ttl", "600", "--command",
                     f'sh {trainer_on_pvc} --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs {EPOCHS} --sleep 3')
    jid = out["id"]
    seen = wait_for_progress(lambda: json.loads(k8s.tao("status", jid, "--json").stdout)[0], min_epoch=1)
    assert seen["progress"]["epoch"] < EPOCHS - 1, seen  # remembered, not final
    end = time.time() + 180
    while True:  # another poller marks it
        state = subprocess.run([sys.executable, "-c", REFRESH, str(BANK / "scripts"), jid], env=k8s.env,
                               capture_output=True, text=True, timeout=120, check=True).stdout.strip()
        if state in ("COMPLETE", "ERROR", "CANCELED"):
            break
        assert time.time() < end, state
        time.sleep(2)
    assert state == "COMPLETE"
    line = tao_jobs("status", jid, env=k8s.env).stdout
    assert f"[SUCCESS epoch {EPOCHS}/{EPOCHS} train_loss=" in line, line  # not the epoch seen running
    (after,) = json.loads(tao_jobs("status", jid, "--json", env=k8s.env).stdout)
    assert after["progress"]["epoch"] == EPOCHS - 1 and "val_loss" in after["progress"]["kpis"], after
    tail = tao_jobs("logs", jid, "--tail", "2", env=k8s.env).stdout
    assert f"Epoch {EPOCHS - 1}: train_loss=" in tail and "@@tao-final" not in tail, tail
    rows = json.loads(tao_jobs("metrics", jid, "--json", env=k8s.env).stdout)["rows"]
    assert [r["epoch"] for r in rows] == list(range(EPOCHS))
