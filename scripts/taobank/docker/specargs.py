"""Command-line flags that describe a Docker job spec (tao_docker.py submit).

The flags every platform shares come from :mod:`taobank.jobflags`; the ones here are Docker's own
(named GPUs, /dev/shm, bind mounts, results folder). The spec is validated here, at the same step as
on the other platforms.
"""
from __future__ import annotations

import argparse

from .. import jobflags
from ..errors import UsageError


def spec_arguments(parser: argparse.ArgumentParser) -> None:
    jobflags.add_arguments(parser, "docker")
    parser.add_argument("--gpu-device", action="append", metavar="INDEX|UUID",
                        help="a named GPU instead of a count (repeatable): 0, 2 or GPU-<uuid> from nvidia-smi -L")
    parser.add_argument("--all-gpus", action="store_true", help="every GPU of the host (--gpus all)")
    parser.add_argument("--shm-size", help="/dev/shm size, e.g. 16g (default: versions.yaml docker.defaults.shm_size)")
    parser.add_argument("--ipc-host", action="store_true", default=None, help="share the host's IPC and /dev/shm")
    parser.add_argument("--results-base", "--results-dir", dest="results_dir",
                        help="results base on the host: the job writes <dir>/<job id> (as SLURM's --results-base)")
    parser.add_argument("--mount", action="append", metavar="HOST:CONTAINER[:rw]",
                        help="bind an existing host folder (read-only unless :rw) (repeatable)")
    parser.add_argument("--secret-env", action="append", metavar="NAME",
                        help="NAME of a variable of this shell handed to the container by name (repeatable)")
    parser.add_argument("--secret", action="append", help=argparse.SUPPRESS)  # the other helpers' old spelling
    parser.add_argument("--network", choices=["default", "none", "host", "bridge"])
    parser.add_argument("--pull", choices=["missing", "always", "never"])
    parser.add_argument("--stop-grace", type=int, dest="stop_grace_seconds", metavar="SECONDS",
                        help="cancel: SIGTERM, this long, then SIGKILL")


def spec_from_args(args: argparse.Namespace) -> dict:
    """Merge --spec with the flags (flags win), then validate against the schema."""
    from . import spec as specmod

    spec = specmod.load_file(args.spec) if args.spec else {}
    if args.nodes not in (None, 1):
        raise UsageError("--nodes: a Docker job runs on this one host (use tao_k8s.py or tao_slurm.py for more nodes)")
    jobflags.apply(spec, args, "docker")
    if args.all_gpus:
        spec["gpus"] = "all"
    if args.gpu_device:
        spec.pop("gpus", None)
        spec["gpu_devices"] = list(args.gpu_device)
    for key in ("shm_size", "ipc_host", "results_dir", "network", "pull", "stop_grace_seconds"):
        value = getattr(args, key, None)
        if value is not None:
            spec[key] = value
    for item in args.mount or []:
        parts = item.split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            raise UsageError(f"--mount {item!r}: give HOST:CONTAINER or HOST:CONTAINER:rw (absolute paths)")
        spec["mounts"] = list(spec.get("mounts") or []) + [
            {"host": parts[0], "container": parts[1], "read_only": not (len(parts) == 3 and parts[2] == "rw")}]
    jobflags.apply_secrets_and_argv(spec, args)
    return specmod.validate(spec)
