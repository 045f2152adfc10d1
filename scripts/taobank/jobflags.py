"""The job flags every platform's submit shares, and the spec key each platform gives them.

One vocabulary on the command line (``--nodes``, ``--gpus-per-node``,
``--cpus``, ``--memory`` ...), one name map to the specs: Kubernetes counts
GPUs per pod, SLURM's spec counts them in total, so the map says how each
platform spells the same request. Both helpers turn flags into a spec through
:func:`apply` in their ``specargs`` module and validate the result there, at
the same step.
"""
from __future__ import annotations

import argparse
from typing import Any

from .cli import parse_kv
from .errors import UsageError

#: flag dest -> the spec key per platform (None: the platform derives it, see :func:`apply`).
SPEC_KEYS: dict[str, dict[str, str | None]] = {
    "image": {"kubernetes": "image", "slurm": "image", "docker": "image"},
    "network_arch": {"kubernetes": "network_arch", "slurm": "network_arch", "docker": "network_arch"},
    "action": {"kubernetes": "action", "slurm": "action", "docker": "action"},
    "nodes": {"kubernetes": "nodes", "slurm": "num_nodes", "docker": None},  # Docker: one host (--nodes 1 only)
    "gpus_per_node": {"kubernetes": "gpus", "slurm": None, "docker": "gpus"},  # SLURM: num_gpus = nodes x this
    "cpus": {"kubernetes": "cpu", "slurm": "cpus_per_task", "docker": "cpus"},
    "memory": {"kubernetes": "memory", "slurm": "mem", "docker": "memory"},
}

#: How each platform reads --cpus and --memory (the value goes to its scheduler as it is).
_UNITS = {
    "kubernetes": ("CPUs per pod: 4, 0.5 or 500m", "memory per pod: a quantity such as 16Gi"),
    "slurm": ("CPUs per task (a whole number)", "memory per node: 16G, 64000M ..."),
    "docker": ("a CPU quota for the container: 4 or 0.5", "the container's memory limit (an OOM kill above it): 32g"),
}


def add_arguments(parser: argparse.ArgumentParser, platform: str) -> None:
    """The shared flags, with the same names and meaning on every helper (older spellings kept as aliases)."""
    cpus_help, mem_help = _UNITS[platform]
    parser.add_argument("--spec", help="job spec file (YAML or JSON); flags override its values")
    parser.add_argument("--image")
    parser.add_argument("--network-arch", help="TAO network, e.g. dino (default custom: a generic command)")
    parser.add_argument("--action", help="TAO action, e.g. train (default run)")
    nodes = ["--nodes"] + (["--num-nodes"] if platform == "slurm" else [])
    parser.add_argument(*nodes, dest="nodes", type=int, help="nodes (pods on Kubernetes)")
    parser.add_argument("--gpus-per-node", "--gpus", dest="gpus_per_node", type=int,
                        help="GPUs on each node (--gpus is a synonym)")
    cpus = ["--cpus"] + (["--cpu"] if platform == "kubernetes" else ["--cpus-per-task"])
    parser.add_argument(*cpus, dest="cpus", help=cpus_help)
    memory = ["--memory"] + (["--mem"] if platform == "slurm" else [])
    parser.add_argument(*memory, dest="memory", help=mem_help)
    parser.add_argument("--env", action="append", metavar="KEY=VALUE", help="non-secret env (repeatable)")
    parser.add_argument("--nccl-env", action="append", metavar="NCCL_X=VALUE",
                        help="per-cluster NCCL env (repeatable)")


def apply(spec: dict, args: argparse.Namespace, platform: str) -> dict:
    """``spec`` with the shared flags given on the command line written under the platform's keys."""
    for dest, keys in SPEC_KEYS.items():
        value = getattr(args, dest, None)
        key = keys[platform]
        if value is None or key is None:
            continue
        if (dest, platform) == ("cpus", "docker"):
            value = _quota(value)
        spec[key] = _cpus(value) if (dest, platform) == ("cpus", "slurm") else value
    gpus = getattr(args, "gpus_per_node", None)
    if platform == "slurm" and gpus is not None:  # the spec counts GPUs in total
        spec["num_gpus"] = gpus * int(spec.get("num_nodes") or 1)
        spec["max_num_gpus_per_node"] = max(gpus, 1)
    for flag, key in (("env", "env"), ("nccl_env", "nccl_env")):
        extra = parse_kv(getattr(args, flag, None), "--" + flag.replace("_", "-"))
        if extra:
            spec[key] = {**(spec.get(key) or {}), **extra}
    return spec


def apply_secrets_and_argv(spec: dict, args: argparse.Namespace) -> dict:
    """``--secret-env NAME`` (and the old ``--secret``) added to the spec's secrets, and the argv after ``--``
    as its command: how the helpers whose command is an argv (SLURM, Docker) fold them in."""
    from . import verbcli

    if getattr(args, "secret", None):
        verbcli.deprecated("--secret")
    names = (getattr(args, "secret_env", None) or []) + (getattr(args, "secret", None) or [])
    if names:
        spec["secrets"] = list(dict.fromkeys(list(spec.get("secrets") or []) + names))
    command = getattr(args, "command", None)
    if command:
        cmd = command[1:] if command[0] == "--" else command
        if cmd:
            spec["command"] = cmd
    return spec


def _cpus(value: Any) -> int:
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"--cpus {text!r}: SLURM gives whole CPUs per task (a number of at least 1)")
    return int(text)


def _quota(value: Any) -> float:
    try:
        quota = float(str(value).strip())
    except ValueError:
        quota = 0.0
    if not 0 < quota <= 1024:
        raise UsageError(f"--cpus {str(value).strip()!r}: Docker takes a CPU quota such as 4 or 0.5")
    return quota
