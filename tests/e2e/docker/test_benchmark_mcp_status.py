"""benchmarks/mcp_status.py --check at a small N on the local engine: a status through the MCP tool takes the
one engine call the CLI's takes (counts asserted, times only printed)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from docker_support import BANK

pytestmark = pytest.mark.e2e


def test_mcp_status_is_one_engine_call(docker_cluster):
    res = subprocess.run([sys.executable, str(BANK / "benchmarks" / "mcp_status.py"), "--runs", "1", "--sizes", "1,4",
                          "--check"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [ln.split() for ln in res.stdout.splitlines()[2:]]
    assert [(r[0], r[1], r[3]) for r in rows] == [("1", "1", "1"), ("4", "1", "1")]
