"""Log lines that mean the infrastructure failed, not the training program.

Used by the SLURM retry logic (retry only ERR_INFRA) and the Kubernetes error
explanation. Only signatures that a rerun on healthy hardware can fix belong
here. Deliberately absent, because the program usually causes them and a
retry would fail the same way: ``CUDA out of memory``, ``an illegal memory
access``, Python tracebacks, ``Killed``/OOM kills of the host (the Kubernetes
status mapping classifies a pod's ``OOMKilled`` reason itself), an exhausted
``/dev/shm`` (too many loader workers for the shm size) and a full disk or
quota (the same results folder is full on the next node too).
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class InfraPattern:
    name: str
    regex: str
    why: str


#: First match wins: most specific first.
PATTERNS: tuple[InfraPattern, ...] = (
    InfraPattern("xid", r"NVRM: Xid\b|\bXid \(PCI:", "NVIDIA driver reported an Xid (GPU hardware/driver fault)"),
    InfraPattern("gpu_fell_off_bus", r"fallen off the bus", "GPU disappeared from the PCIe bus"),
    InfraPattern("ecc", r"uncorrectable ECC error|double[- ]bit ECC|ECC error(?:s)? detected",
                 "uncorrectable GPU memory (ECC) error"),
    InfraPattern("cuda_device_unavailable",
                 r"CUDA-capable devices? (?:\(s\) )?(?:is|are) busy or unavailable|no CUDA-capable device is detected"
                 r"|CUDA driver version is insufficient|NVML: Driver/library version mismatch",
                 "GPU or driver not usable on this node"),
    InfraPattern("nccl_transport",
                 r"NCCL WARN NET/(?:IB|Socket|OFI)|NCCL WARN .*(?:Connection closed by remote peer|Connection reset by peer)"
                 r"|unhandled system error|ncclSystemError|ncclRemoteError"
                 r"|remote process exited or there was a network error|NET/IB ?: Got completion from peer .* with error",
                 "NCCL network transport failure (InfiniBand/RoCE/socket)"),
    InfraPattern("nccl_timeout",
                 r"Watchdog caught collective operation timeout|NCCL communicator was aborted"
                 r"|ProcessGroupNCCL[^\n]*Timeout|NCCL timeout",
                 "collective timed out: a peer or the network stalled"),
    InfraPattern("rank0_name", r"tao: rank 0's name \S+ did not resolve within",
                 "rank 0's name never resolved (the job's headless Service or the cluster DNS; taobank.multinode)"),
    InfraPattern("rendezvous_connection",
                 r"(?:c10d|TCPStore|gloo|torch\.distributed)[^\n]{0,200}(?:Connection reset by peer|Connection refused|Broken pipe)",
                 "lost the rendezvous/peer connection"),
    InfraPattern("node_failure", r"DUE TO NODE FAILURE|Node failure on|NODE_FAIL", "SLURM lost a node"),
    InfraPattern("preemption", r"DUE TO PREEMPTION|\bPREEMPTED\b", "job was preempted"),
    InfraPattern("stale_filesystem", r"Stale file handle|Transport endpoint is not connected",
                 "shared filesystem mount failed (NFS/Lustre)"),
)

#: Failures SLURM requeues itself under ``--requeue`` (same job id): a job's own retry must leave them alone.
REQUEUED_BY_SLURM: frozenset[str] = frozenset({"node_failure", "preemption"})


def pcre(exclude: frozenset[str] | set[str] = frozenset()) -> str:
    """The patterns (less ``exclude``) as one PCRE alternation (``grep -P``), for checks that run on the cluster."""
    return "|".join(f"(?:{p.regex})" for p in PATTERNS if p.name not in exclude)


_COMPILED = tuple((p.name, re.compile(p.regex)) for p in PATTERNS)


def infra_log_match(text: str) -> str | None:
    """Name of the first infrastructure-failure pattern found in ``text``, else None."""
    if not text:
        return None
    for name, rx in _COMPILED:
        if rx.search(text):
            return name
    return None


def infra_log_matches(text: str) -> list[str]:
    """Names of every infrastructure-failure pattern found in ``text``."""
    return [name for name, rx in _COMPILED if text and rx.search(text)]


def why(name: str) -> str:
    """The one-line explanation of a pattern name."""
    for p in PATTERNS:
        if p.name == name:
            return p.why
    raise KeyError(name)
