"""benchmarks/local_k8s_startup.py --check against the shared cluster: `up` on a running cluster is a no-op.

The check never starts, stops or restarts a cluster (the private start/stop cycle stays out of CI: see the
benchmark's docstring); it counts what a no-op `up` did: processes run, daemons given a new pid.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[3]


@pytest.mark.e2e
def test_up_on_the_running_cluster_runs_nothing_and_restarts_nothing(k8s_cluster, tmp_path):
    env = {**os.environ, **k8s_cluster, "TAO_STATE_DIR": str(tmp_path / "state")}
    env.pop("TAO_CALL_LOG", None)
    res = subprocess.run([sys.executable, str(BANK / "benchmarks" / "local_k8s_startup.py"), "-n", "2", "--check"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith("no-op up ")]
    assert len(rows) == 2, res.stdout
    assert all(ln.endswith("processes run 0, daemons with a new pid 0") for ln in rows), rows
