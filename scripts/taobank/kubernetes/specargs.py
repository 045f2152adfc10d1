"""Command-line flags that describe a Kubernetes job spec (render_k8s_job.py and tao_k8s.py submit).

The flags every platform shares come from :mod:`taobank.jobflags`; the ones
here are Kubernetes' own (PVC mounts, node selectors, TTL ...).
"""
from __future__ import annotations

import argparse
import os

from .. import envfile, jobflags
from ..cli import parse_kv
from ..errors import UsageError


def spec_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by render_k8s_job.py and tao_k8s.py submit."""
    jobflags.add_arguments(parser, "kubernetes")
    cmd = parser.add_mutually_exclusive_group()
    cmd.add_argument("--command", help="shell text, run as /bin/sh -c (never bash)")
    cmd.add_argument("--args-json", help="native container argv as a JSON list (no shell)")
    parser.add_argument("--results-dir", help="parent of the job's folder <dir>/<job id>: under a --pvc-mount, or "
                        "s3://bucket/prefix (tier C); default: the first writable mount")
    results = parser.add_mutually_exclusive_group()
    results.add_argument("--results-exact", action="store_true", default=None,
                         help="--results-dir is the job's folder itself (no <job id> folder)")
    results.add_argument("--no-results", action="store_true", default=None,
                         help="keep no results (probes, lifecycle checks): only the logs survive")
    parser.add_argument("--storage-tier", choices=["A", "C"])
    parser.add_argument("--pvc-mount", action="append", metavar="CLAIM:/path", help="tier A PVC mount (repeatable)")
    parser.add_argument("--node-selector", action="append", metavar="KEY=VALUE")
    parser.add_argument("--pod-annotation", action="append", metavar="KEY=VALUE")
    parser.add_argument("--ttl", type=int, dest="ttl_seconds_after_finished", help="ttlSecondsAfterFinished")
    parser.add_argument("--active-deadline", type=int, dest="active_deadline_seconds")
    parser.add_argument("--image-pull-secret", help="name of a pull secret already in the namespace")
    parser.add_argument("--no-input-check", action="store_false", default=None, dest="check_inputs",
                        help="skip the GPU-less pod that checks the job's input paths before submit")


def spec_from_args(args: argparse.Namespace) -> dict:
    """Merge --spec with flags, then validate against the schema."""
    from .. import safeparse, spec as specmod
    from ..errors import TaoError

    spec: dict = specmod.load_file(args.spec) if args.spec else {}
    jobflags.apply(spec, args, "kubernetes")
    for key in ("command", "results_dir", "storage_tier", "ttl_seconds_after_finished", "active_deadline_seconds",
                "image_pull_secret", "results_exact", "no_results", "check_inputs"):
        value = getattr(args, key, None)
        if value is not None:
            spec[key] = value
    if args.command is not None:
        spec.pop("args", None)
    if args.args_json is not None:
        try:
            argv = safeparse.json_value(args.args_json, "--args-json")
        except TaoError:
            raise UsageError("--args-json must be a JSON list of strings") from None
        spec["args"] = argv
        spec.pop("command", None)
    for flag, key in (("node_selector", "node_selector"), ("pod_annotation", "pod_annotations")):
        extra = parse_kv(getattr(args, flag), "--" + flag.replace("_", "-"))
        if extra:
            spec[key] = {**(spec.get(key) or {}), **extra}
    for item in args.pvc_mount or []:
        claim, sep, path = item.partition(":")
        if not sep:
            raise UsageError(f"--pvc-mount {item!r} must look like CLAIM:/mount/path")
        spec.setdefault("mounts", []).append({"pvc": claim, "mount_path": path})
    return finish(spec)


def finish(spec: dict) -> dict:
    """The last step of every Kubernetes spec made here: the cluster's NCCL settings, then the schema."""
    from .. import spec as specmod

    nccl_file = os.environ.get("TAO_K8S_NCCL_ENV")
    if nccl_file:  # per-cluster NCCL settings (KEY=VALUE lines); flags and spec win
        spec["nccl_env"] = {**envfile.read(nccl_file, what="TAO_K8S_NCCL_ENV file"), **(spec.get("nccl_env") or {})}
    specmod.validate(spec, "k8s-job-spec.schema.json", "job spec")
    return spec
