"""SLURM side of the NCCL probe: the cluster key, the probe's job spec and its submit.

The probe is an ordinary SLURM job through the core's submit (same render,
staging and record); the all-reduce script, verdict rule, wait and
per-cluster cache are :mod:`taobank.core.nccl_probe`'s. Infrastructure retries are
off for it: an NCCL failure is the verdict, not something to resubmit.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from ...core import nccl_probe as core
from ... import pins
from ...contract import SubmitOptions
from . import resources

ADVICE = ("give the cluster's NCCL variables (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, ...) with --nccl-env KEY=VALUE "
          "(and under nccl_env in your job specs) and re-probe: tao_slurm.py nccl-probe --force")


def _node_size(nodes: int, gpus: int) -> int:
    """The ``max_num_gpus_per_node`` that makes resources resolve to exactly ``nodes`` x ``gpus``: whole
    (exclusive) nodes from the packaged node size up, else a size no request reaches (shared nodes)."""
    whole = int(resources.defaults()["max_num_gpus_per_node"])
    return gpus if gpus >= whole else nodes * gpus + 1


def build_spec(*, nodes: int, gpus: int, image: str | None, timeout: int, partition: str | None = None,
               account: str | None = None, cpus: int = 2, nccl_env: Mapping[str, str] | None = None,
               runtime: str | None = None, cluster_name: str | None = None, backend: str = "nccl") -> dict:
    """The probe's job spec. gloo-cpu asks for no GPU: one process per node, memory enough for PyTorch."""
    core.check_request(nodes, gpus, backend)
    spec: dict[str, Any] = {
        "network_arch": "nccl-probe", "action": "probe", "image": image or pins.resolve("images.nccl_probe"),
        "num_nodes": nodes, "num_gpus": nodes * gpus, "max_num_gpus_per_node": _node_size(nodes, gpus),
        "cpus_per_task": cpus, "command": core.probe_command(timeout, backend, one_line=True),
        # the command's own timeout decides; the wall time only has to cover it and the start
        "time_minutes": math.ceil(timeout / 60) + 10, "timeout_hours": 0,
        "infra_retries": False, "nccl_env": dict(nccl_env or {}), "memory": str(pins.resolve("nccl_probe.slurm_mem")),
    }
    if backend == "gloo-cpu":
        spec.update(num_gpus=0, max_num_gpus_per_node=int(resources.defaults()["max_num_gpus_per_node"]))
    for key, value in (("partition", partition), ("account", account), ("container_runtime", runtime),
                       ("cluster_name", cluster_name)):
        if value:
            spec[key] = value
    return spec


def probe(*, nodes: int = 2, gpus: int = 1, image: str | None = None, timeout: int = 300, force: bool = False,
          interval: float = 5.0, max_wait: float | None = None, env: Mapping[str, str] | None = None,
          backend: str = "nccl", **spec_kw: Any) -> dict:
    """Run (or reuse) the probe; returns {"verdict", "cached", "cluster", "job_id", "message", ...}."""
    spec = build_spec(nodes=nodes, gpus=gpus, image=image, timeout=timeout, backend=backend, **spec_kw)
    return core.probe("slurm", resources.cluster_key(spec, env), spec, SubmitOptions(env=env, probe=True),
                      nodes=nodes, gpus=gpus, backend=backend, timeout=timeout, advice=ADVICE, force=force,
                      interval=interval, max_wait=max_wait)
