"""Fixtures of the orchestration tests: the fake process runner, active for one test."""
from __future__ import annotations

import os

import pytest

from fakeproc import FakeProcs, slurm_env
from taobank import run


@pytest.fixture()
def fake(state_dir, monkeypatch):
    """A FakeProcs answering every kubectl/ssh call of the test, with a private TAO_STATE_DIR."""
    for name in ("TAO_K8S_NAMESPACE", "TAO_K8S_CONTEXT", "TAO_CALL_LOG"):
        monkeypatch.delenv(name, raising=False)
    # durability is test_records.py's business; here an fsync per record write is 10x the test's time
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    procs = FakeProcs()
    with run.fake_processes(procs):
        yield procs


@pytest.fixture()
def docker_fake(fake, monkeypatch, tmp_path):
    """The fake runner answering for a local Docker engine: results under tmp_path, no DOCKER_HOST, no engine
    remembered from another test."""
    from taobank.core import platform

    monkeypatch.setenv("TAO_DOCKER_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("TAO_DOCKER_ENGINE", raising=False)
    monkeypatch.setattr(platform.get("docker"), "engine", None)
    return fake


@pytest.fixture()
def slurm(fake, monkeypatch, tmp_path):
    """``fake`` plus the SLURM connection environment (user, login host, control folder)."""
    slurm_env(monkeypatch, tmp_path)
    return fake


class Outcome:
    """What a helper run in-process did: exit code, stdout, stderr."""

    def __init__(self, rc, out: str, err: str) -> None:
        self.rc, self.out, self.err = (0 if rc is None else rc), out, err

    @property
    def err_lines(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.strip()]

    def __repr__(self) -> str:
        return f"Outcome(rc={self.rc}, out={self.out[-400:]!r}, err={self.err[-400:]!r})"


@pytest.fixture()
def cli(capsys):
    """``cli("tao_k8s.py", "status", ID)``: the helper's main() through run_main, in this process."""
    import importlib

    from taobank.cli.entry import run_main

    def invoke(helper: str, *argv: str) -> Outcome:
        main = importlib.import_module(helper.removesuffix(".py")).main
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            run_main(main, [str(a) for a in argv])
        got = capsys.readouterr()
        return Outcome(exc.value.code, got.out, got.err)

    return invoke
