"""benchmarks/job_path.py --check on the local cluster: a Kubernetes submit walks through no more of the bank's
files, and switches between them no more often, than main's ceiling (the figures are printed, the ceiling held)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[3]


@pytest.mark.e2e
def test_a_kubernetes_submit_stays_under_its_rooms_ceiling(k8s_cluster):
    res = subprocess.run([sys.executable, str(BANK / "benchmarks" / "job_path.py"), "--paths", "k8s", "--check"],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    (row,) = [line.split() for line in res.stdout.splitlines()[1:] if line.startswith("k8s-submit")]
    files, switches = int(row[1]), int(row[3])
    assert 10 < files and 20 < switches, row  # it traced the submit (a run that traced nothing reads 0)
