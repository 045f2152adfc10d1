"""benchmarks/docker_status_sweep.py at a small N against the local engine: it runs, and a sweep stays one engine call."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from docker_support import BANK

pytestmark = pytest.mark.e2e


def test_docker_sweep_benchmark_runs_and_takes_one_engine_call(docker_cluster):
    res = subprocess.run([sys.executable, str(BANK / "benchmarks" / "docker_status_sweep.py"), "--sizes", "1,3",
                          "--check"], capture_output=True, text=True, env={**os.environ, **docker_cluster}, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [line.split() for line in res.stdout.splitlines()[1:] if line.strip()]
    assert [(r[0], r[1], r[3]) for r in rows] == [("1", "1", "1"), ("3", "1", "3")]
