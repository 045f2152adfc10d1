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
REFRESH = ("import sys; sys.path.insert(0, sys.argv[1]); from taobank.core import platform; "
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


def test_a_tier_c_job_shows_its_last_epoch_once_its_pod_has_ended(k8s, tmp_path):
    """Results staged in the pod and uploaded to S3 (tier C): no volume to read after the end, and its wrapper
    printed no final status lines, so a finished tier C training showed no progress at all. Now it prints them."""
    import secrets

    import yaml

    bucket = "tao-" + secrets.token_hex(4)
    lk.s3_make_bucket(bucket)
    spec = tmp_path / "tier-c-train.yaml"
    spec.write_text(yaml.safe_dump({
        "image": BUSYBOX, "network_arch": "dino", "action": "train", "results_dir": f"s3://{bucket}/results",
        "storage_tier": "C", "gpus": 1, "node_selector": {lk.REAL_NODE_LABEL: "true"},
        "args": ["sh", "-c", (BANK / "testclusters" / "fake_tao_train.sh").read_text(), "tao", "--results",
                    "$(TAO_API_RESULTS_DIR)/$(TAO_API_JOB_ID)", "--epochs", "3", "--sleep", "1"],
    }))
    creds = {"AWS_ACCESS_KEY_ID": lk.s3.ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": secrets.token_hex(20),
             "AWS_DEFAULT_REGION": lk.s3.REGION, "S3_ENDPOINT_URL": lk.s3_endpoint()}
    out = k8s.submit("--spec", str(spec), *[a for name in creds for a in ("--secret-env", name)], env=creds)
    st = k8s.wait(out["id"], lambda s: s["state"] in ("COMPLETE", "ERROR", "CANCELED"), timeout=180)
    assert st["state"] == "COMPLETE", st
    assert (st.get("progress") or {}).get("epoch") == 2, st
    assert "[SUCCESS epoch 3/3 " in tao_jobs("status", out["id"], env=k8s.env).stdout
    assert '"epoch": 2' in lk.s3_get(bucket, f"results/{out['id']}/train/status.json")  # the uploaded file agrees
