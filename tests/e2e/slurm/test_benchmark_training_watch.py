"""benchmarks/training_watch.py at a small N and size against the local SLURM and Kubernetes clusters: it runs, and its counts
hold (--check: every job's progress in one sweep command; a fetch in two commands, bytes identical)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from taobank.platforms.slurm import ssh

BANK = Path(__file__).resolve().parents[3]


@pytest.mark.e2e
def test_training_watch_benchmark_runs_and_its_counts_hold(slurm_cluster, k8s_cluster, tmp_path, monkeypatch):
    control = Path(tempfile.mkdtemp(prefix="tao-ssh-watch-", dir="/tmp"))  # its own masters (it closes them)
    monkeypatch.setenv("TAO_SSH_CONTROL_DIR", str(control))
    env = {**os.environ, **slurm_cluster, "TAO_STATE_DIR": str(tmp_path / "state")}
    env.pop("TAO_CALL_LOG", None)
    try:
        res = subprocess.run([sys.executable, str(BANK / "benchmarks" / "training_watch.py"), "--sizes", "1,5",
                              "--fetch-mb", "4", "--kubernetes", "--check"], capture_output=True, text=True, env=env, timeout=900)
    finally:
        ssh.Connection(slurm_cluster).close()
        shutil.rmtree(control, ignore_errors=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    checks = [ln for ln in res.stdout.splitlines() if ln.startswith("check: ")]
    assert checks == ["check: progress in one command for N = 1, 5; fetch in two, a rerun in one, bytes identical"], \
        res.stdout
    assert "fetch of 4 MiB: bank" in res.stdout and "Kubernetes fetch of 4 MiB from the PVC: bank" in res.stdout
    assert "Docker fetch of 4 MiB: bank" in res.stdout
