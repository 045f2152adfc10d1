"""The spec check on the real SLURM cluster: a DINO submit with a misspelt TAO key is refused in one line naming
the real key before the cluster is contacted (no ssh command, no job folder, no record); the spec file is read
from the upload the command names (``{specs}/train.yaml``)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from taobank import records, tao_spec_schema

pytestmark = pytest.mark.e2e
TAO_SLURM = Path(__file__).resolve().parents[3] / "scripts" / "tao_slurm.py"
BASE = ["--network-arch", "dino", "--action", "train", "--runtime", "none", "--num-gpus", "1",
        "--max-gpus-per-node", "8", "--cpus", "1", "--time-minutes", "5"]


def submit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TAO_SLURM), "submit", *BASE, *args], capture_output=True, text=True,
                          timeout=120)


def test_a_dino_submit_with_a_misspelt_key_is_refused_in_one_line(slurm_env, tmp_path):
    spec = tmp_path / "train.yaml"
    spec.write_text(tao_spec_schema.template("dino", "train"), encoding="utf-8")
    res = submit("--spec-file", f"train.yaml={spec}", "--", "dino", "train", "-e", "{specs}/train.yaml",
                 "train.num_epoch=10")
    assert res.returncode == 1, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: train.num_epoch: ") and \
        "did you mean train.num_epochs?" in lines[0], res.stderr
    assert records.list_records() == []
    log = slurm_env["call_log"]
    assert not log.exists() or not log.read_text().strip(), "the cluster was contacted"


def test_the_uploaded_spec_file_is_checked(slurm_env, tmp_path):
    spec = tmp_path / "train.yaml"
    spec.write_text("train:\n  num_epoch: 10\n", encoding="utf-8")
    res = submit("--spec-file", f"train.yaml={spec}", "--", "dino", "train", "-e", "{specs}/train.yaml")
    assert res.returncode == 1 and "error: train.num_epoch: " in res.stderr and \
        "did you mean train.num_epochs?" in res.stderr, res.stderr
    assert records.list_records() == []
