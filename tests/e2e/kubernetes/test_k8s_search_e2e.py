"""A search on real kubelet pods, submitted and then left alone: 12 trials of TPE with ASHA, at most 3 at once, in
ONE Indexed Job. Each trial's pod (Debian's python3 with numpy, tao-local.test/python-numpy:2) runs the search's
runner from the ConfigMap mounted at /tao-search; the study's journal is on the shared PVC; the runner asks it for a
learning rate and runs the stand-in trainer (on the PVC) with it. Nothing calls the bank while it runs: kubectl
alone watches the Job until it has ended, then the outcome is read.

The stand-in (testclusters/fake_tao_train.sh with fake.lr_optimum=0.001) makes the lowest val_loss
0.4 + 0.25 * log10(lr / 0.001)^2, so the best trial is known to be near lr = 0.001.
"""
from __future__ import annotations

import json
import math
import time

import pytest
import k8s_verbs_support
from k8s_verbs_support import ON_REAL

import testclusters.kubernetes as lk
from testclusters.kubernetes import search_image
from tests.support.results_cli import tao_jobs

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s
trainer_on_pvc = k8s_verbs_support.trainer_on_pvc
TRIALS, K, EPOCHS = 12, 3, 6


def test_a_tpe_study_with_asha_runs_by_itself_prunes_and_finds_the_optimum(k8s, trainer_on_pvc):
    image = search_image.ensure()  # built once, imported into each real node when missing
    proc = k8s.tao("submit", "--json", "--image", image, "--network-arch", "dino", "--action", "train",
                   "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "1", "--no-input-check", "--command",
                   f'sh {trainer_on_pvc} --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs {EPOCHS} '
                   "--sleep 2 -e spec.yaml fake.lr_optimum=0.001",
                   "--search", "tpe", "--trials", str(TRIALS), "--max-concurrent", str(K), "--kpi", "val_loss",
                   "--space", "train.optim.lr=loguniform(1e-5,1e-1)", "--prune", "asha")
    done = json.loads(proc.stdout)
    sweep = done["sweep"]
    assert "search site ok on the results volume (journal lock" in done["gate"]  # a pod of the image checked it
    k8s.ids += [j["id"] for j in done["jobs"]] + [sweep]
    end = time.time() + 600
    while True:  # kubectl alone: the Indexed Job until it has ended
        (job,) = k8s.kjson("get", "jobs", "-l", f"tao-sweep={sweep}")["items"]
        active = int(job["status"].get("active") or 0)
        assert active <= K, job["status"]
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
               for c in job["status"].get("conditions") or []):
            break
        assert time.time() < end, job["status"]
        time.sleep(3)
    env = {**k8s.env}
    rows = json.loads(tao_jobs("status", "--sweep", sweep, "--json", env=env).stdout)
    states = [r["state"] for r in rows]
    assert len(rows) == TRIALS and set(states) <= {"COMPLETE", "PRUNED"}, rows
    assert "PRUNED" in states and "COMPLETE" in states, states
    for r in rows:
        assert set(r["overrides"]) == {"train.optim.lr"} and r["study"]["state"] == r["state"], r
        if r["state"] == "PRUNED":
            assert r["study"]["epochs"] < EPOCHS
    pruned = next(r for r in rows if r["state"] == "PRUNED")
    (view,) = json.loads(tao_jobs("status", pruned["id"], "--json", env=env).stdout)
    assert "PRUNED at epoch " in view["message"], view
    assert sum(r["study"]["epochs"] for r in rows) < TRIALS * EPOCHS
    best = json.loads(tao_jobs("sweep", "best", sweep, "--json", env=env).stdout)
    (top,) = [r for r in rows if r["study"].get("best")]
    assert best["id"] == top["id"] and best["kpi"] == "val_loss"
    lr = float(best["overrides"]["train.optim.lr"])
    assert abs(math.log10(lr / 0.001)) < 0.5, best
