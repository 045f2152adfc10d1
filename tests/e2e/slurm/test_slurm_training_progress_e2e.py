"""Training you can watch on the local SLURM cluster: status shows the running training's epoch, ETA and KPIs
in its one sweep command, and metrics prints the KPI series after the job ended.

The job runs testclusters/fake_tao_train.sh (sent as a spec file, container runtime none), which writes
TAO's status.json in the real format and sleeps between epochs, so the test sees it mid-run.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from slurm_helpers import base_spec, call_log, wait_state

from taobank.platforms.slurm import logs as slurm_logs, submit as slurm_submit
from tests.support.progress_wait import wait_for_progress
from tests.support.results_cli import tao_jobs as jobs

pytestmark = pytest.mark.e2e

BANK = Path(__file__).resolve().parents[3]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"
EPOCHS = 6


def remote_commands(log: Path) -> int:
    return sum(1 for argv in call_log(log) if Path(argv[0]).name == "ssh" and "-O" not in argv and "-G" not in argv
               and argv[-1] != "true")


def test_status_shows_progress_mid_run_and_metrics_the_series_after(slurm_env):
    rec = slurm_submit.submit(base_spec(
        container_runtime="none", spec_files={"fake_tao_train.sh": str(TRAINER)},
        command=["sh", "-c", f'exec sh "$1" --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs {EPOCHS} '
                 "--sleep 5 --action train", "tao", "{specs}/fake_tao_train.sh"]))  # a window wide enough under load
    jid = rec["id"]
    commands: list[int] = []

    def view() -> dict:
        before = remote_commands(slurm_env["call_log"])
        (one,) = json.loads(jobs("status", jid, "--json").stdout)
        commands.append(remote_commands(slurm_env["call_log"]) - before)
        return one

    seen = wait_for_progress(view, timeout=150)
    assert set(commands) == {1}  # progress rides in the one sweep command, every time
    p = seen["progress"]
    # TAO's 0-based epoch and last index, shown from 1
    assert p["max_epoch"] == EPOCHS - 1 and p["file"] == "train/status.json" and "val_loss" in p["kpis"]
    assert p["line"].startswith(f"epoch {p['epoch'] + 1}/{EPOCHS} eta ")
    text = jobs("status", jid).stdout
    assert "[epoch " in text and "val_loss=" in text
    done = wait_state(jid)
    assert done["state"] == "COMPLETE", slurm_logs.logs(jid)
    rows = json.loads(jobs("metrics", jid, "--json").stdout)["rows"]
    assert [r["epoch"] for r in rows] == list(range(EPOCHS))
    assert rows[0]["train_loss"] > rows[-1]["train_loss"]  # the fake trainer's loss goes down
    csv = jobs("metrics", jid, "--csv").stdout.splitlines()
    assert csv[0].startswith("epoch,") and len(csv) == EPOCHS + 1
