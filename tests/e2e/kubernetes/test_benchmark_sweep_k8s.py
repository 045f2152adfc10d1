"""benchmarks/sweep.py --check on the local Kubernetes cluster at a small N: a sweep of 4 trials (K=2) is ONE
Indexed Job and its trial table (its whole submit 3 calls, as one single submit: the Job created suspended, then one
server-side apply of its table and the Job released), its status --sweep takes 1 call, cancel --sweep is ONE delete
of the Job; the baseline of 2 single submits runs in the same call (its ratios printed)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[3]


@pytest.mark.e2e
def test_sweep_benchmark_counts_hold_on_kubernetes(k8s_cluster, tmp_path):
    env = {**os.environ, **k8s_cluster, "TAO_STATE_DIR": str(tmp_path / "state")}
    env.pop("TAO_CALL_LOG", None)
    res = subprocess.run([sys.executable, str(BANK / "benchmarks" / "sweep.py"), "--platforms", "kubernetes",
                          "--sizes", "4", "--baseline-sizes", "2", "--max-concurrent", "2", "--check"], capture_output=True, text=True, env=env,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = {tuple(c.strip() for c in ln.split("|")[:3]): [c.strip() for c in ln.split("|")]
            for ln in res.stdout.splitlines() if ln.startswith("kubernetes |")}
    submit, status, cancel = rows[("kubernetes", "4", "submit")], rows[("kubernetes", "4", "status")], \
        rows[("kubernetes", "4", "cancel --sweep")]
    assert int(submit[3]) <= 4 and int(submit[3]) * 2 <= int(submit[6])  # 2 single submits: 4 calls each
    assert int(status[3]) == 1 and int(cancel[3]) == 1
    assert submit[9].endswith("x") and status[9].endswith("x")
    (check,) = [ln for ln in res.stdout.splitlines() if ln.startswith("check: ")]
    assert check.startswith("check: every sweep count as expected (kubernetes N=4:"), check
