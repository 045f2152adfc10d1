"""A search on the real local Docker engine, submitted and then left alone: 12 trials of TPE with ASHA, at most 3
at once. Each trial's container (tao-local.test/python:1: busybox, Debian's python3 with numpy) runs the search's
runner from the folder mounted at /tao-search, which asks the study for a learning rate and runs the stand-in
trainer with it; the sweep's detached supervisor starts the held trials. The test only reads the record files and
asks ``docker ps`` until every trial has ended, then reads the outcome.

The stand-in (testclusters/fake_tao_train.sh with fake.lr_optimum=0.001) makes the lowest val_loss
0.4 + 0.25 * log10(lr / 0.001)^2, so the best trial is known to be near lr = 0.001.
"""
from __future__ import annotations

import json
import math
import time

import pytest

from docker_support import BANK, Docker

pytestmark = pytest.mark.e2e

FAKE = f"{BANK / 'testclusters'}:/fake"
TRAIN = 'exec sh /fake/fake_tao_train.sh --results "$RESULTS_DIR" --epochs 6 --sleep 2 "$@"'
TRIALS, K, EPOCHS = 12, 3, 6


@pytest.fixture()
def dk(docker_cluster, tmp_path) -> Docker:
    from testclusters.docker import PYTHON_IMAGE

    d = Docker(docker_cluster, tmp_path)
    d.image = PYTHON_IMAGE
    return d


def test_a_tpe_study_with_asha_runs_by_itself_prunes_and_finds_the_optimum(dk):
    done = dk.submit("--network-arch", "dino", "--action", "train", "--mount", FAKE, "--stop-grace", "5",
                     "--search", "tpe", "--trials", str(TRIALS), "--max-concurrent", str(K), "--kpi", "val_loss",
                     "--space", "train.optim.lr=loguniform(1e-5,1e-1)", "--prune", "asha",
                     "--", "sh", "-c", TRAIN, "tao", "-e", "spec.yaml", "fake.lr_optimum=0.001")
    sweep, ids = done["sweep"], [j["id"] for j in done["jobs"]]
    folder = dk.results / sweep / "search"
    assert {p.name for p in folder.iterdir()} >= {"search.pyz", "study.json"}

    def stored(jid: str) -> str:  # the record file itself: reading it calls nothing
        return json.loads((dk.tmp / "state" / f"{jid}.json").read_text())["state"]

    end = time.time() + 600
    while any(stored(j) in ("PENDING", "RUNNING") for j in ids):  # the supervisor marks each end
        assert time.time() < end, [stored(j) for j in ids]
        running = dk.docker("ps", "-q", "--filter", f"label=org.tao-skill-bank.sweep={sweep}").stdout.split()
        assert len(running) <= K, running
        time.sleep(2)
    rows = json.loads(dk.run("tao_jobs.py", "status", "--sweep", sweep, "--json").stdout)
    states = [r["state"] for r in rows]
    assert set(states) <= {"COMPLETE", "PRUNED"} and "PRUNED" in states and "COMPLETE" in states, rows
    for r in rows:
        assert set(r["overrides"]) == {"train.optim.lr"} and r["study"]["state"] == r["state"], r
        if r["state"] == "PRUNED":
            assert r["study"]["epochs"] < EPOCHS
            (view,) = json.loads(dk.ok("status", r["id"], "--json").stdout)
            assert view["message"].startswith("PRUNED at epoch "), view
    assert sum(r["study"]["epochs"] for r in rows) < TRIALS * EPOCHS
    best = json.loads(dk.run("tao_jobs.py", "sweep", "best", sweep, "--json").stdout)
    (top,) = [r for r in rows if r["study"].get("best")]
    assert best["id"] == top["id"] and best["kpi"] == "val_loss"
    lr = float(best["overrides"]["train.optim.lr"])
    assert abs(math.log10(lr / 0.001)) < 0.5, best
    assert best["checkpoints"], best
