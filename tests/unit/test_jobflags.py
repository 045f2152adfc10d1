"""One job vocabulary: the same flags on every helper, each written under its platform's spec key."""
from __future__ import annotations

import argparse

import pytest

from taobank import registry, states
from taobank.cli import entry
from taobank.errors import UsageError

SHARED = ["--image", "nvcr.io/nvidia/tao/tao-toolkit:x", "--network-arch", "dino", "--action", "train",
          "--nodes", "2", "--gpus-per-node", "4", "--cpus", "8", "--env", "A=1", "--nccl-env", "NCCL_DEBUG=INFO"]


def parsed(platform: str, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    entry.spec_arguments(parser, platform)
    if platform in ("slurm", "docker"):
        parser.add_argument("command", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def spec(platform: str, argv: list[str]) -> dict:
    return entry.spec_from_args(parsed(platform, argv), platform)


def test_the_shared_flags_mean_the_same_request_on_both_platforms():
    k8s = spec("kubernetes", SHARED + ["--memory", "32Gi", "--command", "true"])
    slurm = spec("slurm", SHARED + ["--memory", "32G", "--", "true"])
    assert (k8s["nodes"], k8s["gpus"], k8s["cpu"], k8s["memory"]) == (2, 4, "8", "32Gi")
    assert (slurm["num_nodes"], slurm["num_gpus"], slurm["max_num_gpus_per_node"], slurm["cpus_per_task"],
            slurm["memory"]) == (2, 8, 4, 8, "32G")  # SLURM's spec counts GPUs in total
    for one in (k8s, slurm):
        assert (one["image"], one["network_arch"], one["action"]) == ("nvcr.io/nvidia/tao/tao-toolkit:x", "dino", "train")
        assert one["env"] == {"A": "1"} and one["nccl_env"] == {"NCCL_DEBUG": "INFO"}


def test_every_shared_flag_is_on_every_platform_and_mapped_by_it():
    """Each adapter says where the shared values go (Docker: one host, no nodes; SLURM derives its GPU keys)."""
    shared = {f.dest for f in entry.SHARED} - {"spec", "env", "nccl_env"}
    derived = {"docker": {"nodes"}, "slurm": {"gpus_per_node"}}
    for platform in registry.names():
        parser = argparse.ArgumentParser()
        entry.spec_arguments(parser, platform)
        assert {f.dest for f in entry.SHARED} <= {a.dest for a in parser._actions}
        assert set(entry.declaration(platform).SHARED_KEYS) == shared - derived.get(platform, set())


def test_no_adapter_imports_argparse_or_the_command_line():
    """Platform flags are data: the adapters declare them, the command line parses them."""
    import pathlib

    import taobank

    root = pathlib.Path(taobank.__file__).parent
    for platform in registry.names():
        for path in (root / platform).glob("*.py"):
            text = path.read_text()
            assert "import argparse" not in text and "taobank.cli" not in text and "..cli" not in text, path


@pytest.mark.parametrize("platform, old, new", [
    ("kubernetes", ["--cpu", "3"], ["--cpus", "3"]), ("kubernetes", ["--gpus", "2"], ["--gpus-per-node", "2"]),
    ("slurm", ["--cpus-per-task", "3"], ["--cpus", "3"]), ("slurm", ["--mem", "8G"], ["--memory", "8G"]),
    ("slurm", ["--num-nodes", "3"], ["--nodes", "3"]),
])
def test_the_older_spellings_still_say_the_same(platform, old, new):
    tail = ["--command", "true"] if platform == "kubernetes" else ["--", "true"]
    base = ["--image", "img:1"]
    assert spec(platform, base + old + tail) == spec(platform, base + new + tail)


def test_slurm_cpus_must_be_whole():
    with pytest.raises(UsageError, match="whole CPUs"):
        spec("slurm", ["--image", "i:1", "--cpus", "500m", "--", "true"])


def test_both_helpers_validate_the_spec_at_the_same_step():
    """A bad value is refused while the flags become a spec, on either platform (before any plan)."""
    from taobank.errors import TaoError

    with pytest.raises(TaoError, match="memory"):
        spec("kubernetes", ["--image", "i:1", "--memory", "lots", "--command", "true"])
    with pytest.raises(TaoError, match="mem"):
        spec("slurm", ["--image", "i:1", "--memory", "lots", "--", "true"])


def test_the_shared_flags_mean_the_same_on_one_docker_host():
    one = [w for w in SHARED if w not in ("--nodes", "2")]
    got = spec("docker", one + ["--memory", "32g", "--", "true"])
    assert (got["gpus"], got["cpus"], got["memory"], got["env"], got["nccl_env"]) == (
        4, 8.0, "32g", {"A": "1"}, {"NCCL_DEBUG": "INFO"})
    with pytest.raises(UsageError, match="one host"):
        spec("docker", SHARED + ["--", "true"])
    with pytest.raises(UsageError, match="CPU quota"):
        spec("docker", ["--image", "i:1", "--cpus", "500m", "--", "true"])


def test_each_declared_flag_becomes_one_argparse_flag():
    """The grammar is the declarations: every spelling, hidden ones unlisted, exclusive groups enforced."""
    for platform in registry.names():
        parser = argparse.ArgumentParser()
        entry.spec_arguments(parser, platform)
        actions = {a.dest: a for a in parser._actions}
        for flag in entry.flags_of(platform):
            action = actions[flag.dest]
            assert tuple(action.option_strings) == flag.names
            assert (action.help == argparse.SUPPRESS) == flag.hidden
    with pytest.raises(SystemExit):
        parsed("kubernetes", ["--command", "true", "--args-json", "[]"])


def test_key_value_flags_reach_the_adapter_as_dicts_and_the_argv_as_a_list():
    values = entry.values_of(parsed("slurm", ["--env", "A=1", "--secret-env", "T", "--", "dino", "train"]), "slurm")
    assert (values["env"], values["secret_env"], values["command"]) == ({"A": "1"}, ["T"], ["dino", "train"])
    with pytest.raises(UsageError, match="--env must look like KEY=VALUE"):
        entry.values_of(parsed("docker", ["--env", "A", "--", "true"]), "docker")
