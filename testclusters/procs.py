"""Process plumbing for the local clusters (Kubernetes and SLURM): pid files, ports, readiness.

Daemons are found and stopped ONLY through the pid files they (or we) wrote,
and a pid is trusted only while ``/proc/<pid>/exe`` is still the expected
program: a pid file left by a session that died is "stale", never a target.
Nothing here looks processes up by name.
"""
from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Callable

from taobank.errors import TaoError


def read_pid(pidfile: Path) -> int | None:
    """The pid in ``pidfile``, or None when the file is missing/empty/garbage."""
    try:
        text = pidfile.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def pid_runs(pid: int, exe: str) -> bool:
    """True while ``pid`` is alive AND is the program ``exe`` (not a recycled pid)."""
    try:
        target = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    target = target.removesuffix(" (deleted)")
    if os.path.realpath(target) == os.path.realpath(exe):
        return alive(pid)
    return False


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (this sandbox's init may never reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def live_pid(pidfile: Path, exe: str) -> int | None:
    """The running pid recorded in ``pidfile``; a stale pid file is removed."""
    pid = read_pid(pidfile)
    if pid is not None and pid_runs(pid, exe):
        return pid
    if pidfile.exists():
        try:
            pidfile.unlink()
        except OSError:
            pass
    return None


def stop_pid(pid: int, exe: str, *, grace: float = 10.0) -> str:
    """SIGTERM ``pid`` (only if it still is ``exe``), SIGKILL after ``grace`` s."""
    if not pid_runs(pid, exe):
        return "not running"
    os.kill(pid, signal.SIGTERM)
    if wait_for(lambda: not pid_runs(pid, exe), grace):
        return "stopped"
    if pid_runs(pid, exe):
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not pid_runs(pid, exe), 5.0)
    return "killed"


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_refuses(port: int, host: str) -> bool:
    """True when host:port actively refuses (ECONNREFUSED), as a dead login node does."""
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Poll ``check`` until it returns True or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return True
        except (OSError, TaoError):
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def log_tail(path: Path) -> str:
    """The last non-empty line of a log file (for one-line errors)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4096))
            lines = [ln.strip() for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log yet)"
    return lines[-1][:200] if lines else "(log empty)"


def not_ready(daemon: str, timeout: float, log: Path) -> TaoError:
    """The one-line error ``up`` raises when a daemon does not come up."""
    return TaoError(
        f"{daemon} did not come up within {timeout:.0f}s: see {log} (last line: {log_tail(log)}); "
        "fix it, then rerun `local_cluster.py up slurm` (or `down slurm` first)"
    )


def children(pid: int, exe: str) -> list[int]:
    """Direct children of ``pid`` that run ``exe`` (an sshd listener's login sessions)."""
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[-1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and pid_runs(int(entry.name), exe):
            kids.append(int(entry.name))
    return kids


class FileLock:
    """An exclusive flock on ``path`` so two ``up``/``down`` calls never interleave."""

    def __init__(self, path: Path, what: str, timeout: float = 600.0) -> None:
        self.path, self.what, self.timeout = path, what, timeout
        self.fd: int | None = None

    def __enter__(self) -> "FileLock":
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)

        def take() -> bool:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                return False

        if not wait_for(take, self.timeout, interval=0.5):
            os.close(self.fd)
            raise TaoError(f"another {self.what} still holds {self.path} after {self.timeout:.0f}s: wait for it and retry")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock
            self.fd = None
