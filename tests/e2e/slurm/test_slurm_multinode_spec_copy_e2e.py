"""A 2-node SLURM job's ranks each rewrite their own copy of the spec file, not the one staged on shared storage.

TAO's entrypoint, with WORLD_SIZE set, writes its ``-e`` spec file back in place on every node (the TAO stand-in
in testclusters/tao_lightning does the same); the bank stages a job's spec files once in its folder on the
shared filesystem. Under the node guard (taobank.multinode) each task copies the spec to its node's /dev/shm and
TAO reads and rewrites that copy: both nodes train together and the staged file stays as it was uploaded.
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


def test_each_node_rewrites_its_own_spec_copy(slurm_env, tmp_path):
    probe_gloo_ok()  # the multi-node gate passes for real (gloo on the CPU between the nodes)
    text = "# staged once for both nodes (a rewrite drops this comment)\ntrain:\n  num_epochs: 1\n"
    (tmp_path / "train.yaml").write_text(text)
    spec = base_spec(container_runtime="none", num_gpus=4, num_nodes=2, memory="3G", time_hours=None, time_minutes=5,
                     spec_files={"train.yaml": str(tmp_path / "train.yaml")},
                     command=[str(local_slurm.tao_standin("dino")), "train", "-e", "{specs}/train.yaml"])
    rec = slurm_submit.submit(spec)
    done = wait_state(rec["id"], timeout=360)
    out = slurm_logs.logs(rec["id"])
    assert done["state"] == "COMPLETE", out
    main = out.get("main.out", "") + out.get("main.err", "")
    assert main.count("num_gpus=2 num_nodes=2 multinode=True") == 2, main  # TAO's multi-node set-up, on each node
    assert "[Multinode]" not in main, main
    base = Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"])
    lightning_ranks.check(lightning_ranks.read(base / "results" / rec["id"]), nodes=2, per_node=2)
    assert (base / "jobs" / rec["id"] / "specs" / "train.yaml").read_text() == text  # nobody rewrote the staged one
