"""The detached supervisor of a Docker sweep (taobank.core.sweepsupervisor): one per sweep (a lock), it looks at the
sweep until every trial has ended, survives a passing error, and starts with no credential in its environment."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakeproc import ok
from taobank import records
from taobank.core import sweepsupervisor
from taobank.errors import TaoError

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


class Row:
    def __init__(self, trial: int, state: str) -> None:
        self.trial, self.id, self.state = trial, f"t-{trial}", state


@pytest.fixture()
def first(state_dir):
    return records.open_record("docker", "img", "dino", "train", "A", "/r/{id}")["id"]


def test_it_looks_until_every_trial_has_ended_and_says_what_changed(first):
    looks = iter([[Row(0, "RUNNING"), Row(1, "PENDING")], TaoError("engine busy"),
                  [Row(0, "COMPLETE"), Row(1, "RUNNING")], [Row(0, "COMPLETE"), Row(1, "ERROR")]])
    slept, lines = [], []

    def look():
        item = next(looks)
        if isinstance(item, Exception):
            raise item
        return item

    assert sweepsupervisor.supervise("s-1", first, look, interval=2, sleep=slept.append, on_line=lines.append) == 0
    assert slept == [2, 2, 2] and lines[-1] == "sweep s-1: every trial has ended"
    assert "sweep s-1: engine busy" in lines and "trial 1 t-1 ERROR" in lines and lines.count("trial 0 t-0 COMPLETE") == 1


def test_one_supervisor_per_sweep(first):
    assert not sweepsupervisor.running(first)
    fd = os.open(records.artifact_dir(first) / sweepsupervisor.LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another supervisor holds it
    try:
        assert sweepsupervisor.running(first)
        lines: list[str] = []
        assert sweepsupervisor.supervise("s-1", first, lambda: pytest.fail("looked"), on_line=lines.append) == 0
        assert lines == ["sweep s-1: a supervisor runs already"]
        assert sweepsupervisor.start("s-1", first) is None  # nothing started while one runs
    finally:
        os.close(fd)
    assert not sweepsupervisor.running(first)  # its lock goes with it: the next status starts another


def test_it_starts_detached_without_credentials(fake, first, monkeypatch):
    monkeypatch.setenv("NGC_KEY", "nvapi-not-for-the-supervisor")
    monkeypatch.setenv("TAO_DOCKER_RESULTS_DIR", "/r")
    seen = {}

    def spawn(argv, *, log, env, cwd):
        seen.update(argv=argv, log=str(log), env=env, cwd=cwd)
        return 4242

    monkeypatch.setattr(sweepsupervisor, "spawn_detached", spawn)
    assert sweepsupervisor.start("s-1", first) == 4242
    assert seen["argv"] == [sys.executable, "-m", "taobank", "supervise", "s-1"]
    assert seen["env"]["PYTHONPATH"].split(os.pathsep)[0] == str(SCRIPTS)
    # in the bank's own folder (``-m`` looks in the working folder first), the state folder given absolute
    assert seen["cwd"] == str(SCRIPTS) and seen["env"]["TAO_STATE_DIR"] == str(records.state_dir())
    assert "NGC_KEY" not in seen["env"] and seen["env"]["TAO_DOCKER_RESULTS_DIR"] == "/r"
    assert seen["log"] == str(records.artifact_dir(first) / sweepsupervisor.LOG)


def test_the_runner_answers_a_detached_start_in_unit_tests(fake, tmp_path):
    from taobank import run

    fake.on("python3", lambda c: True, ok("77\n"))
    assert run.spawn_detached(["python3", "x"], log=tmp_path / "log", env={}) == 77
    assert not (tmp_path / "log").exists()


def test_the_module_entry_supervises_a_sweep_and_refuses_bad_usage_in_one_line(state_dir, monkeypatch):
    """``python3 -m taobank supervise ID`` (what start() spawns) runs the loop over the sweep's status; a sweep
    without trials is one line, a wrong word the usage."""
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS), "TAO_STATE_DIR": str(state_dir)}
    bad = subprocess.run([sys.executable, "-m", "taobank", "watch", "s-1"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip() == "usage: python3 -m taobank supervise SWEEP_ID [--interval SECONDS]"
    bad = subprocess.run([sys.executable, "-m", "taobank", "supervise", "s-1", "--interval", "0"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--interval must be a positive number" in bad.stderr
    none = subprocess.run([sys.executable, "-m", "taobank", "supervise", "nosuch-sweep"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert none.returncode != 0 and len(none.stderr.strip().splitlines()) == 1 and "Traceback" not in none.stderr
