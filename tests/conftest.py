"""Shared pytest fixtures.

The e2e fixtures reuse a running local cluster or start one. A cluster that
cannot start FAILS the tests that need it (never a skip): run only
``tests/unit`` when you have no cluster.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[1]
SCRIPTS = BANK / "scripts"
for _path in (SCRIPTS, BANK):  # taobank (the helpers) and testclusters (test infrastructure)
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from taobank.errors import TaoError  # noqa: E402


def _cluster(platform: str) -> dict[str, str]:
    import importlib

    mod = importlib.import_module(f"testclusters.{platform}")
    try:
        return mod.up()
    except TaoError as exc:
        pytest.fail(f"local {platform} cluster could not start: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def bank() -> Path:
    return BANK


@pytest.fixture(scope="session")
def k8s_cluster() -> dict[str, str]:
    """Env (KUBECONFIG, ...) of the running local Kubernetes cluster."""
    return _cluster("kubernetes")


@pytest.fixture(scope="session")
def slurm_cluster() -> dict[str, str]:
    """Env (SLURM_USER, SLURM_HOSTNAME, SSH_KEY_PATH, ...) of the local SLURM cluster."""
    return _cluster("slurm")


@pytest.fixture(scope="session")
def docker_cluster() -> dict[str, str]:
    """Env (DOCKER_HOST, TAO_DOCKER_RESULTS_DIR, the local image ...) of the local Docker engine."""
    return _cluster("docker")


@pytest.fixture(autouse=True)
def _no_real_record_store(request, tmp_path, monkeypatch) -> None:
    """Every test without a cluster gets a private TAO_STATE_DIR (the one :func:`state_dir` names), so none can
    write a record into the user's own store, even one that forgot to ask for it."""
    if request.node.get_closest_marker("e2e") is None:
        monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture()
def state_dir(tmp_path, monkeypatch) -> Path:
    """A private TAO_STATE_DIR for one test (the record store lives there)."""
    d = tmp_path / "state"
    monkeypatch.setenv("TAO_STATE_DIR", str(d))
    return d


#: cluster fixture -> the marker naming its cluster (scripts/test.sh runs one e2e group per cluster at once)
CLUSTER_FIXTURES = {"k8s_cluster": "kubernetes", "slurm_cluster": "slurm", "docker_cluster": "docker"}


def pytest_collection_modifyitems(config, items):
    """A test that needs a cluster (directly or through another fixture) is an e2e test, marked or not:
    ``pytest -m "not e2e"`` then never starts a cluster. It also carries its cluster's marker
    (``-m "e2e and slurm"`` selects one cluster's group).

    A test marked ``gpu`` needs a working NVIDIA driver (nvidia-smi). Where there is none it is not run,
    and said so at the end of the run (``GPU-ONLY NOT RUN``): never a silent skip, never faked."""
    for item in items:
        used = [m for f, m in CLUSTER_FIXTURES.items() if f in getattr(item, "fixturenames", ())]
        if used and not item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.e2e)
        for marker in used:
            if not item.get_closest_marker(marker):
                item.add_marker(getattr(pytest.mark, marker))
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu and not _gpu_host():
        config._tao_gpu_not_run = [item.nodeid for item in gpu]
        config.hook.pytest_deselected(items=gpu)
        items[:] = [item for item in items if not item.get_closest_marker("gpu")]


def _gpu_host() -> bool:
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=60).returncode == 0


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    not_run = getattr(config, "_tao_gpu_not_run", [])
    if not_run:
        terminalreporter.section("GPU-ONLY NOT RUN")
        terminalreporter.write_line(f"{len(not_run)} GPU-only test(s) were NOT RUN: this machine has no working "
                                    "nvidia-smi. Run them on a GPU host (pytest -m gpu):")
        for nodeid in not_run:
            terminalreporter.write_line(f"  NOT RUN {nodeid}")


def pytest_xdist_auto_num_workers(config) -> int | None:
    """``-n auto`` (pytest.ini): a run of ``-m "not e2e"`` gets xdist's one worker per CPU (every such test keeps
    its state in tmp_path/env); any other run stays in one process, because e2e tests share one local cluster
    of each kind and run one at a time."""
    expr = " ".join((config.getoption("markexpr", "") or "").split())
    if expr == "not e2e" or expr.startswith("not e2e and "):
        return None  # xdist's own count
    return 0
