"""The TAO stand-in's entrypoint (testclusters/tao_lightning/tao_entry.py) counts GPUs and nodes as TAO's does
(nvidia_tao_pytorch/core/entrypoint.py ``launch``): the e2e Lightning tests mean something only if it does."""
from __future__ import annotations

import pytest

from testclusters.tao_lightning.tao_entry import gpu_counts, multinode_error, slurm_detected

RENDEZVOUS = {"MASTER_ADDR": "node1", "MASTER_PORT": "29500", "NODE_RANK": "1"}


def counts(args: str, env: dict | None = None, action: str = "train", spec: str | None = None) -> tuple:
    got = gpu_counts(action, args.split(), env or {}, spec)
    return got["num_gpus"], got["num_nodes"], got["multinode"], got["visible_devices"]


def test_without_overrides_tao_trains_on_one_gpu_of_one_node():
    assert counts("") == (1, 1, False, "0")
    assert counts("results_dir=/r train.num_epochs=3") == (1, 1, False, "0")


def test_the_counts_come_from_the_command_by_substring():
    assert counts("train.num_gpus=2") == (2, 1, False, "0, 1")
    assert counts("train.num_gpus=2 train.num_nodes=3") == (2, 3, False, "0, 1")
    assert counts("evaluate.num_gpus=4", action="evaluate")[0] == 4
    assert counts("train.gpu_ids=[0,1,2]") == (3, 1, False, "0, 1, 2")  # the longer of num_gpus and gpu_ids
    assert counts("train.num_gpus=2 train.num_gpus=4")[0] == 2  # TAO splits on the first one


def test_num_nodes_alone_is_not_read():
    """TAO parses num_nodes only inside its num_gpus/gpu_ids/cuda_blocking branch."""
    assert counts("train.num_nodes=2") == (1, 1, False, "0")


def test_actions_without_gpus_ignore_the_counts():
    assert counts("export.num_gpus=4", action="export") == (1, 1, False, "0")


def test_world_size_is_the_node_count_and_overrides_the_command():
    env = {"WORLD_SIZE": "2", "NUM_GPU_PER_NODE": "2", **RENDEZVOUS}
    assert counts("train.num_gpus=1 train.num_nodes=5", env) == (2, 2, True, "0, 1")


@pytest.mark.parametrize("missing", sorted(RENDEZVOUS))
def test_world_size_without_the_rendezvous_falls_back_to_one_node(missing):
    env = {"WORLD_SIZE": "2", "NUM_GPU_PER_NODE": "2", **RENDEZVOUS}
    del env[missing]
    assert counts("train.num_gpus=2", env) == (2, 1, False, "0, 1")


def test_the_spec_file_counts_only_without_overrides(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("train:\n  num_gpus: 3\n  num_nodes: 2\ndistill_unused: {}\n")
    assert counts("", spec=str(spec)) == (3, 2, False, "0, 1, 2")
    assert counts("", spec=str(spec), action="distill") == (3, 2, False, "0, 1, 2")  # distill reads train
    assert counts("", spec=str(spec), action="evaluate") == (1, 1, False, "0")
    assert counts("train.num_gpus=1", spec=str(spec)) == (1, 1, False, "0")


def test_slurm_detection_is_lightnings():
    assert slurm_detected({"SLURM_NTASKS": "2", "SLURM_JOB_NAME": "dino-train-1"}) is True
    assert slurm_detected({"SLURM_NTASKS": "2", "SLURM_JOB_NAME": "bash"}) is False
    assert slurm_detected({"SLURM_NTASKS": "2", "SLURM_JOB_NAME": "interactive"}) is False
    assert slurm_detected({"SLURM_JOB_NAME": "dino-train-1"}) is False


def test_tao_falls_back_when_rank0s_name_does_not_resolve_or_the_spec_cannot_be_rewritten(tmp_path):
    """TAO's multi-node branch (validate_configs, then the in-place spec rewrite) fails on these: the node falls
    back to one node."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("# a comment TAO's rewrite drops\ntrain:\n  num_epochs: 1\n")
    here = {**RENDEZVOUS, "MASTER_ADDR": "localhost", "WORLD_SIZE": "2"}
    assert multinode_error({**here, "MASTER_ADDR": "no-such-rank0.invalid"}, str(spec)) == (
        "Invalid master address: no-such-rank0.invalid")
    assert multinode_error({k: v for k, v in here.items() if k != "NODE_RANK"}, None) == "NODE_RANK not set"
    assert multinode_error(here, str(spec)) is None
    assert spec.read_text() == "train:\n  num_epochs: 1\n"  # rewritten in place, as TAO does
    spec.write_text("")  # a spec another node has just truncated
    assert multinode_error(here, str(spec)) == "'NoneType' object has no attribute 'get'"
    env = {"WORLD_SIZE": "2", "NUM_GPU_PER_NODE": "2", **here}
    assert counts("train.num_gpus=2", env) == (2, 2, True, "0, 1")
    got = gpu_counts("train", ["train.num_gpus=2"], env, None, "Invalid master address: x")
    assert (got["num_nodes"], got["multinode"]) == (1, False)
