"""The last step of every Kubernetes job spec the bank makes (flags, the NCCL probe): the cluster's NCCL
settings, then the schema."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from ... import envfile
from ...jobspec import JobSpec


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
