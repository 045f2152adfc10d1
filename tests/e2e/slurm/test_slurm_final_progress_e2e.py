"""Issue 49 on the local SLURM cluster: a finished job's status line carries its last epoch and KPIs (also when
another poller saw it end, after status had seen it running), ``logs --tail N`` shows its last lines, and
``metrics`` reads its status file: with the plain stand-in (testclusters/fake_tao_train.sh) and with the
Lightning one (testclusters/tao_lightning, the repository's copy: it writes TAO's status.json on rank 0).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from taobank.platforms.slurm import logs as slurm_logs, submit as slurm_submit
from testclusters import slurm as local_slurm, tao_lightning
from tests.support.progress_wait import wait_for_progress
from tests.support.results_cli import tao_jobs as jobs

sys.path.insert(0, os.path.dirname(__file__))
from slurm_helpers import base_spec, probe_gloo_ok, wait_state  # noqa: E402

pytestmark = pytest.mark.e2e

BANK = Path(__file__).resolve().parents[3]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"
EPOCHS = 4


def view(job_id: str) -> dict:
    (one,) = json.loads(jobs("status", job_id, "--json").stdout)
    return one


def test_a_job_seen_running_then_ended_under_another_poller_shows_its_last_epoch(slurm_env):
    rec = slurm_submit.submit(base_spec(
        container_runtime="none", spec_files={"fake_tao_train.sh": str(TRAINER)},
        command=["sh", "-c", f'exec sh "$1" --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs {EPOCHS} '
                 "--sleep 3 --action train", "tao", "{specs}/fake_tao_train.sh"]))
    jid = rec["id"]
    seen = wait_for_progress(lambda: view(jid), min_epoch=1, timeout=150)  # status sees it mid-run: remembered
    assert seen["progress"]["epoch"] < EPOCHS - 1
    done = wait_state(jid, timeout=120)  # the core's refresh alone (what a sweep's supervisor or a watch does)
    assert done["state"] == "COMPLETE", slurm_logs.logs(jid)
    line = jobs("status", jid).stdout
    assert f"[SUCCESS epoch {EPOCHS}/{EPOCHS} " in line and "val_loss=" in line, line  # not the epoch seen running
    assert view(jid)["progress"]["epoch"] == EPOCHS - 1
    tail = jobs("logs", jid, "--tail", "2").stdout
    assert f"Epoch {EPOCHS - 1}: train_loss=" in tail and "tao: command exited with code 0" in tail, tail
    rows = json.loads(jobs("metrics", jid, "--json").stdout)["rows"]
    assert [r["epoch"] for r in rows] == list(range(EPOCHS))


def test_the_lightning_stand_in_writes_taos_status_file_and_its_end_shows_it(slurm_env):
    """The Lightning stand-in trains 2 epochs (train.num_epochs, TAO's key) with DDP on 2 nodes x 2 CPU devices (the
    issue's 2-node training, where metrics said "no status file yet"); rank 0's status.json gives the finished
    job's status line and metrics."""
    base = Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"])
    standin = base / f"standin-{uuid.uuid4().hex[:8]}"  # this checkout's copy, beside the nodes' venv
    tao_lightning.install_standin(standin, str(local_slurm.lightning_dir() / "bin" / "python"))
    try:
        _train_and_read(base, standin)
    finally:
        shutil.rmtree(standin, ignore_errors=True)


def _train_and_read(base: Path, standin: Path) -> None:
    probe_gloo_ok()  # the multi-node gate passes for real (gloo on the CPU between the nodes)
    rec = slurm_submit.submit(base_spec(container_runtime="none", num_gpus=4, num_nodes=2, memory="3G", time_hours=None,
                                        time_minutes=5, command=[str(standin / "dino"), "train",
                                                                 "train.num_epochs=2"]))
    jid = rec["id"]
    done = wait_state(jid, timeout=360)
    assert done["state"] == "COMPLETE", slurm_logs.logs(jid)
    ranks = [json.loads(ln) for ln in (base / "results" / jid / "lightning_ranks.jsonl").read_text().splitlines()]
    assert sorted(r["global_rank"] for r in ranks) == [0, 1, 2, 3]  # every rank trained; rank 0 alone wrote status
    status = base / "results" / jid / "train" / "status.json"
    lines = [json.loads(ln) for ln in status.read_text().splitlines()]
    assert [ln["epoch"] for ln in lines if "epoch" in ln] == [0, 1] and lines[-1]["message"] == \
        "Train finished successfully."
    line = jobs("status", jid).stdout
    assert "[SUCCESS epoch 2/2 train_loss=" in line, line
    rows = json.loads(jobs("metrics", jid, "--json").stdout)["rows"]
    assert [r["epoch"] for r in rows] == [0, 1] and all("train_loss" in r for r in rows), rows


def test_a_generic_commands_trainer_shows_its_progress_in_the_one_sweep(slurm_env):
    """A command the bank does not read as TAO's (custom/run) whose trainer writes train/status.json: status read
    only <folder>/status.json and <folder>/run/status.json in its sweep, so no progress, while metrics (which reads
    every sub-folder) found it. Now the sweep reads the same files."""
    import time

    rec = slurm_submit.submit(base_spec(
        network_arch=None, action=None, container_runtime="none", spec_files={"fake_tao_train.sh": str(TRAINER)},
        command=["sh", "-c", 'exec sh "$1" --results "$RESULTS_DIR" --epochs 3 --sleep 2', "tao",
                 "{specs}/fake_tao_train.sh"]))
    jid = rec["id"]
    assert jid.startswith("custom-run-")
    end, one = time.time() + 150, view(jid)
    while one["state"] not in ("COMPLETE", "ERROR", "CANCELED"):  # status alone: the job ends under its sweep
        assert time.time() < end, one
        time.sleep(2)
        one = view(jid)
    assert one["state"] == "COMPLETE" and one["progress"]["file"] == "train/status.json", one
    assert one["progress"]["line"].startswith("SUCCESS epoch 3/3 "), one

