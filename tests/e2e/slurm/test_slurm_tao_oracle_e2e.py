"""What TAO's own code writes, replayed by a job on the local SLURM cluster: the stand-in
testclusters/fake_tao_train.sh --replay (sent as a spec file with the replay file beside it, container runtime
none) appends the status lines nvidia-tao-core's StatusLogger wrote on this machine (tests/support/tao_oracle.py)
and saves Lightning's checkpoint names where Lightning saved them. The best epoch stays where it was when
validation diverges after it, and a run TAO ended with FAILURE is an ERROR although its process exited 0."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from slurm_helpers import base_spec, wait_state

from taobank.platforms.slurm import logs as slurm_logs, submit as slurm_submit
from tests.support import tao_oracle as oracle
from tests.support.results_cli import tao_jobs as jobs

pytestmark = pytest.mark.e2e

BANK = Path(__file__).resolve().parents[3]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"


def replayed(tmp_path: Path, scenario: oracle.Scenario) -> dict:
    run = oracle.train(tmp_path / "oracle", scenario)
    replay = oracle.write_replay(run, tmp_path / "replay" / "train.replay")
    rec = slurm_submit.submit(base_spec(
        container_runtime="none", spec_files={"fake_tao_train.sh": str(TRAINER), "train.replay": str(replay)},
        command=["sh", "-c", 'exec sh "$1" --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --replay "$2"', "tao",
                 "{specs}/fake_tao_train.sh", "{specs}/train.replay"]))
    return wait_state(rec["id"])


def test_a_validation_nan_after_the_best_epoch_keeps_the_best_checkpoint(slurm_env, tmp_path):
    done = replayed(tmp_path, oracle.Scenario())
    assert done["state"] == "COMPLETE", slurm_logs.logs(done["id"])
    for kpi, mode in (("val_mAP", "max"), ("val_loss", "min")):
        listed = json.loads(jobs("artifacts", done["id"], "--kpi", kpi, "--mode", mode, "--json").stdout)
        assert listed["best"]["checkpoints"][0] == "train/model_epoch_004_step_00050.pth", listed["best"]


def test_taos_failure_with_exit_code_0_is_an_error_that_says_so(slurm_env, tmp_path):
    done = replayed(tmp_path, oracle.Scenario(stop_at=(5, oracle.Interrupted)))
    assert done["state"] == "ERROR" and done["err_class"] == "ERR_PROGRAM", done
    assert "FAILURE" in done["message"] and "DINO train was interrupted" in done["message"], done
