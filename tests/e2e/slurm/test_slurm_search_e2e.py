"""A search on the local SLURM cluster, submitted and then left alone: 12 trials of TPE with ASHA, at most 3 at
once, in ONE job array; each array task asks the study (its journal on the shared folder) for its learning rate,
runs the stand-in trainer with it, is pruned or runs its course, and tells the study. Nothing polls while it runs:
the test watches only squeue until the array is gone, then reads the outcome.

The stand-in (testclusters/fake_tao_train.sh with fake.lr_optimum=0.001) makes the lowest val_loss
0.4 + 0.25 * log10(lr / 0.001)^2, so the best trial is known to be near lr = 0.001.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from taobank.platforms.slurm.ssh import Connection
from tests.support.results_cli import tao_jobs as jobs

pytestmark = pytest.mark.e2e

BANK = Path(__file__).resolve().parents[3]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"
TRIALS, K, EPOCHS = 12, 3, 6


def submit(tmp_path: Path, *flags: str) -> dict:
    spec = {"network_arch": "dino", "action": "train", "num_gpus": 1, "max_num_gpus_per_node": 8, "cpus_per_task": 1,
            "time_hours": 0.5, "container_runtime": "none", "spec_files": {"fake_tao_train.sh": str(TRAINER)},
            "command": ["sh", "-c", 'f=$1; shift; exec sh "$f" --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" '
                        f'--epochs {EPOCHS} --sleep 2 "$@"', "tao", "{specs}/fake_tao_train.sh", "-e", "spec.yaml",
                        "fake.lr_optimum=0.001"]}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_slurm.py"), "submit", "--spec", str(path),
                           *flags, "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_tpe_study_with_asha_runs_by_itself_prunes_and_finds_the_optimum(slurm_env, tmp_path):
    done = submit(tmp_path, "--search", "tpe", "--trials", str(TRIALS), "--max-concurrent", str(K), "--kpi",
                  "val_loss", "--space", "train.optim.lr=loguniform(1e-5,1e-1)", "--prune", "asha")
    sweep = done["sweep"]
    aid = done["jobs"][0]["backend_ref"].split(":")[1].split("_")[0]
    conn = Connection()
    deadline = time.time() + 600
    while conn.remote(["squeue", "-h", "-r", "-j", aid], check=False).stdout.strip():  # left alone: squeue only
        assert time.time() < deadline, "the search's array still runs after 10 minutes"
        time.sleep(5)
    rows = json.loads(jobs("status", "--sweep", sweep, "--json").stdout)
    states = [r["state"] for r in rows]
    assert len(rows) == TRIALS and set(states) <= {"COMPLETE", "PRUNED"}, rows
    pruned = [r for r in rows if r["state"] == "PRUNED"]
    assert pruned and "COMPLETE" in states, states
    for r in rows:  # every trial's sampled value is shown, and the study knows it by the trial's job id
        assert set(r["overrides"]) == {"train.optim.lr"} and r["study"]["state"] == r["state"], r
    for r in pruned:  # stopped early, with the pruner's reason as its status line
        view = json.loads(jobs("status", r["id"], "--json").stdout)[0]
        assert view["message"].startswith("PRUNED at epoch ") and "val_loss" in view["message"], view
        assert r["study"]["epochs"] < EPOCHS
    # SLURM's own accounting: never more than K tasks of the array at once
    acct = conn.remote(["sacct", "-n", "-X", "-P", "-o", "JobID,Start,End", "-j", aid]).stdout
    spans = [(datetime.fromisoformat(s), datetime.fromisoformat(e)) for _, s, e in
             (line.split("|") for line in acct.splitlines() if line.strip())]
    assert len(spans) == TRIALS and max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans) <= K
    # the epochs spent: pruning saved some of the grid's TRIALS * EPOCHS
    assert sum(r["study"]["epochs"] for r in rows) < TRIALS * EPOCHS
    best = json.loads(jobs("sweep", "best", sweep, "--json").stdout)  # the study's KPI and direction
    (top,) = [r for r in rows if r["study"].get("best")]
    assert best["id"] == top["id"] and best["kpi"] == "val_loss" and best["mode"] == "min"
    lr = float(best["overrides"]["train.optim.lr"])
    assert abs(math.log10(lr / 0.001)) < 0.5, best  # near the stand-in's optimum
    assert abs(best["value"] - (0.4 + 0.25 * math.log10(lr / 0.001) ** 2)) <= 0.0125
    assert best["checkpoints"], best
    text = jobs("status", "--sweep", sweep).stdout
    assert "best so far: trial" in text and top["id"] in text.splitlines()[-1]
    # a pruned trial continues from its checkpoint with the values its study gave it (outside the study)
    shown = jobs("continue", pruned[0]["id"], "--dry-run").stdout
    assert f"train.optim.lr={pruned[0]['overrides']['train.optim.lr']}" in shown
    assert "resume_training_checkpoint_path=" in shown
    study = json.loads(jobs("study", sweep, "--json").stdout)  # Optuna's own reading of the journal
    assert len(study["trials"]) == TRIALS and study["best"]["job_id"] == top["id"]
    assert {t["state"] for t in study["trials"]} == set(states)
