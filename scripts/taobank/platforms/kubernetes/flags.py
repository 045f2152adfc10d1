"""Kubernetes' submit flags as data (PVC mounts, node selectors, TTL ...) and where each value goes in
its job spec. The command line builds the grammar from :data:`FLAGS` (tao_k8s.py submit, render_k8s_job.py)."""
from __future__ import annotations

from typing import Any, Mapping

from ...errors import TaoError, UsageError
from .spec import KubernetesSpec
from ...flags import Flag, Shared, merge, put

SHARED = Shared(aliases={"cpus": ("--cpu",)},
                help={"cpus": "CPUs per pod: 4, 0.5 or 500m", "memory": "memory per pod: a quantity such as 16Gi"})

FLAGS = (
    Flag(("--command",), exclusive="command", help="shell text, run as /bin/sh -c (never bash)"),
    Flag(("--args-json",), exclusive="command", help="native container argv as a JSON list (no shell)"),
    Flag(("--results-dir",), help="parent of the job's folder <dir>/<job id>: under a --pvc-mount, or "
         "s3://bucket/prefix (tier C); default: the first writable mount"),
    Flag(("--results-exact",), kind="on", exclusive="results",
         help="--results-dir is the job's folder itself (no <job id> folder)"),
    Flag(("--no-results",), kind="on", exclusive="results",
         help="keep no results (probes, lifecycle checks): only the logs survive"),
    Flag(("--storage-tier",), choices=("A", "C")),
    Flag(("--pvc-mount",), kind="list", metavar="CLAIM:/path", help="tier A PVC mount (repeatable)"),
    Flag(("--node-selector",), kind="pairs", metavar="KEY=VALUE"),
    Flag(("--pod-annotation",), kind="pairs", metavar="KEY=VALUE"),
    Flag(("--ttl",), dest="ttl_seconds_after_finished", type=int, help="ttlSecondsAfterFinished"),
    Flag(("--time-hours",), type=float, exclusive="time", metavar="H",
         help="the job's time limit in hours (activeDeadlineSeconds; continue gives more)"),
    Flag(("--time-minutes",), type=float, exclusive="time", metavar="M", help="the time limit in minutes"),
    Flag(("--active-deadline",), dest="active_deadline_seconds", type=int, exclusive="time", metavar="SECONDS",
         help="the time limit in seconds (activeDeadlineSeconds)"),
    Flag(("--image-pull-secret",), help="name of a pull secret already in the namespace"),
    Flag(("--queue",), help="Kueue LocalQueue of the namespace to submit to (default: its LocalQueue named "
         "'default', if any); tao_k8s.py preflight lists them"),
    Flag(("--no-input-check",), dest="check_inputs", kind="off",
         help="skip the GPU-less pod that checks the job's input paths before submit"),
)

#: the shared flags' values -> this platform's spec keys (GPUs are counted per pod)
SHARED_KEYS = KubernetesSpec.flag_keys()
_OWN_KEYS = ("command", "results_dir", "storage_tier", "ttl_seconds_after_finished", "active_deadline_seconds",
             "image_pull_secret", "results_exact", "no_results", "check_inputs", "queue")


def spec_from_flags(path: str | None, values: Mapping[str, Any]) -> dict:
    """The spec file at ``path`` (if any) with the given flag values over it (flags win), then validated."""
    from ... import fsio, spec as specmod
    from .spec import finish

    spec: dict = specmod.load_file(path) if path else {}
    put(spec, values, SHARED_KEYS)
    merge(spec, values, {"env": "env", "nccl_env": "nccl_env"})
    put(spec, values, {key: key for key in _OWN_KEYS})
    for unit, seconds in (("time_hours", 3600), ("time_minutes", 60)):
        if values.get(unit) is not None:
            if not 0 < values[unit] < 1e7:
                raise UsageError(f"--{unit.replace('_', '-')} must be a positive number")
            spec["active_deadline_seconds"] = max(1, round(values[unit] * seconds))
    if values.get("command") is not None:
        spec.pop("args", None)
    if values.get("args_json") is not None:
        try:
            argv = fsio.json_value(values["args_json"], "--args-json")
        except TaoError:
            raise UsageError("--args-json must be a JSON list of strings") from None
        spec["args"] = argv
        spec.pop("command", None)
    merge(spec, values, {"node_selector": "node_selector", "pod_annotation": "pod_annotations"})
    for item in values.get("pvc_mount") or []:
        claim, sep, mount = item.partition(":")
        if not sep:
            raise UsageError(f"--pvc-mount {item!r} must look like CLAIM:/mount/path")
        spec.setdefault("mounts", []).append({"pvc": claim, "mount_path": mount})
    return finish(spec)
