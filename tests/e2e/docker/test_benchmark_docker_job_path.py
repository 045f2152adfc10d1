"""benchmarks/job_path.py --check on the local engine: a 4-trial sweep submit and its status --sweep switch between
the bank's files no more often than main's ceiling (the figures are printed, the ceiling held)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from docker_support import BANK

pytestmark = pytest.mark.e2e


def test_a_docker_sweep_and_its_status_stay_under_their_rooms_ceiling(docker_cluster):
    res = subprocess.run([sys.executable, str(BANK / "benchmarks" / "job_path.py"), "--paths", "docker", "--check"],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    rows = {line.split()[0]: line.split() for line in res.stdout.splitlines()[1:] if line.strip()}
    assert set(rows) == {"docker-sweep-submit", "docker-status-sweep"}, res.stdout
    assert all(int(r[3]) > 20 for r in rows.values()), rows  # it traced the commands
