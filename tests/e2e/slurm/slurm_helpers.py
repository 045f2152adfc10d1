"""Helpers shared by the SLURM skill's e2e tests (not a test module)."""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from taobank.core import platform
from taobank import records

TERMINAL = ("COMPLETE", "ERROR", "CANCELED")


def status(ids: list[str], *, retry: bool = False, conn=None) -> list[dict]:
    """The core's status of SLURM ``ids`` (one sweep), as the records it left (``conn`` is not needed: the
    core opens one connection per status); the message and progress each view showed."""
    views = platform.refresh([platform.load_for(i, "slurm", "status") for i in ids], retry=retry)
    return [{**records.load(v.id), "message": v.message, **({"progress": v.progress} if v.progress else {})}
            for v in views]


def cancel(job_id: str) -> dict:
    """The core's cancel of one SLURM job, as the record it left (with the message its cancel line showed)."""
    views, errors = platform.cancel("slurm", [job_id])
    assert not errors, errors
    view = next(v for v in views if v.id == job_id)
    return {**records.load(job_id), "message": view.message}


def base_spec(**kw) -> dict:
    spec = {"network_arch": "dino", "action": "train", "num_gpus": 1, "max_num_gpus_per_node": 8,
            "cpus_per_task": 1, "time_hours": 0.5, "command": ["true"]}
    spec.update(kw)
    spec = {k: v for k, v in spec.items() if v is not None}
    return spec


def wait_state(job_id: str, states=TERMINAL, timeout: float = 120, conn=None) -> dict:
    """Poll the status verb until the record is in one of ``states``."""
    deadline = time.time() + timeout
    while True:
        recs = status([job_id], retry=False)
        rec = next(r for r in recs if r["id"] == job_id)
        if rec["state"] in states:
            return rec
        assert time.time() < deadline, f"{job_id} still {rec['state']} ({rec.get('message')}) after {timeout}s"
        time.sleep(1)


def probe_gloo_ok() -> dict:
    """The gloo-cpu probe between the local nodes (a real TCP all-reduce), so multi-node submits pass the gate
    with no --skip-nccl-probe; its verdict is cached in the test's own record store."""
    from taobank.platforms.slurm import nccl_probe

    out = nccl_probe.probe(backend="gloo-cpu", timeout=60, interval=1, cpus=1, runtime="none")
    assert out["verdict"] == "ok", out
    return out


def call_log(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class ArgvWatcher:
    """Scans every process's argv (/proc/*/cmdline) while a block runs: what
    ``ps`` would show any user on this host, remote sshd children included."""

    def __init__(self, needle: str) -> None:
        self.needle = needle.encode()
        self.hits: list[str] = []
        self.children: set[tuple[str, ...]] = set()  # argv of our own child processes
        self.scans = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        data = fh.read()
                except OSError:
                    continue
                if self.needle in data:
                    self.hits.append(data.replace(b"\0", b" ").decode(errors="replace"))
                try:
                    with open(f"/proc/{pid}/stat", "rb") as fh:
                        ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                if ppid == os.getpid() and data:
                    self.children.add(tuple(data.decode(errors="replace").split("\0")[:-1]))
            self.scans += 1

    def __enter__(self) -> "ArgvWatcher":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()
