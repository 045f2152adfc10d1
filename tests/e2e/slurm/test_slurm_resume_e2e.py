"""Long runs on the local SLURM cluster: the wall-time chain, ``continue`` and ``--parent``.

The job runs testclusters/fake_tao_train.sh (a spec file, container runtime none): one
``model_epoch_NNN.pth`` per epoch in its results folder, and it honours TAO's
``train.resume_training_checkpoint_path=`` override (it says "resumed from checkpoint ... at epoch N").
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_helpers import base_spec, wait_state

from taobank import records
from taobank.platforms.slurm import logs as slurm_logs, submit as slurm_submit
from tests.support.results_cli import tao_jobs as jobs

pytestmark = pytest.mark.e2e

BANK = Path(__file__).resolve().parents[3]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"
TAO_SLURM = BANK / "scripts" / "tao_slurm.py"


def trainer_spec(epochs: int, sleep: int, **kw) -> dict:
    """The stand-in trainer as an argv command: the bank's resume override arrives as its last arguments."""
    return base_spec(container_runtime="none", spec_files={"fake_tao_train.sh": str(TRAINER)},
                     command=["sh", "-c", 'f=$1; shift; exec sh "$f" --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" '
                              f'--epochs {epochs} --sleep {sleep} "$@"', "tao", "{specs}/fake_tao_train.sh"], **kw)


def resumed_epoch(text: str) -> int | None:
    found = re.search(r"resumed from checkpoint \S+model_epoch_(\d+)_step_\d+\.pth at epoch (\d+)", text)
    return int(found.group(2)) if found else None


def two_node_trainer(**kw) -> dict:
    """The trainer on two nodes: rank 0 writes the job's checkpoints, rank 1 its own epochs aside (TAO's other
    ranks write none)."""
    spec = trainer_spec(50, 2, num_gpus=2, num_nodes=2, **kw)  # one GPU and CPU per node: not whole nodes
    spec["command"][2] = spec["command"][2].replace(
        'exec sh "$f" --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID"',
        'r="$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID"; [ "$NODE_RANK" = 0 ] || r="$r/rank$NODE_RANK"; '
        'echo "rank $NODE_RANK on $SLURMD_NODENAME"; exec sh "$f" --results "$r"')
    return spec


def test_jobs_past_their_wall_time_resubmit_themselves_and_complete_on_attempt_2(slurm_env):
    """One node and two nodes at once (the two chains wait out their wall time side by side): the warning
    stops every rank; attempt 2 resumes all of them from rank 0's checkpoint."""
    from slurm_helpers import probe_gloo_ok

    probe_gloo_ok()  # the multi-node gate passes for real
    chain = dict(time_hours=None, time_minutes=2, max_attempts=3, walltime_margin_seconds=50)
    rec = slurm_submit.submit(trainer_spec(50, 2, **chain))
    pair = slurm_submit.submit(two_node_trainer(**chain))
    jid = rec["id"]
    first = rec["backend_ref"]
    assert rec["backend"]["walltime_chain"] is True
    done = wait_state(jid, timeout=330)
    assert done["state"] == "COMPLETE", slurm_logs.logs(jid)
    assert done["backend"]["chain_attempt"] == 2 and done["backend"]["chain_seconds"] > 0
    assert done["backend_ref"] != first and done["backend_ref"] == f"slurm:{done['backend']['slurm_job_id']}"
    out = slurm_logs.logs(jid)["main.out"]  # attempt 2's log: the live job's folder
    assert "tao: attempt 2 of 3" in out
    epoch = resumed_epoch(out)
    assert epoch is not None and epoch > 0, out
    assert f"Epoch {epoch + 1}:" in out and "Epoch 0:" not in out
    (view,) = json.loads(jobs("status", jid, "--json").stdout)
    assert view["attempt"] == 2 and view["chain_seconds"] > 0
    folder = Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"]) / "results" / jid
    assert (folder / "train" / "model_epoch_049_step_00500.pth").is_file()

    done = wait_state(pair["id"], timeout=330)
    assert done["state"] == "COMPLETE", slurm_logs.logs(pair["id"])
    assert done["backend"]["chain_attempt"] == 2
    out = slurm_logs.logs(pair["id"])["main.out"]
    assert "tao: attempt 2 of 3" in out
    ranks = dict(re.findall(r"rank (\d) on (node\d)", out))  # attempt 2's log: both ranks, on both nodes
    assert sorted(ranks) == ["0", "1"] and sorted(ranks.values()) == ["node1", "node2"], out
    resumed = re.findall(r"resumed from checkpoint \S+model_epoch_(\d+)_step_\d+\.pth at epoch (\d+)", out)
    assert len(resumed) == 2 and len(set(resumed)) == 1 and int(resumed[0][1]) > 0, out  # both ranks, one checkpoint
    assert (Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"]) / "results" / pair["id"] / "train" / "model_epoch_049_step_00500.pth").is_file()


def test_continue_a_canceled_job_then_a_child_reads_its_checkpoint(slurm_env):
    rec = slurm_submit.submit(trainer_spec(60, 1))
    jid = rec["id"]
    folder = Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"]) / "results" / jid
    deadline = time.time() + 90
    while not (folder / "train" / "model_epoch_003_step_00040.pth").exists():
        assert time.time() < deadline, slurm_logs.logs(jid)
        time.sleep(1)
    jobs("cancel", jid)
    bad = jobs("continue", jid, "--from", "/etc/passwd", check=False)
    assert bad.returncode == 1 and "outside job" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    before = len(records.list_records())
    missing = jobs("continue", jid, "--from", "model_epoch_999.pth", check=False)
    assert missing.returncode == 1 and "no such file" in missing.stderr
    assert len(records.list_records()) == before  # nothing half-written

    new = json.loads(jobs("continue", jid, "--json").stdout)
    assert new["continues"] == jid and new["id"] != jid
    done = wait_state(new["id"], timeout=150)
    assert done["state"] == "COMPLETE" and done["continues"] == jid
    out = slurm_logs.logs(new["id"])["main.out"]
    assert (resumed_epoch(out) or 0) >= 3, out
    listed = jobs("list", "--json")
    assert any(v["id"] == new["id"] and v["continues"] == jid for v in json.loads(listed.stdout))

    child = json.loads(subprocess.run(
        [sys.executable, str(TAO_SLURM), "submit", "--json", "--parent", new["id"],
         "--network-arch", "dino", "--action", "evaluate", "--runtime", "none", "--num-gpus", "1",
         "--max-gpus-per-node", "8", "--cpus", "1", "--time-minutes", "5",
         "--", "sh", "-c", 'echo "evaluating $1"; test -f "$1"', "tao", "{parent.checkpoint}"],
        capture_output=True, text=True, check=True).stdout)
    assert child["parent"] == new["id"]
    done = wait_state(child["id"], timeout=90)
    assert done["state"] == "COMPLETE", slurm_logs.logs(child["id"])
    assert f"evaluating {folder.parent / new['id']}/train/model_epoch_059_step_00600.pth" in slurm_logs.logs(child["id"])["main.out"]
