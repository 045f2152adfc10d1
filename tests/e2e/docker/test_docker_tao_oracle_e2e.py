"""What TAO's own code writes, replayed by a job on the real Docker engine (local_cluster.py up docker): the
stand-in testclusters/fake_tao_train.sh --replay appends the status lines nvidia-tao-core's StatusLogger wrote
on this machine (tests/support/tao_oracle.py) and saves Lightning's checkpoint names where Lightning saved them.
The bank must read them as TAO meant: the best epoch stays where it was when validation diverges after it, and a
run that TAO ended with FAILURE is an ERROR although its process exited 0."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from docker_support import BANK, Docker, terminal
from tests.support import tao_oracle as oracle

pytestmark = pytest.mark.e2e

FAKE = f"{BANK / 'testclusters'}:/fake"
TRAIN = 'exec sh /fake/fake_tao_train.sh --results "$RESULTS_DIR" --replay /replay/train.replay'


@pytest.fixture()
def dk(docker_cluster, tmp_path) -> Docker:
    return Docker(docker_cluster, tmp_path)


def replayed(dk: Docker, scenario: oracle.Scenario) -> dict:
    """A job replaying TAO's run of ``scenario``, waited for to its end."""
    run = oracle.train(dk.tmp / "oracle", scenario)
    replay = oracle.write_replay(run, dk.tmp / "replay" / "train.replay")
    job = dk.submit("--network-arch", "dino", "--action", "train", "--mount", FAKE,
                    "--mount", f"{replay.parent}:/replay", "--", "sh", "-c", TRAIN, "tao")
    return dk.wait(job["id"], terminal, timeout=90)


def test_a_validation_nan_after_the_best_epoch_keeps_the_best_checkpoint(dk):
    done = replayed(dk, oracle.Scenario())
    assert done["state"] == "COMPLETE", done
    for kpi, mode in (("val_mAP", "max"), ("val_loss", "min")):
        listing = json.loads(dk.ok("artifacts", done["id"], "--kpi", kpi, "--mode", mode, "--json").stdout)
        assert listing["best"]["checkpoints"][0] == "train/model_epoch_004_step_00050.pth", listing["best"]


def test_taos_failure_with_exit_code_0_is_an_error_that_says_so(dk):
    done = replayed(dk, oracle.Scenario(stop_at=(5, oracle.Interrupted)))
    assert done["exit_code"] == 0, done
    assert done["state"] == "ERROR" and done["err_class"] == "ERR_PROGRAM", done
    assert "FAILURE" in done["message"] and "DINO train was interrupted" in done["message"], done
    last = json.loads(Path(done["results_dir"], "train", "status.json").read_text().splitlines()[-1])
    assert (last["status"], last["message"]) == ("FAILURE", "DINO train was interrupted: stopped in epoch 5")
