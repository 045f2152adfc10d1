"""``continue`` of a SLURM job reads its spec_files again: by the absolute paths the submit saved, and only when
their sha256 is what the job was staged with (else one line, nothing created)."""
from __future__ import annotations

import argparse
import hashlib

import pytest

from taobank.platforms.slurm.spec import SlurmSpec
from taobank.core import jobfiles
from taobank.campaign import lineage
from taobank import records
from taobank.contract import ResultFile, ResultsListing, ResultsLocation
from taobank.errors import TaoError
from taobank.cli import entry
from taobank.platforms.slurm import continued


def test_spec_file_flags_are_saved_as_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.yaml").write_text("a: 1\n")
    parser = argparse.ArgumentParser()
    entry.spec_arguments(parser, "slurm")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    spec = entry.spec_from_args(parser.parse_args(["--image", "i:1", "--spec-file", "./train.yaml",
                                                      "--spec-file", "e=train.yaml", "--", "true"]), "slurm")
    assert spec["spec_files"] == {"train.yaml": str(tmp_path / "train.yaml"), "e": str(tmp_path / "train.yaml")}


def canceled_job(spec_file, text: str) -> dict:
    rec = records.open_record("slurm", "img", "dino", "train", "A", "/l/results/{id}")
    sha = hashlib.sha256(text.encode()).hexdigest()
    records.mark(rec["id"], "RUNNING", backend_ref="slurm:5", backend={"spec_files": f"train.yaml={sha}"})
    records.mark(rec["id"], "CANCELED")
    jobfiles.save_spec(rec["id"], {"network_arch": "dino", "action": "train", "container_runtime": "none",
                               "command": ["dino", "train", "-e", "{specs}/train.yaml"],
                               "spec_files": {"train.yaml": str(spec_file)}})
    return records.load(rec["id"])


def test_a_changed_or_relative_spec_file_is_refused(state_dir, tmp_path, monkeypatch):
    spec_file = tmp_path / "train.yaml"
    spec_file.write_text("train: {num_epochs: 10}\n")
    rec = canceled_job(spec_file, "train: {num_epochs: 10}\n")
    spec, _ = jobfiles.load_spec(rec["id"])
    monkeypatch.chdir("/")  # continue from any folder reads the same file
    continued.check(SlurmSpec.from_dict(spec), rec["id"])
    spec_file.write_text("train: {num_epochs: 99}\n")
    with pytest.raises(TaoError, match=r"spec file train.yaml \(.*\) changed since job .* ran \(sha256") as exc:
        continued.check(SlurmSpec.from_dict(spec), rec["id"])
    assert "\n" not in str(exc.value)
    with pytest.raises(TaoError, match="relative path"):
        continued.check(SlurmSpec.from_dict({**spec, "spec_files": {"train.yaml": "./train.yaml"}}), rec["id"])


def test_continue_refuses_before_anything_is_created(state_dir, tmp_path, monkeypatch):
    spec_file = tmp_path / "train.yaml"
    spec_file.write_text("train: {num_epochs: 10}\n")
    rec = canceled_job(spec_file, "train: {num_epochs: 10}\n")
    folder = rec["results_dir"]
    monkeypatch.setattr(lineage, "_listing", lambda r, what, status=False: (
        ResultsLocation(folder, True), ResultsListing(folder, [ResultFile("model_epoch_001.pth", 1, 1.0)])))
    assert "model_epoch_001.pth" in lineage.continue_job("slurm", rec["id"], dry_run=True)
    spec_file.write_text("train: {num_epochs: 99}\n")
    before = len(records.list_records())
    with pytest.raises(TaoError, match="changed since job"):
        lineage.continue_job("slurm", rec["id"], dry_run=True)
    with pytest.raises(TaoError, match="changed since job"):
        lineage.continue_job("slurm", rec["id"])
    assert len(records.list_records()) == before
