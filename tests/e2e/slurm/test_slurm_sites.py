"""What real sites need, run on the local SLURM cluster: CPUs, wall-time units, a required account."""
from __future__ import annotations

import os
import sys

import pytest

from taobank.errors import TaoError
from taobank.slurm import verbs
from taobank.slurm.ssh import Connection

sys.path.insert(0, os.path.dirname(__file__))
from slurm_helpers import base_spec, wait_state  # noqa: E402

CPUS = "grep Cpus_allowed_list /proc/self/status; echo nproc=$(nproc)"


def _remote(argv: list[str]) -> str:
    return Connection().remote(argv, what="test").stdout


@pytest.mark.parametrize("cpus", [1, 2])
def test_the_step_gets_the_cpus_per_task_asked(slurm_env, cpus):
    """cgroup.conf ConstrainCores: a step bound to fewer CPUs than asked would print fewer."""
    rec = verbs.submit(base_spec(cpus_per_task=cpus, command=["bash", "-c", CPUS]))
    assert wait_state(rec["id"])["state"] == "COMPLETE"
    assert f"nproc={cpus}\n" in verbs.logs(rec["id"])["main.out"]


def test_wall_time_in_minutes_and_timeout_inside_it(slurm_env):
    rec = verbs.submit(base_spec(time_hours=None, time="00:10:00", command=["true"]))
    jid = rec["backend"]["slurm_job_id"]
    shown = _remote(["scontrol", "show", "job", "-o", jid])
    assert " TimeLimit=00:10:00 " in shown, shown  # not 11 minutes
    script = _remote(["cat", "--", rec["backend"]["script"]])
    assert "timeout --signal=TERM --kill-after=57 513 \\" in script  # SIGKILL at 570 s of 600
    assert wait_state(rec["id"])["state"] == "COMPLETE"


def test_a_job_without_the_required_account_is_refused_with_the_fix(slurm_env, monkeypatch):
    monkeypatch.delenv("SLURM_ACCOUNT")
    with pytest.raises(TaoError, match="set SLURM_ACCOUNT to an account you may use"):
        verbs.submit(base_spec())
    monkeypatch.setenv("SLURM_ACCOUNT", "no-such-account")
    with pytest.raises(TaoError, match="Invalid account.*SLURM_ACCOUNT"):
        verbs.submit(base_spec())
    monkeypatch.setenv("SLURM_ACCOUNT", slurm_env["env"]["SLURM_ACCOUNT"])
    rec = verbs.submit(base_spec())
    assert wait_state(rec["id"])["state"] == "COMPLETE"
