"""One platform registry: every list of platforms a user reads (help, errors, per-platform tables) names each
platform the core knows, so a fourth platform cannot be forgotten in one of them."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from taobank import platform, states

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
NAMES = re.compile(r"\b(kubernetes|k8s|slurm|docker)\b", re.IGNORECASE)


def test_the_adapters_are_the_platforms():
    assert tuple(platform.ADAPTERS) == states.PLATFORMS


def test_each_platform_has_its_host_check():
    sys.path.insert(0, str(SCRIPTS))
    import check_host

    assert set(check_host.CLIENT_CHECKS) == set(states.PLATFORMS)


@pytest.mark.parametrize("script", sorted(p.name for p in SCRIPTS.glob("*.py")))
def test_a_help_line_that_lists_platforms_lists_them_all(script):
    """A line of --help naming two platforms as a list ("kubernetes or slurm", "{kubernetes,slurm}") names them
    all; a line about one platform's own variables or defaults is no list."""
    out = subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    for line in out.splitlines():
        found = {m.lower().replace("k8s", "kubernetes") for m in NAMES.findall(line)}
        if len(found) >= 2 and re.search(r"(,|\bor\b|\||\{)", line):
            assert found == set(states.PLATFORMS), f"{script}: {line.strip()}"
