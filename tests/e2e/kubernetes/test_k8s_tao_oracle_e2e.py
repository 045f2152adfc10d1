"""What TAO's own code writes, replayed by a busybox job on a real kubelet node: the stand-in
testclusters/fake_tao_train.sh --replay (on the local PVC, beside the replay file) appends the status lines
nvidia-tao-core's StatusLogger wrote on this machine (tests/support/tao_oracle.py) and saves Lightning's
checkpoint names where Lightning saved them. The best epoch stays where it was when validation diverges after
it, and a run TAO ended with FAILURE is an ERROR although its pod exited 0 (the pod prints its status file's
last lines as it ends; status reads them as it sees the Job complete)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import k8s_verbs_support
from k8s_verbs_support import ON_REAL

import testclusters.kubernetes as lk
from taobank import pins
from tests.support import tao_oracle as oracle
from tests.support.results_cli import tao_jobs

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s  # the fixtures the tests take (pytest collects them under these names)
trainer_on_pvc = k8s_verbs_support.trainer_on_pvc

BUSYBOX = str(pins.resolve("images.busybox"))


def replayed(k8s, trainer: str, tmp_path: Path, scenario: oracle.Scenario) -> dict:
    run = oracle.train(tmp_path / "oracle", scenario)
    host = Path(trainer.replace("/results", str(lk.state_root() / "pv"))).parent
    shutil.copy(oracle.write_replay(run, tmp_path / "train.replay"), host / "train.replay")
    replay = f"{Path(trainer).parent}/train.replay"
    out = k8s.submit("--image", BUSYBOX, "--network-arch", "dino", "--action", "train", "--pvc-mount",
                     f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "1", "--command",
                     f'sh {trainer} --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --replay {replay}')
    return k8s.wait(out["id"], lambda s: s["state"] in ("COMPLETE", "ERROR", "CANCELED"), timeout=180)


def test_a_validation_nan_after_the_best_epoch_keeps_the_best_checkpoint(k8s, trainer_on_pvc, tmp_path):
    done = replayed(k8s, trainer_on_pvc, tmp_path, oracle.Scenario())
    assert done["state"] == "COMPLETE", json.dumps(done) + k8s.tao("logs", done["id"], check=False).stdout
    for kpi, mode in (("val_mAP", "max"), ("val_loss", "min")):
        listed = json.loads(tao_jobs("artifacts", done["id"], "--kpi", kpi, "--mode", mode, "--json",
                                     env=k8s.env).stdout)
        assert listed["best"]["checkpoints"][0] == "train/model_epoch_004_step_00050.pth", listed["best"]


def test_taos_failure_with_exit_code_0_is_an_error_that_says_so(k8s, trainer_on_pvc, tmp_path):
    done = replayed(k8s, trainer_on_pvc, tmp_path, oracle.Scenario(stop_at=(5, oracle.Interrupted)))
    assert done["state"] == "ERROR" and done["err_class"] == "ERR_PROGRAM", done
    assert "FAILURE" in done["message"] and "DINO train was interrupted" in done["message"], done
