"""benchmarks/slurm_sweep.py at a small N against the local cluster: it runs, and its SSH counts hold
(--check: one connection for N submits, one command per status sweep, the ControlPersist master shared
across processes, a clean naive baseline)."""
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
def test_slurm_sweep_benchmark_runs_and_its_counts_hold(slurm_cluster, tmp_path, monkeypatch):
    # its own ControlMaster folder (short: a socket path must stay under ~104 bytes): the benchmark closes its
    # masters, and must not close the one other SLURM tests on this machine share
    control = Path(tempfile.mkdtemp(prefix="tao-ssh-bench-", dir="/tmp"))
    monkeypatch.setenv("TAO_SSH_CONTROL_DIR", str(control))
    env = {**os.environ, **slurm_cluster, "TAO_STATE_DIR": str(tmp_path / "state")}
    env.pop("TAO_CALL_LOG", None)
    try:
        res = subprocess.run([sys.executable, str(BANK / "benchmarks" / "slurm_sweep.py"), "--sizes", "1,3",
                              "--cli-sizes", "3", "--no-naive-submit", "--check"],
                             capture_output=True, text=True, env=env, timeout=900)
    finally:
        ssh.Connection(slurm_cluster).close()  # the masters it left (ControlPersist) go with their folder
        shutil.rmtree(control, ignore_errors=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout
    assert "in-process verbs (one Connection object)" in out and "CLI, one process per verb" in out
    checks = [ln for ln in out.splitlines() if ln.startswith("check: ")]
    assert checks == ["check: every SSH count as expected (in-process N = 1, 3; CLI N = 3)"], out[-2000:]
