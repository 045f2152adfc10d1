"""SLURM's submit flags as data (wall time, partition, account, spec files ...) and where each value goes
in its job spec. The command line builds the grammar from :data:`FLAGS` (tao_slurm.py submit; the command
itself comes after ``--``)."""
from __future__ import annotations

import os
from typing import Any, Mapping

from ...errors import UsageError
from .spec import SlurmSpec
from ...jobspec import Flag, Shared, merge, put, put_secrets_and_command

SHARED = Shared(aliases={"nodes": ("--num-nodes",), "cpus": ("--cpus-per-task",), "memory": ("--mem",)},
                help={"cpus": "CPUs per task (a whole number)", "memory": "memory per node: 16G, 64000M ..."})

FLAGS = (
    Flag(("--num-gpus",), type=int, help="the spec's num_gpus: GPUs in total (spread over the nodes)"),
    Flag(("--max-gpus-per-node",), type=int),
    Flag(("--time-hours",), type=float, help="wall time in hours (or --time-minutes / --time)"),
    Flag(("--time-minutes",), type=float, help="wall time in minutes"),
    Flag(("--time",), metavar="HH:MM:SS", help="wall time as HH:MM:SS or D-HH:MM:SS"),
    Flag(("--timeout-hours",), type=float),
    Flag(("--partition",)),
    Flag(("--account",)),
    Flag(("--runtime",), choices=("pyxis", "none")),
    Flag(("--results-base",)),
    Flag(("--cluster-name",)),
    Flag(("--dataset-root",), help="lustre:///abs/path (root mode)"),
    Flag(("--require",), kind="list", help="file under the dataset root that must exist (repeat)"),
    Flag(("--secret-env",), kind="list", metavar="NAME",
         help="NAME of a secret env var to pass (value read from your environment)"),
    Flag(("--secret",), kind="list", hidden=True),  # deprecated spelling of --secret-env
    Flag(("--spec-file",), kind="list", metavar="[NAME=]PATH",
         help="local file uploaded to <job_dir>/specs/NAME (repeat); the command names it {specs}/NAME"),
    Flag(("--no-requeue",), kind="on", default=False),
    Flag(("--max-attempts",), type=int, metavar="N",
         help="wall-time chain: at the wall time the job resubmits itself (same record) and resumes "
              "from its latest checkpoint, up to N allocations in all"),
    Flag(("--max-total-time",), metavar="DURATION",
         help="wall-time chain: run time over every attempt (24h, 90m, 2d, or minutes)"),
    Flag(("--walltime-margin",), dest="walltime_margin_seconds", type=int, metavar="SECONDS",
         help="wall-time chain: USR1 this long before the wall time (default: versions.yaml "
              "slurm.defaults.walltime_margin_seconds)"),
    Flag(("--prefetch",), kind="list", metavar="SOURCE=DEST",
         help="small input fetched by a CPU-only job before training (repeat): s3://bucket/key, "
              "hf://org/repo[/file][@rev] or ngc://org/[team/]model:version into <job_dir>/prefetch/"
              "DEST; the command names it {prefetch}/DEST (see references/prefetch.md)"),
    Flag(("--prefetch-max-bytes",), type=int, metavar="N",
         help="cap on all prefetches of the job (default versions.yaml slurm.uploads.max_prefetch_bytes)"),
)

#: the shared flags' values -> this platform's spec keys (GPUs: see :func:`spec_from_flags`, the spec counts them in total)
SHARED_KEYS = SlurmSpec.flag_keys()
_OWN_KEYS = {"num_gpus": "num_gpus", "max_gpus_per_node": "max_num_gpus_per_node", "time_hours": "time_hours",
             "time_minutes": "time_minutes", "time": "time", "timeout_hours": "timeout_hours",
             "partition": "partition", "account": "account", "runtime": "container_runtime",
             "results_base": "results_base", "cluster_name": "cluster_name", "max_attempts": "max_attempts",
             "max_total_time": "max_total_time", "walltime_margin_seconds": "walltime_margin_seconds"}
_WALL_TIME = ("time_hours", "time_minutes", "time")


def spec_from_flags(path: str | None, values: Mapping[str, Any]) -> dict:
    """The spec file at ``path`` (if any) with the given flag values over it (flags win), then validated."""
    from . import spec as specmod

    spec = specmod.load_file(path) if path else {}  # its spec_files are relative to it
    for item in values.get("spec_file") or []:
        name, sep, file = item.partition("=")
        if not sep:
            name, file = os.path.basename(os.path.normpath(item)), item
        # absolute now: the saved spec must name this file wherever `continue` runs from (slurm.continued)
        spec["spec_files"] = {**(spec.get("spec_files") or {}), name: os.path.abspath(os.path.expanduser(file))}
    if any(values.get(k) is not None for k in _WALL_TIME):
        for key in _WALL_TIME:  # a wall time flag replaces the spec's
            spec.pop(key, None)
    put(spec, values, _OWN_KEYS)
    put(spec, values, SHARED_KEYS, convert={"cpus": _cpus})
    gpus = values.get("gpus_per_node")
    if gpus is not None:  # the spec counts GPUs in total
        spec["num_gpus"] = gpus * int(spec.get("num_nodes") or 1)
        spec["max_num_gpus_per_node"] = max(gpus, 1)
    merge(spec, values, {"env": "env", "nccl_env": "nccl_env"})
    if values.get("no_requeue"):
        spec["use_requeue"] = False
    for item in values.get("prefetch") or []:
        from ...sources import parse_item

        dest, source = parse_item(item)
        spec["prefetch"] = {**(spec.get("prefetch") or {}), dest: source}
    if values.get("prefetch_max_bytes") is not None:
        spec["prefetch_max_bytes"] = values["prefetch_max_bytes"]
    if values.get("dataset_root") or values.get("require"):
        ds = dict(spec.get("dataset") or {})
        if values.get("dataset_root"):
            ds["root"] = values["dataset_root"]
        if values.get("require"):
            ds["required"] = list(ds.get("required") or []) + list(values["require"])
        spec["dataset"] = ds
    put_secrets_and_command(spec, values)
    return specmod.validate(spec)


def _cpus(value: Any) -> int:
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"--cpus {text!r}: SLURM gives whole CPUs per task (a number of at least 1)")
    return int(text)
