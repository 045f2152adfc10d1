"""benchmarks/k8s_status_sweep.py at a small N against the local cluster: it runs, and a sweep stays one kubectl call."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[3]


@pytest.mark.e2e
def test_status_sweep_benchmark_runs_and_takes_one_kubectl_call(k8s_cluster, tmp_path):
    env = {**os.environ, **k8s_cluster, "TAO_STATE_DIR": str(tmp_path / "state")}
    res = subprocess.run([sys.executable, str(BANK / "benchmarks" / "k8s_status_sweep.py"), "--sizes", "1,3",
                          "--no-naive", "--check"], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [line.split() for line in res.stdout.splitlines()[1:] if line.strip()]
    assert [(r[0], r[1]) for r in rows] == [("1", "1"), ("3", "1")]
