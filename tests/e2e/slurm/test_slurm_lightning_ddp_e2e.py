"""Real PyTorch Lightning DDP (CPU, gloo) through the bank on the local SLURM cluster.

The job runs the TAO stand-in (testclusters/tao_lightning: ``dino train``, TAO's own rules for GPU and node
counts, then Lightning with ``strategy='ddp'``) from the nodes' Lightning venv, as a TAO command: the first
word is the spec's network_arch and the second its action, and the command names no GPU or node count.
So it passes only when the bank does what NVIDIA's SDK does for TAO on SLURM:

* it appends ``train.num_gpus=<GPUs per node>`` (and ``train.num_nodes=<nodes>`` past one node), without
  which TAO trains on one GPU of one node;
* each task presents ``SLURM_JOB_NAME=bash`` with SLURM_NTASKS, SLURM_PROCID, ..., RANK and LOCAL_RANK unset,
  without which Lightning takes its SLURM mode (one srun task per device, which one task per node never
  starts) or starts no processes of its own; a one-node task has no WORLD_SIZE/MASTER_* either.

Each Lightning process writes its ranks after one all_reduce (tests/support/lightning_ranks.py checks them).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from taobank.platforms.slurm import logs as slurm_logs, submit as slurm_submit
from testclusters import slurm as local_slurm
from tests.support import lightning_ranks

sys.path.insert(0, os.path.dirname(__file__))
from slurm_helpers import base_spec, probe_gloo_ok, wait_state  # noqa: E402

pytestmark = pytest.mark.e2e


def lightning_spec(gpus_per_node: int, nodes: int) -> dict:
    # mem: two Lightning processes per node (DefMemPerCPU would be far too little); time: a hang ends soon
    # (the process group itself gives up after 90 s)
    return base_spec(container_runtime="none", num_gpus=gpus_per_node * nodes, num_nodes=nodes, memory="3G",
                     time_hours=None, time_minutes=5, command=[str(local_slurm.tao_standin("dino")), "train"])


def run_job(slurm_env, spec: dict) -> tuple[str, list[dict]]:
    rec = slurm_submit.submit(spec)
    done = wait_state(rec["id"], timeout=360)
    logs = slurm_logs.logs(rec["id"])
    assert done["state"] == "COMPLETE", logs
    folder = Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"]) / "results" / rec["id"]
    return logs.get("main.out", ""), lightning_ranks.read(folder)


def test_lightning_ddp_on_two_nodes_gets_every_rank_and_the_world_size(slurm_env):
    probe_gloo_ok()  # the multi-node gate passes for real (gloo on the CPU between the nodes)
    out, lines = run_job(slurm_env, lightning_spec(gpus_per_node=2, nodes=2))
    assert "num_gpus=2 num_nodes=2 multinode=True" in out, out  # TAO's entrypoint saw the bank's counts
    by_node = lightning_ranks.check(lines, nodes=2, per_node=2)
    for n, group in by_node.items():
        for line in group:
            task = line["task_env"]
            # what the bank gave the task, before Lightning rewrote WORLD_SIZE/NODE_RANK for its children
            assert task["slurm_detect"] is False, task
            assert "RANK" not in task["present"] and "LOCAL_RANK" not in task["present"], task
            assert task["present"]["WORLD_SIZE"] == "2" and task["present"]["NODE_RANK"] == str(n), task
        assert len({line["task_env"]["present"]["SLURMD_NODENAME"] for line in group}) == 1
    # one task per SLURM node: the two node ranks ran on the two nodes
    assert {g[0]["task_env"]["present"]["SLURMD_NODENAME"] for g in by_node.values()} == set(local_slurm.conf.NODES)


def test_lightning_ddp_on_one_node_starts_both_processes_itself(slurm_env):
    out, lines = run_job(slurm_env, lightning_spec(gpus_per_node=2, nodes=1))
    assert "num_gpus=2 num_nodes=1 multinode=False" in out, out
    lightning_ranks.check(lines, nodes=1, per_node=2)
    for line in lines:
        task = line["task_env"]
        assert task["slurm_detect"] is False, task
        leaked = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"} & set(task["present"])
        assert not leaked, task  # a WORLD_SIZE would send TAO down its multi-node path, even at 1
