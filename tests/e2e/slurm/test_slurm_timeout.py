"""TIMEOUT takes 60-90 s on SLURM (--time=1): its own module so it can run first/alone."""
from __future__ import annotations

import os
import sys

from taobank.platforms.slurm import submit as slurm_submit

sys.path.insert(0, os.path.dirname(__file__))
from slurm_helpers import base_spec, wait_state  # noqa: E402


def test_wall_time_gives_timeout_error_and_inner_timeout_writes_a_marker(slurm_env):
    wall = slurm_submit.submit(base_spec(time_hours=1 / 60, timeout_hours=0, command=["sleep", "600"]))
    inner = slurm_submit.submit(base_spec(time_hours=1 / 60, timeout_hours=2 / 3600, command=["sleep", "600"]))
    done_inner = wait_state(inner["id"], timeout=60)
    assert done_inner["state"] == "ERROR" and "timeout_hours" in done_inner["message"]
    assert done_inner["backend"]["exit_code"] == "124:0"
    # issue 37: a job cut short at its limit says how to carry on, first on its line
    assert done_inner["message"].startswith(f"time limit: carry on with tao_jobs.py continue {inner['id']} --time-hours H")
    done = wait_state(wall["id"], timeout=180)
    assert done["state"] == "ERROR" and done["backend"]["slurm_state"] == "TIMEOUT"
    assert done["err_class"] == "ERR_PROGRAM" and "wall time" in done["message"]
    # issue 49: the cause, the limit SLURM held it to and the flag that raises it
    assert "TIMEOUT: SLURM ended the job at its wall time (00:01:00); ask for more with --time-hours" in done["message"]
    assert done["message"].startswith(f"time limit: carry on with tao_jobs.py continue {wall['id']} --time-hours H")
