"""A platform helper's `status --sweep` / `cancel --sweep` drive only that platform's sweeps, as its job verbs
drive only its jobs; tao_jobs.py drives any. A refusal is one line and touches no cluster."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from taobank import records

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture()
def slurm_sweep(state_dir):
    for i in range(2):
        records.open_record("slurm", "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt", "dino", "train", "A",
                            f"/lustre/r/dino-train-0000000{i}", sweep=("sweep-0a1b2c3d", i, {"train.optim.lr": str(i)}))
    return "sweep-0a1b2c3d"


@pytest.mark.parametrize("helper", ["tao_k8s.py", "tao_docker.py"])
@pytest.mark.parametrize("verb", ["status", "cancel"])
def test_another_platforms_sweep_is_refused_in_one_line(slurm_sweep, state_dir, tmp_path, helper, verb):
    calls = tmp_path / "calls.jsonl"
    proc = subprocess.run([sys.executable, str(SCRIPTS / helper), verb, "--sweep", slurm_sweep],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "TAO_STATE_DIR": str(state_dir), "TAO_CALL_LOG": str(calls)})
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "is a slurm job, not" in err and "tao_slurm.py" in err, err
    assert not calls.exists()  # nothing asked of any cluster
    assert all(r["state"] == "PENDING" for r in records.list_records())
