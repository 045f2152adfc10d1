"""Fixtures for the SLURM skill's e2e tests: the local cluster's env exported
as a skill user would, a private record store and a call log."""
from __future__ import annotations

import pytest

from taobank.platforms.slurm import ssh


@pytest.fixture()
def slurm_env(slurm_cluster, state_dir, tmp_path, monkeypatch):
    for key, value in slurm_cluster.items():
        monkeypatch.setenv(key, value)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("TAO_CALL_LOG", str(log))
    ssh.STATS.update(connections=0, commands=0)
    return {"env": dict(slurm_cluster), "call_log": log, "state_dir": state_dir}
