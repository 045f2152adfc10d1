"""The MCP tools on the local SLURM cluster (slurmctld/slurmd over sshd): submit -> status -> logs -> metrics
-> fetch through scripts/tao_mcp.py, each answer the one tao_jobs.py gives on the same records. The job runs
testclusters/fake_tao_train.sh, sent with the job as a spec file (container runtime none)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.mcp_client import Session, round_trip

pytestmark = pytest.mark.e2e

BANK = Path(__file__).resolve().parents[3]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"
EPOCHS = 3


def test_round_trip_through_the_mcp_tools(slurm_env, tmp_path):
    env = dict(os.environ)  # the cluster's variables, the test's record store and call log (slurm_env)
    with Session(env) as mcp:
        said = round_trip(mcp, "submit_slurm", {
            "network_arch": "dino", "action": "train", "num_gpus": 1, "max_gpus_per_node": 8, "cpus": "1",
            "time_hours": 0.5, "runtime": "none", "name": "mcp round trip",
            "spec_file": [f"fake_tao_train.sh={TRAINER}"],
            "command": ["sh", "-c", f'exec sh "$1" --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs {EPOCHS}',
                        "tao", "{specs}/fake_tao_train.sh"]}, tmp_path, env, EPOCHS)
    jid = said["job"]["id"]
    assert said["job"]["platform"] == "slurm" and said["view"]["description"] == "mcp round trip"
    assert sorted(p.name for p in slurm_env["state_dir"].glob("*.json")) == [f"{jid}.json"]
    folder = Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"]) / "results" / jid
    assert (folder / "train" / "status.json").is_file()
    assert said["metrics"]["rows"][-1]["epoch"] == EPOCHS - 1
