"""Command-line flags that describe a SLURM job spec (tao_slurm.py submit).

The flags every platform shares come from :mod:`taobank.jobflags`; the ones
here are SLURM's own (wall time, partition, account, spec files ...). The
spec is validated here, at the same step as on Kubernetes.
"""
from __future__ import annotations

import argparse
import os

from .. import jobflags


def spec_arguments(parser: argparse.ArgumentParser) -> None:
    """The submit flags of tao_slurm.py (the command itself comes after ``--``)."""
    jobflags.add_arguments(parser, "slurm")
    parser.add_argument("--num-gpus", type=int, help="the spec's num_gpus: GPUs in total (spread over the nodes)")
    parser.add_argument("--max-gpus-per-node", type=int)
    parser.add_argument("--time-hours", type=float, help="wall time in hours (or --time-minutes / --time)")
    parser.add_argument("--time-minutes", type=float, help="wall time in minutes")
    parser.add_argument("--time", metavar="HH:MM:SS", help="wall time as HH:MM:SS or D-HH:MM:SS")
    parser.add_argument("--timeout-hours", type=float)
    parser.add_argument("--partition")
    parser.add_argument("--account")
    parser.add_argument("--runtime", choices=["pyxis", "none"])
    parser.add_argument("--results-base")
    parser.add_argument("--cluster-name")
    parser.add_argument("--dataset-root", help="lustre:///abs/path (root mode)")
    parser.add_argument("--require", action="append", help="file under the dataset root that must exist (repeat)")
    parser.add_argument("--secret-env", action="append", metavar="NAME",
                        help="NAME of a secret env var to pass (value read from your environment)")
    parser.add_argument("--secret", action="append", help=argparse.SUPPRESS)  # deprecated spelling of --secret-env
    parser.add_argument("--spec-file", action="append", metavar="[NAME=]PATH",
                        help="local file uploaded to <job_dir>/specs/NAME (repeat); the command names it {specs}/NAME")
    parser.add_argument("--no-requeue", action="store_true")
    parser.add_argument("--max-attempts", type=int, metavar="N",
                        help="wall-time chain: at the wall time the job resubmits itself (same record) and resumes "
                             "from its latest checkpoint, up to N allocations in all")
    parser.add_argument("--max-total-time", metavar="DURATION",
                        help="wall-time chain: run time over every attempt (24h, 90m, 2d, or minutes)")
    parser.add_argument("--walltime-margin", type=int, metavar="SECONDS", dest="walltime_margin_seconds",
                        help="wall-time chain: USR1 this long before the wall time (default: versions.yaml "
                             "slurm.defaults.walltime_margin_seconds)")
    parser.add_argument("--prefetch", action="append", metavar="SOURCE=DEST",
                        help="small input fetched by a CPU-only job before training (repeat): s3://bucket/key, "
                             "hf://org/repo[/file][@rev] or ngc://org/[team/]model:version into <job_dir>/prefetch/"
                             "DEST; the command names it {prefetch}/DEST (see references/prefetch.md)")
    parser.add_argument("--prefetch-max-bytes", type=int, metavar="N",
                        help="cap on all prefetches of the job (default versions.yaml slurm.uploads.max_prefetch_bytes)")


def spec_from_args(args: argparse.Namespace) -> dict:
    """Merge --spec with the flags (flags win), then validate against the schema."""
    from . import spec as specmod

    spec = specmod.load_file(args.spec) if args.spec else {}  # its spec_files are relative to it
    for item in args.spec_file or []:
        name, sep, path = item.partition("=")
        if not sep:
            name, path = os.path.basename(os.path.normpath(item)), item
        # absolute now: the saved spec must name this file wherever `continue` runs from (slurm.continued)
        spec["spec_files"] = {**(spec.get("spec_files") or {}), name: os.path.abspath(os.path.expanduser(path))}
    own = {
        "num_gpus": args.num_gpus, "max_num_gpus_per_node": args.max_gpus_per_node, "time_hours": args.time_hours,
        "time_minutes": args.time_minutes, "time": args.time, "timeout_hours": args.timeout_hours,
        "partition": args.partition, "account": args.account, "container_runtime": args.runtime,
        "results_base": args.results_base, "cluster_name": args.cluster_name,
        "max_attempts": args.max_attempts, "max_total_time": args.max_total_time,
        "walltime_margin_seconds": args.walltime_margin_seconds,
    }
    if any(own[k] is not None for k in ("time_hours", "time_minutes", "time")):
        for key in ("time_hours", "time_minutes", "time"):  # a wall time flag replaces the spec's
            spec.pop(key, None)
    spec.update({k: v for k, v in own.items() if v is not None})
    jobflags.apply(spec, args, "slurm")
    if args.no_requeue:
        spec["use_requeue"] = False
    for item in args.prefetch or []:
        from .prefetch import parse_item

        dest, source = parse_item(item)
        spec["prefetch"] = {**(spec.get("prefetch") or {}), dest: source}
    if args.prefetch_max_bytes is not None:
        spec["prefetch_max_bytes"] = args.prefetch_max_bytes
    if args.dataset_root or args.require:
        ds = dict(spec.get("dataset") or {})
        if args.dataset_root:
            ds["root"] = args.dataset_root
        if args.require:
            ds["required"] = list(ds.get("required") or []) + args.require
        spec["dataset"] = ds
    jobflags.apply_secrets_and_argv(spec, args)
    return specmod.validate(spec)
