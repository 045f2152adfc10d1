"""Infrastructure-failure log patterns: real-world lines match, program errors do not."""
from __future__ import annotations

import subprocess

import pytest

from taobank import failures

INFRA = [
    ("[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "xid"),
    ("GPU 0000:3b:00.0: GPU has fallen off the bus.", "gpu_fell_off_bus"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "ecc"),
    ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable", "cuda_device_unavailable"),
    ("Failed to initialize NVML: Driver/library version mismatch", "cuda_device_unavailable"),
    ("node1:123:456 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<45678> with error 12",
     "nccl_transport"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error", "nccl_transport"),
    ("node2:1:2 [3] NCCL WARN socketProgress: Connection reset by peer", "nccl_transport"),
    ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 ms",
     "nccl_timeout"),
    ("torch.distributed.DistStoreError: TCPStore recvValue failed: Connection reset by peer", "rendezvous_connection"),
    ("tao: rank 0's name job-0.job did not resolve within 300 s on node rank 1 of 2: the job stops rather than train "
     "on one node (check the job's headless Service and the cluster DNS)", "rank0_name"),
    ("slurmstepd: error: *** JOB 4242 ON node7 CANCELLED AT 2026-01-01T00:00:00 DUE TO NODE FAILURE ***", "node_failure"),
    ("slurmstepd: error: *** JOB 4242 ON node7 CANCELLED AT 2026-01-01T00:00:00 DUE TO PREEMPTION ***", "preemption"),
    ("OSError: [Errno 116] Stale file handle", "stale_filesystem"),
]

PROGRAM = [
    # the same job fails the same way on another node: program errors, never retried
    "RuntimeError: DataLoader worker (pid 99) is killed by signal: Bus error. It is possible that dataloader's workers "
    "are out of shared memory. ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
    "shared memory (shm).",
    "OSError: [Errno 28] No space left on device: '/results/ckpt.pth'",
    "OSError: [Errno 122] Disk quota exceeded",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "KeyError: 'dataset'",
    "FileNotFoundError: [Errno 2] No such file or directory: '/data/train.json'",
    "Killed",
    "ValueError: invalid network_arch",
    "Epoch 3/10 loss=0.12 tokens=5",
    "",
]


@pytest.mark.parametrize("line,name", INFRA)
def test_infra_lines_match(line, name):
    log = f"Epoch 1 ok\n{line}\nTraceback (most recent call last):\n"
    assert failures.infra_log_match(log) == name
    assert name in failures.infra_log_matches(log)


@pytest.mark.parametrize("line", PROGRAM)
def test_program_lines_do_not_match(line):
    assert failures.infra_log_match(line) is None
    assert failures.infra_log_matches(line) == []


def test_patterns_are_data_with_unique_names():
    names = [p.name for p in failures.PATTERNS]
    assert len(names) == len(set(names))
    for p in failures.PATTERNS:
        assert failures.why(p.name) == p.why
    covered = {name for _, name in INFRA}
    assert covered == set(names), "every pattern has a planted positive"


def test_the_pcre_form_grep_runs_on_the_cluster_agrees_with_python():
    for line, _ in INFRA:
        assert subprocess.run(["grep", "-qP", "--", failures.pcre()], input=f"ok\n{line}\n", text=True).returncode == 0, line
    for line in PROGRAM:
        assert subprocess.run(["grep", "-qP", "--", failures.pcre()], input=f"{line}\n", text=True).returncode == 1, line
