"""The Kubernetes job spec: its type, its submit flags as data and how flags make a spec, and the last step of
every spec the bank makes (flags, the NCCL probe): the cluster's NCCL settings, then the schema."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from ... import envfile
from ...jobspec import Flag, JobSpec, Shared, merge, put
from ...errors import TaoError, UsageError


@dataclass
class KubernetesSpec(JobSpec):
    """A Kubernetes job (schemas/k8s-job-spec.schema.json): pods of one indexed Job on volumes or S3."""

    SCHEMA: ClassVar[str] = "k8s-job-spec.schema.json"
    SPELLING: ClassVar[Mapping[str, str | None]] = {"cpus": "cpu", "workdir": "working_dir", "secrets": None}
    KUBELET_EXPANDS: ClassVar[bool] = True

    args: list[str] | None = None
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    check_inputs: bool | None = None
    image_pull_secret: str | None = None
    log_copy: bool | None = None
    memory_limit: str | None = None
    mounts: list[dict[str, Any]] | None = None
    no_results: bool | None = None
    results_exact: bool | None = None
    storage_tier: str | None = None
    staging_dir: str | None = None
    s3_inputs: list[dict[str, Any]] | None = None
    s3_outputs: list[dict[str, Any]] | None = None
    node_selector: dict[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = None
    one_pod_per_node: bool | None = None
    pod_annotations: dict[str, str] | None = None
    pod_labels: dict[str, str] | None = None
    queue: str | None = None


def finish(spec: dict) -> dict:
    """``spec`` with TAO_K8S_NCCL_ENV's per-cluster NCCL settings under it, checked against the schema."""
    from ... import spec as specmod

    nccl_file = os.environ.get("TAO_K8S_NCCL_ENV")
    if nccl_file:  # per-cluster NCCL settings (KEY=VALUE lines); flags and spec win
        spec["nccl_env"] = {**envfile.read(nccl_file, what="TAO_K8S_NCCL_ENV file"), **(spec.get("nccl_env") or {})}
    specmod.validate(spec, "k8s-job-spec.schema.json", "job spec")
    return spec


# ------------------------------------------------------------ the submit flags
# Kubernetes' submit flags as data (PVC mounts, node selectors, TTL ...) and where each value goes in
# its job spec. The command line builds the grammar from :data:`FLAGS` (tao_k8s.py submit, render_k8s_job.py).
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
_OWN = {key: key for key in _OWN_KEYS}
#: the KEY=VALUE flags merged over the spec's own mappings (the flags win per key)
_MERGED = {"env": "env", "nccl_env": "nccl_env", "node_selector": "node_selector", "pod_annotation": "pod_annotations"}


def spec_from_flags(path: str | None, values: Mapping[str, Any]) -> dict:
    """The spec file at ``path`` (if any) with the given flag values over it (flags win), then validated."""
    from ... import fsio, spec as specmod

    spec: dict = specmod.load_file(path) if path else {}
    put(spec, values, SHARED_KEYS)
    merge(spec, values, _MERGED)
    put(spec, values, _OWN)
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
    for item in values.get("pvc_mount") or []:
        claim, sep, mount = item.partition(":")
        if not sep:
            raise UsageError(f"--pvc-mount {item!r} must look like CLAIM:/mount/path")
        spec.setdefault("mounts", []).append({"pvc": claim, "mount_path": mount})
    return finish(spec)
