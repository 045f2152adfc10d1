"""The stand-in trainer (testclusters/fake_tao_train.sh) writes what TAO's own code writes: its TAO_LINES block is
what tests/support/tao_standin.py makes from runs of nvidia-tao-core's StatusLogger and monitor_status and
Lightning's ModelCheckpoint today, and for each of its options its status.json is byte for byte the one TAO's
code writes for the same numbers, its checkpoints the ones Lightning saves and links."""
from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from tests.support import tao_oracle as oracle
from tests.support import tao_standin

TRAINER = tao_standin.SCRIPT
NOW, FAKE_NOW = datetime(2025, 3, 7, 9, 5, 3), "03 07 2025 09 05 03"
SHELLS = [pytest.param(["sh"], id="sh"),
          pytest.param(["busybox", "sh"], id="busybox",
                       marks=pytest.mark.skipif(not shutil.which("busybox"), reason="busybox is not installed"))]


def test_the_block_is_what_taos_code_writes_now():
    assert tao_standin.embedded() == tao_standin.block(), (
        "testclusters/fake_tao_train.sh's TAO_LINES block differs from TAO's code: "
        "python3 -m tests.support.tao_standin --write")


def test_a_hand_edit_of_the_block_is_seen():
    text = TRAINER.read_text()
    edited = text.replace('"message": "Starting Training Loop."', '"message": "Starting the loop."', 1)
    assert edited != text and tao_standin.embedded(edited) != tao_standin.block()


