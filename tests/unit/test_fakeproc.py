"""The fake process runner reads the argv the bank really builds (kubectl globals, ssh remote scripts)."""
from __future__ import annotations

import pytest

from fakeproc import SCRIPTS, FakeProcs, parse
from taobank import run
from taobank.platforms.kubernetes.kubectl import Kubectl
from taobank.platforms.slurm import remote
from taobank.platforms.slurm.ssh import Connection


def test_kubectl_words_follow_the_globals():
    call = parse(Kubectl("team-a", "ctx-1").argv("get", "jobs", "-l", "x=y"))
    assert (call.program, call.context, call.namespace, call.words) == ("kubectl", "ctx-1", "team-a",
                                                                         ["get", "jobs", "-l", "x=y"])


def test_ssh_scripts_are_named_after_their_remote_constant(slurm):
    conn = Connection()
    call = parse(conn.command_argv(["sh", "-c", remote.SBATCH, "tao", "/a b/job.sbatch", "/logs", "name; rm -rf /"]))
    assert call.script == "SBATCH" and call.args == ["/a b/job.sbatch", "/logs", "name; rm -rf /"]
    plain = parse(conn.command_argv(["scancel", "42"]))
    assert plain.script is None and plain.words == ["scancel", "42"]
    assert {"SBATCH", "SWEEP", "FIND", "ADOPT", "STAGE", "LOGS", "FOLLOW", "REMOVE", "MISSING"} <= set(SCRIPTS.values())


def test_an_unexpected_call_fails_the_test_at_once(fake):
    with pytest.raises(AssertionError, match="no rule answers"):
        run.run(["kubectl", "-n", "default", "delete", "job", "x"])


def test_the_latest_rule_wins_and_times_limits_a_rule():
    fake = FakeProcs()
    fake.kubectl("get", answer="old")
    fake.kubectl("get", answer="new", times=1)
    with run.fake_processes(fake):
        got = [run.run(["kubectl", "get", "x"]).stdout for _ in range(2)]
    assert got == ["new", "old"] and len(fake.calls) == 2
