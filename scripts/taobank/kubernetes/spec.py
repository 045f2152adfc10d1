"""The last step of every Kubernetes job spec the bank makes (flags, the NCCL probe): the cluster's NCCL
settings, then the schema."""
from __future__ import annotations

import os

from .. import envfile


def finish(spec: dict) -> dict:
    """``spec`` with TAO_K8S_NCCL_ENV's per-cluster NCCL settings under it, checked against the schema."""
    from .. import spec as specmod

    nccl_file = os.environ.get("TAO_K8S_NCCL_ENV")
    if nccl_file:  # per-cluster NCCL settings (KEY=VALUE lines); flags and spec win
        spec["nccl_env"] = {**envfile.read(nccl_file, what="TAO_K8S_NCCL_ENV file"), **(spec.get("nccl_env") or {})}
    specmod.validate(spec, "k8s-job-spec.schema.json", "job spec")
    return spec
