"""benchmarks/sweep.py --check on the local SLURM cluster at a small N: a sweep of 4 trials submits in at most 3
remote commands, its status --sweep takes one, cancel --sweep stops every trial with one scancel; the baseline of
2 single submits runs in the same call (its ratios printed)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[3]


@pytest.mark.e2e
def test_sweep_benchmark_counts_hold_on_slurm(slurm_cluster, tmp_path):
    env = {**os.environ, **slurm_cluster, "TAO_STATE_DIR": str(tmp_path / "state")}
    env.pop("TAO_CALL_LOG", None)
    res = subprocess.run([sys.executable, str(BANK / "benchmarks" / "sweep.py"), "--platforms", "slurm", "--sizes", "4",
                          "--baseline-sizes", "2", "--check"], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = {tuple(c.strip() for c in ln.split("|")[:3]): [c.strip() for c in ln.split("|")]
            for ln in res.stdout.splitlines() if ln.startswith("slurm |")}
    submit, status, cancel = rows[("slurm", "4", "submit")], rows[("slurm", "4", "status")], \
        rows[("slurm", "4", "cancel --sweep")]
    assert int(submit[3]) <= 3 and int(submit[6]) == 8  # the sweep vs 2 single submits of 4 commands each
    assert int(status[3]) <= 2 and int(cancel[3]) == 1
    assert submit[9].endswith("x") and status[9].endswith("x")  # the ratios against the baseline
    (check,) = [ln for ln in res.stdout.splitlines() if ln.startswith("check: ")]
    assert check.startswith("check: every sweep count as expected (slurm N=4:"), check
