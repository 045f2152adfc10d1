"""A status.json written by TAO's own code, replayed through every reader; the stand-in trainer writes the same.

The run is made by tests/support/tao_oracle.py: nvidia-tao-core's StatusLogger writing a 3-epoch DINO train in
the order TAO's Lightning callbacks call it (0-based epochs, ``max_epoch`` the last index, the validation KPIs
on a line with no epoch before the epoch line, which repeats them, the training loss after it, ``val_mAP`` as
a string, a NaN loss as a bare NaN, and monitor_status's success line "DINO train completed successfully" with status
RUNNING).
"""
from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from taobank import checkpoints
from taobank.contract import ResultFile, ResultsListing
from taobank.progress import best, parse, progress, series, statusfile
from taobank.campaign.results_verbs import find_best
from tests.support import tao_oracle as oracle

ROOT = Path(__file__).resolve().parents[2]
TRAINER = ROOT / "testclusters" / "fake_tao_train.sh"


@pytest.fixture()
def tao_text(tmp_path) -> str:
    """The status.json of TAO's 3-epoch DINO train (the best val_loss and val_mAP at epoch 1, a NaN loss last)."""
    run = oracle.train(tmp_path / "job", oracle.Scenario(val_map=(0.0123, 0.0456, 0.0401), val_loss=(0.9, 0.5, 0.7),
                                                          train_loss=(30.2, 24.9, None)))
    return run.status_text


def test_the_epochs_and_kpis_are_taos(tao_text):
    log = parse(tao_text)
    rows = series(log)
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    assert [r["val_loss"] for r in rows] == [0.9, 0.5, 0.7]
    assert [r["val_mAP"] for r in rows] == [0.0123, 0.0456, 0.0401]  # TAO writes mAP as a string
    assert rows[0]["train_loss"] == 30.2 and rows[1]["train_loss"] == 24.9 and math.isnan(rows[2]["train_loss"])
    assert best(rows, "val_loss")["epoch"] == 1 and best(rows, "val_mAP", "max")["epoch"] == 1


def test_the_run_ended_in_success_and_people_see_epochs_from_one(tao_text):
    log = parse(tao_text)
    p = progress(log)
    assert (p.status, p.epoch, p.max_epoch) == ("SUCCESS", 2, 2)
    assert p.line().startswith("SUCCESS epoch 3/3 ")
    assert statusfile.outcome(log) == ("SUCCESS", "DINO train completed successfully")
    assert statusfile.text_outcome(tao_text) == {"status": "SUCCESS", "message": "DINO train completed successfully"}


def _listing(text: str, *names: str, link: str | None = None) -> ResultsListing:
    files = [ResultFile(f"train/{n}", 10, float(i)) for i, n in enumerate(names)]
    files.append(ResultFile("train/status.json", 1, 9.0))
    links = {"train/dino_model_latest.pth": f"train/{link}"} if link else {}
    listing = ResultsListing("/r/job", files, links=links)
    listing.status_files = {"train/status.json": text}
    return listing


NAMES = ("model_epoch_000_step_00100.pth", "model_epoch_001_step_00150.pth", "model_epoch_001_step_00200.pth",
         "model_epoch_002_step_00300.pth")


def test_the_best_checkpoint_is_epoch_ones_last_and_latest_follows_the_link(tao_text):
    listing = _listing(tao_text, *NAMES, link=NAMES[2])
    found = find_best(listing, "val_loss", "min", "train")
    assert (found.at, found.value) == (1, 0.5)
    assert found.checkpoints[0] == "train/model_epoch_001_step_00200.pth"  # the end of epoch 1, where it was measured
    assert checkpoints.latest(listing.files, "train", listing.links, "dino").path == f"train/{NAMES[2]}"
    # without the link: the highest epoch, and of it the highest step
    assert checkpoints.latest(listing.files, "train", {}, "dino").path == f"train/{NAMES[3]}"
    assert checkpoints.latest(listing.files[:3], "train", {}, "dino").path == f"train/{NAMES[2]}"


def _shape(line: dict) -> tuple:
    kpi = line.get("kpi") or {}
    return tuple(k for k in line if k not in ("kpi",)), tuple(sorted((k, type(v).__name__) for k, v in kpi.items()))


@pytest.mark.parametrize("shell", ["sh", "busybox"])
def test_the_stand_in_writes_taos_lines_in_taos_order(shell, tmp_path, tao_text):
    argv = ["busybox", "sh"] if shell == "busybox" else ["sh"]
    subprocess.run([*argv, str(TRAINER), "--results", str(tmp_path), "--epochs", "3", "fake.nan_at=2"],
                   check=True, capture_output=True, env={"PATH": "/usr/bin:/bin", "FAKE_TAO_NOW": "12 05 2025 09 03 07"})
    ours = [json.loads(x) for x in (tmp_path / "train" / "status.json").read_text().splitlines()]
    tao = [json.loads(x) for x in tao_text.splitlines()]
    assert [x["message"] for x in ours] == [x["message"] for x in tao]
    assert [x["status"] for x in ours] == [x["status"] for x in tao]
    for mine, theirs in zip(ours, tao):  # the same keys in the same order; KPI values of the same kinds
        assert _shape(mine)[0] == _shape(theirs)[0]
        assert set(_shape(mine)[1]) <= set(_shape(theirs)[1]), (mine, theirs)
    assert [x["epoch"] for x in ours if "epoch" in x] == [0, 1, 2] and ours[3]["max_epoch"] == 2
    assert math.isnan(ours[-1]["kpi"]["train_loss"])
    names = sorted(p.name for p in (tmp_path / "train").iterdir())
    assert names == ["dino_model_latest.pth", "model_epoch_000_step_00010.pth", "model_epoch_001_step_00020.pth",
                     "model_epoch_002_step_00030.pth", "status.json"]
    link = tmp_path / "train" / "dino_model_latest.pth"
    assert link.is_symlink() and str(link.readlink()) == "model_epoch_002_step_00030.pth"  # relative, as Lightning's


def test_the_stand_ins_best_is_the_epoch_of_its_lowest_val_loss(tmp_path):
    subprocess.run(["sh", str(TRAINER), "--results", str(tmp_path), "--epochs", "6", "fake.best_val=300"],
                   check=True, capture_output=True)
    rows = series(parse((tmp_path / "train" / "status.json").read_text()))
    chosen = best(rows, "val_loss")
    assert chosen["val_loss"] == 0.3 and chosen["epoch"] == 3 and [r["epoch"] for r in rows] == list(range(6))
