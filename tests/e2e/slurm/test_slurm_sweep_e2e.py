"""A sweep on the local SLURM cluster: one job array, its trials watched, ranked and cancelled as one unit.

Each trial runs testclusters/fake_tao_train.sh, which prints the overrides it got and writes status.json;
``fake.best_val`` sets its lowest val_loss, so the best trial is known in advance.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from slurm_helpers import call_log

from taobank import records
from taobank.platforms.slurm.ssh import Connection
from tests.support.results_cli import tao_jobs as jobs

pytestmark = pytest.mark.e2e

BANK = Path(__file__).resolve().parents[3]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"


def submit(tmp_path: Path, *flags: str, sleep: int, epochs: int = 3) -> dict:
    spec = {"network_arch": "dino", "action": "train", "num_gpus": 1, "max_num_gpus_per_node": 8, "cpus_per_task": 1,
            "time_hours": 0.5, "container_runtime": "none", "spec_files": {"fake_tao_train.sh": str(TRAINER)},
            "command": ["sh", "-c", 'f=$1; shift; exec sh "$f" --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" '
                        f'--epochs {epochs} --sleep {sleep} "$@"', "tao", "{specs}/fake_tao_train.sh", "-e", "spec.yaml"]}
    path = tmp_path / f"spec-{sleep}.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_slurm.py"), "submit", "--spec", str(path),
                           *flags, "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def ssh_commands(log: Path) -> int:
    return sum(1 for argv in call_log(log) if Path(argv[0]).name == "ssh" and "-O" not in argv and "-G" not in argv
               and argv[-1] != "true")


def rows(sweep: str) -> list[dict]:
    return json.loads(jobs("status", "--sweep", sweep, "--json").stdout)


def test_a_sweep_runs_as_one_array_at_most_k_at_once_and_best_names_the_lowest(slurm_env, tmp_path):
    before = ssh_commands(slurm_env["call_log"])
    done = submit(tmp_path, "--sweep", "fake.best_val=300,100,200", "--max-concurrent", "2", sleep=2)
    assert ssh_commands(slurm_env["call_log"]) - before <= 3  # check, stage, sbatch
    sweep = done["sweep"]
    refs = [j["backend_ref"] for j in done["jobs"]]
    aid = refs[0].split(":")[1].split("_")[0]
    assert refs == [f"slurm:{aid}_{i}" for i in range(3)]
    listed = json.loads(jobs("list", "--sweep", sweep, "--json").stdout)
    assert sorted(j["id"] for j in listed) == sorted(j["id"] for j in done["jobs"])
    deadline = time.time() + 180
    while True:
        before = ssh_commands(slurm_env["call_log"])
        seen = rows(sweep)
        assert ssh_commands(slurm_env["call_log"]) - before <= 2
        if all(r["state"] in ("COMPLETE", "ERROR", "CANCELED") for r in seen) or time.time() > deadline:
            break
        time.sleep(3)
    assert [r["state"] for r in seen] == ["COMPLETE"] * 3, seen
    assert [r["overrides"] for r in seen] == [{"fake.best_val": v} for v in ("300", "100", "200")]
    assert seen[1]["kpis"].get("val_loss") is not None
    out = jobs("logs", seen[1]["id"]).stdout
    assert "override fake.best_val=100" in out  # the trial got its value as a key=value argument after -e
    # SLURM's own accounting: never more than 2 tasks of the array ran at once
    acct = Connection().remote(["sacct", "-n", "-X", "-P", "-o", "JobID,Start,End", "-j", aid]).stdout
    spans = [(datetime.fromisoformat(s), datetime.fromisoformat(e)) for _, s, e in
             (line.split("|") for line in acct.splitlines() if line.strip())]
    assert len(spans) == 3
    assert max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans) <= 2
    best = json.loads(jobs("sweep", "best", sweep, "--kpi", "val_loss", "--json").stdout)
    assert best["id"] == seen[1]["id"] and best["trial"] == 1 and abs(best["value"] - 0.1) < 1e-9
    assert best["checkpoints"] == ["train/model_epoch_001_step_00020.pth"]


def test_cancel_sweep_leaves_nothing_running(slurm_env, tmp_path):
    done = submit(tmp_path, "--sweep", "fake.best_val=1,2,3", "--max-concurrent", "1", sleep=30)
    sweep = done["sweep"]
    aid = done["jobs"][0]["backend_ref"].split(":")[1].split("_")[0]
    jobs("cancel", "--sweep", sweep)
    assert {r["state"] for r in json.loads(jobs("list", "--sweep", sweep, "--json").stdout)} == {"CANCELED"}
    deadline = time.time() + 30
    while Connection().remote(["squeue", "-h", "-r", "-j", aid], check=False).stdout.strip():
        assert time.time() < deadline, "array tasks still queued or running after cancel --sweep"
        time.sleep(1)


def test_sweep_trials_past_their_wall_time_continue_as_jobs_of_their_own_with_no_requeue(slurm_env, tmp_path):
    """The wall-time chain inside the array, with --no-requeue (no self-retry): each task gets USR1 from SLURM,
    resubmits its trial's script, and the next attempt resumes under the same record with its own logs and marker."""
    done = submit(tmp_path, "--sweep", "fake.best_val=1,2", "--max-concurrent", "2", "--time-minutes", "2",
                  "--max-attempts", "3", "--walltime-margin", "50", "--no-requeue", sleep=2, epochs=50)
    ids = [j["id"] for j in done["jobs"]]
    aid = done["jobs"][0]["backend_ref"].split(":")[1].split("_")[0]
    deadline = time.time() + 360
    while True:
        seen = rows(done["sweep"])
        if all(r["state"] in ("COMPLETE", "ERROR", "CANCELED") for r in seen) or time.time() > deadline:
            break
        time.sleep(5)
    assert [r["state"] for r in seen] == ["COMPLETE"] * 2, seen
    for jid in ids:
        rec = json.loads(jobs("status", jid, "--json").stdout)[0]
        assert rec["attempt"] == 2 and rec["chain_seconds"] > 0, rec
        jdir = Path(records.load(jid)["backend"]["staged_dir"])
        out = jobs("logs", jid).stdout  # attempt 2's log: the folder of the job the task resubmitted
        assert "tao: attempt 2 of 3" in out and "resumed from checkpoint" in out, out[-2000:]
        hops = (jdir / "meta" / "retries.jsonl").read_text()
        (hop,) = [json.loads(x) for x in hops.splitlines()]
        assert hop["from"].startswith(f"{aid}_") and hop["reason"] == "walltime"
        marker = json.loads((jdir / "meta" / "exit.json").read_text())
        assert marker["slurm_job_id"] == hop["next"] and marker["exit_code"] == 0  # its own id, not the task's
