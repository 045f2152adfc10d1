"""One platform registry: every list of platforms a user reads (help, errors, per-platform tables) names each
platform the core knows, so a fourth platform cannot be forgotten in one of them."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from taobank.core import platform
from taobank import registry
from taobank.errors import TaoError

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
NAMES = re.compile(r"\b(kubernetes|k8s|slurm|docker)\b", re.IGNORECASE)


def test_each_platform_of_the_registry_is_its_own_adapter_and_package():
    for name in registry.names():
        adapter = platform.get(name)
        assert adapter.name == name == registry.info(name).name
        assert adapter.info is registry.info(name)
        assert (SCRIPTS / adapter.helper).is_file()


def test_each_platform_has_its_host_check():
    sys.path.insert(0, str(SCRIPTS))
    import check_host

    for name in registry.names():
        row = check_host.checks(name)[-1]
        assert row["name"] == registry.info(name).client.label


def test_an_alias_names_its_platform_and_an_unknown_name_lists_them_all():
    assert registry.canonical("K8S") == registry.canonical("kube") == "kubernetes"
    with pytest.raises(TaoError, match=r"use one of kubernetes, slurm, docker \(k8s is accepted for kubernetes\)"):
        registry.canonical("nomad")


@pytest.mark.parametrize("script", sorted(p.name for p in SCRIPTS.glob("*.py")))
def test_a_help_line_that_lists_platforms_lists_them_all(script):
    """A line of --help naming two platforms as a list ("kubernetes or slurm", "{kubernetes,slurm}") names them
    all; a line about one platform's own variables or defaults is no list."""
    out = subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    for line in out.splitlines():
        found = {m.lower().replace("k8s", "kubernetes") for m in NAMES.findall(line)}
        if len(found) >= 2 and re.search(r"(,|\bor\b|\||\{)", line):
            assert found == set(registry.names()), f"{script}: {line.strip()}"
