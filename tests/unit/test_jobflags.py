"""One job vocabulary: the same flags on every helper, each written under its platform's spec key."""
from __future__ import annotations

import argparse

import pytest

from taobank import jobflags, states
from taobank.docker import specargs as docker_args
from taobank.errors import UsageError
from taobank.kubernetes import specargs as k8s_args
from taobank.slurm import specargs as slurm_args

SHARED = ["--image", "nvcr.io/nvidia/tao/tao-toolkit:x", "--network-arch", "dino", "--action", "train",
          "--nodes", "2", "--gpus-per-node", "4", "--cpus", "8", "--env", "A=1", "--nccl-env", "NCCL_DEBUG=INFO"]


def parsed(module, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    module.spec_arguments(parser)
    if module in (slurm_args, docker_args):
        parser.add_argument("command", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def test_the_shared_flags_mean_the_same_request_on_both_platforms():
    k8s = k8s_args.spec_from_args(parsed(k8s_args, SHARED + ["--memory", "32Gi", "--command", "true"]))
    slurm = slurm_args.spec_from_args(parsed(slurm_args, SHARED + ["--memory", "32G", "--", "true"]))
    assert (k8s["nodes"], k8s["gpus"], k8s["cpu"], k8s["memory"]) == (2, 4, "8", "32Gi")
    assert (slurm["num_nodes"], slurm["num_gpus"], slurm["max_num_gpus_per_node"], slurm["cpus_per_task"],
            slurm["mem"]) == (2, 8, 4, 8, "32G")  # SLURM's spec counts GPUs in total
    for spec in (k8s, slurm):
        assert (spec["image"], spec["network_arch"], spec["action"]) == ("nvcr.io/nvidia/tao/tao-toolkit:x", "dino", "train")
        assert spec["env"] == {"A": "1"} and spec["nccl_env"] == {"NCCL_DEBUG": "INFO"}


def test_every_shared_flag_is_mapped_for_every_platform():
    assert all(set(keys) == set(states.PLATFORMS) for keys in jobflags.SPEC_KEYS.values())
    for platform in states.PLATFORMS:
        parser = argparse.ArgumentParser()
        jobflags.add_arguments(parser, platform)
        dests = {a.dest for a in parser._actions}
        assert set(jobflags.SPEC_KEYS) <= dests


@pytest.mark.parametrize("module, old, new", [
    (k8s_args, ["--cpu", "3"], ["--cpus", "3"]), (k8s_args, ["--gpus", "2"], ["--gpus-per-node", "2"]),
    (slurm_args, ["--cpus-per-task", "3"], ["--cpus", "3"]), (slurm_args, ["--mem", "8G"], ["--memory", "8G"]),
    (slurm_args, ["--num-nodes", "3"], ["--nodes", "3"]),
])
def test_the_older_spellings_still_say_the_same(module, old, new):
    tail = ["--command", "true"] if module is k8s_args else ["--", "true"]
    base = ["--image", "img:1"]
    assert module.spec_from_args(parsed(module, base + old + tail)) == module.spec_from_args(parsed(module, base + new + tail))


def test_slurm_cpus_must_be_whole():
    with pytest.raises(UsageError, match="whole CPUs"):
        slurm_args.spec_from_args(parsed(slurm_args, ["--image", "i:1", "--cpus", "500m", "--", "true"]))


def test_both_helpers_validate_the_spec_at_the_same_step():
    """A bad value is refused while the flags become a spec, on either platform (before any plan)."""
    from taobank.errors import TaoError

    with pytest.raises(TaoError, match="memory"):
        k8s_args.spec_from_args(parsed(k8s_args, ["--image", "i:1", "--memory", "lots", "--command", "true"]))
    with pytest.raises(TaoError, match="mem"):
        slurm_args.spec_from_args(parsed(slurm_args, ["--image", "i:1", "--memory", "lots", "--", "true"]))


def test_the_shared_flags_mean_the_same_on_one_docker_host():
    one = [w for w in SHARED if w not in ("--nodes", "2")]
    spec = docker_args.spec_from_args(parsed(docker_args, one + ["--memory", "32g", "--", "true"]))
    assert (spec["gpus"], spec["cpus"], spec["memory"], spec["env"], spec["nccl_env"]) == (
        4, 8.0, "32g", {"A": "1"}, {"NCCL_DEBUG": "INFO"})
    with pytest.raises(UsageError, match="one host"):
        docker_args.spec_from_args(parsed(docker_args, SHARED + ["--", "true"]))
    with pytest.raises(UsageError, match="CPU quota"):
        docker_args.spec_from_args(parsed(docker_args, ["--image", "i:1", "--cpus", "500m", "--", "true"]))