# ------------------------------------------------------------------ the stand-in against TAO's code
def _model(epochs: int, best_val: int = 400, nan_at: int | None = None) -> dict:
    """The stand-in's numbers (its header: val_loss lowest at 2/3 of the epochs, val_mAP 1 - val_loss,
    train_loss 1/(epoch + 2)) as the oracle's scenario."""
    best = (2 * epochs + 2) // 3 - 1
    vals = [best_val + 20 * (e - best) ** 2 for e in range(epochs)]
    return {"val_loss": [v / 1000 for v in vals], "val_map": [(1000 - v) / 1000 for v in vals],
            "train_loss": [None if e == nan_at else (1000 // (e + 2)) / 1000 for e in range(epochs)]}


def _stand_in(shell: list[str], results: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([*shell, str(TRAINER), "--results", str(results), *argv], capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "FAKE_TAO_NOW": FAKE_NOW})


def _files(folder: Path, root: Path) -> tuple[str, list[str], str | None]:
    """status.json (its folder's path as ROOT), the checkpoints' names, the latest link's target."""
    link = folder / "dino_model_latest.pth"
    return ((folder / "status.json").read_text().replace(str(root.resolve()), "ROOT"),
            sorted(p.name for p in folder.glob("model_*.pth")), os.readlink(link) if link.is_symlink() else None)


def _same(shell, tmp_path: Path, argv: list[str], scenario: oracle.Scenario, code: int) -> tuple[Path, Path]:
    ours, taos = tmp_path / "stand-in", tmp_path / "tao"
    done = _stand_in(shell, ours, *argv)
    assert done.returncode == code, done.stderr
    with oracle.clock(NOW):
        run = oracle.train(taos, scenario)
    assert run.exit_code == code
    assert _files(ours / "train", ours) == _files(taos / "train", taos)
    return ours, taos


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("argv,model,seconds,per_epoch,val_every", [
    (["--epochs", "5", "--epoch-time", "90000"], _model(5), 90000, None, 1),  # days in the eta
    (["--epochs", "6", "--sleep", "0", "--epoch-time", "5", "fake.best_val=300", "fake.nan_at=1"],
     _model(6, 300, 1), 5, None, 1),  # a fraction of a second a step; a NaN loss
    (["--epochs", "20"], _model(20), 0, None, 1),  # val_mAP below zero early on
    (["--epochs", "3", "--checkpoints-per-epoch", "2"], _model(3), 0, 5, 1),
    (["--epochs", "2", "--checkpoints-per-epoch", "10", "--epoch-time", "7"], _model(2), 7, 1, 1),
    (["--epochs", "7", "--val-interval", "3"], _model(7), 0, None, 3),  # checkpoints only with a validation
    (["--epochs", "5", "--val-interval", "2", "--checkpoints-per-epoch", "5"], _model(5), 0, 2, 2),
], ids=["days", "nan", "negative", "two-a-epoch", "every-step", "val-apart", "val-apart-steps"])
def test_a_training_is_what_taos_code_writes(shell, tmp_path, argv, model, seconds, per_epoch, val_every):
    _same(shell, tmp_path, argv, oracle.Scenario(**model, epoch_seconds=seconds, every_n_train_steps=per_epoch,
                                                 val_every=val_every), 0)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_resume_between_validations_is_what_taos_code_writes(shell, tmp_path):
    """The resumed process has written no KPI yet: its first epoch without validation has none on its line."""
    ours, taos = _same(shell, tmp_path, ["--epochs", "6", "--val-interval", "2", "--fail-at", "4"],
                       oracle.Scenario(**_model(6), epoch_seconds=0, val_every=2, stop_at=(4, oracle.Crashed),
                                       stop_message="simulated failure at epoch {epoch}"), 1)
    assert os.readlink(ours / "train" / "dino_model_latest.pth") == "model_epoch_003_step_00040.pth"
    assert _stand_in(shell, ours, "--epochs", "6", "--val-interval", "2",
                     "train.resume_training_checkpoint_path=null").returncode == 0
    with oracle.clock(NOW):
        oracle.train(taos, oracle.Scenario(**_model(6), epoch_seconds=0, val_every=2, resume_after=3))
    assert _files(ours / "train", ours) == _files(taos / "train", taos)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("option,stop,code", [("--fail-at", oracle.Crashed, 1),
                                              ("--interrupt-at", oracle.Interrupted, 0)])
@pytest.mark.parametrize("at", [0, 2])
def test_a_crash_or_an_interrupt_and_the_resume_are_what_taos_code_writes(shell, tmp_path, option, stop, code, at):
    word = "failure" if stop is oracle.Crashed else "interrupt"
    ours, taos = _same(shell, tmp_path, ["--epochs", "4", option, str(at)],
                       oracle.Scenario(**_model(4), epoch_seconds=0, stop_at=(at, stop),
                                       stop_message=f"simulated {word} at epoch {{epoch}}"), code)
    if at == 0:
        return  # nothing to resume from
    done = _stand_in(shell, ours, "--epochs", "4", option, str(at), "train.resume_training_checkpoint_path=null")
    assert done.returncode == 0 and f"at epoch {at - 1}" in done.stdout, done.stderr
    with oracle.clock(NOW):
        assert oracle.train(taos, oracle.Scenario(**_model(4), epoch_seconds=0, resume_after=at - 1)).exit_code == 0
    assert _files(ours / "train", ours) == _files(taos / "train", taos)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("action", ["evaluate", "export", "inference"])
def test_an_action_writes_its_own_folder_as_taos_code_does(shell, tmp_path, action):
    ours, taos = tmp_path / "stand-in", tmp_path / "tao"
    assert _stand_in(shell, ours, "--action", action).returncode == 0
    model = _model(1)
    kpis = {"val_mAP": str(model["val_map"][0]), "val_loss": model["val_loss"][0]} if action == "evaluate" else None
    with oracle.clock(NOW):
        oracle.action(taos, action, kpis)
    assert sorted(p.name for p in ours.iterdir()) == [action]
    assert (ours / action / "status.json").read_text() == (taos / action / "status.json").read_text()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_failed_action_is_what_taos_code_writes(shell, tmp_path):
    ours, taos = tmp_path / "stand-in", tmp_path / "tao"
    assert _stand_in(shell, ours, "--action", "export", "--fail-at", "0").returncode == 1
    with oracle.clock(NOW):
        oracle.action(taos, "export", stop=oracle.Crashed, stop_message="simulated failure of export")
    assert (ours / "export" / "status.json").read_text() == (taos / "export" / "status.json").read_text()
