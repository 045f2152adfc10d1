"""A SLURM job no node of its partition can hold is refused before its record opens, from the sizes sinfo gives in
the one preflight command; a job that fits goes on (the local cluster's nodes: 2 CPUs, 16000 MB, gpu:8)."""
from __future__ import annotations

from pathlib import Path

import pytest
from slurm_helpers import base_spec, call_log, wait_state

from taobank import records
from taobank.errors import TaoError
from taobank.platforms.slurm import submit as slurm_submit

pytestmark = pytest.mark.e2e


def _remote(log: Path) -> list[list[str]]:
    return [argv for argv in call_log(log) if Path(argv[0]).name == "ssh" and "-O" not in argv and "-G" not in argv
            and argv[-1] != "true"]


@pytest.mark.parametrize("too_big, said", [
    ({"cpus_per_task": 999}, "999 CPUs per task"),
    ({"memory": "20G"}, "--mem 20G"),
    ({"num_gpus": 9, "max_num_gpus_per_node": 16}, "9 GPUs per node"),
    ({"num_nodes": 3, "num_gpus": 0}, "has 2 such node(s) of 2"),
])
def test_a_job_no_node_can_hold_opens_no_record(slurm_env, too_big, said):
    with pytest.raises(TaoError, match="nothing was submitted") as exc:
        slurm_submit.submit(base_spec(container_runtime="none", **too_big), skip_nccl_probe=True)
    assert said in str(exc.value), exc.value
    assert records.list_records() == []
    assert len(_remote(slurm_env["call_log"])) == 1  # the one preflight command, nothing staged


def test_a_job_that_fits_runs_after_the_same_one_preflight(slurm_env):
    rec = slurm_submit.submit(base_spec(container_runtime="none", num_gpus=0, cpus_per_task=2, memory="8G"))
    assert wait_state(rec["id"])["state"] == "COMPLETE"
