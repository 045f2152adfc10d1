"""The cluster's daemons as processes: which there are, free ports for them, start
detached, wait until ready (or name the log of one that died), stop by pid file (test infrastructure)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess

from taobank.errors import TaoError
from ..procs import live_pid, log_tail, pid_runs, stop_pid, wait_for
from .cluster_state import _load_cluster, _log, _pidfile
from .realnodes import REAL_NODES

DAEMONS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
START_TIMEOUT_S = {"etcd": 60, "kube-apiserver": 180, "kube-controller-manager": 90,
                   "kube-scheduler": 90, "kwok": 90}
DEFAULT_START_TIMEOUT_S = 90


def node_daemons() -> tuple[str, ...]:
    """Daemons of the real nodes, in start order."""
    return (("registry", "coredns", "s3") + tuple(f"containerd-{n}" for n in REAL_NODES)
            + tuple(f"kubelet-{n}" for n in REAL_NODES))


def all_daemons() -> tuple[str, ...]:
    return DAEMONS + node_daemons()


def _free_ports_on(host: str, n: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _free_ports(n: int) -> list[int]:
    return _free_ports_on("127.0.0.1", n)


def _spawn(name: str, argv: list[str]) -> None:
    """Start a daemon detached from this process (own session), log to logs/<name>.log, record its pid."""
    with open(_log(name), "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    _pidfile(name).write_text(f"{proc.pid}\n", encoding="utf-8")


def _wait(name: str, check, what: str | None = None) -> None:
    timeout = START_TIMEOUT_S.get(name, DEFAULT_START_TIMEOUT_S)
    exe = _load_cluster().get("exes", {}).get(name, "")

    def alive_and_ok() -> bool:
        if not pid_runs(int(_pidfile(name).read_text().strip() or 0), exe):
            raise _Died()
        return check()

    try:
        ok = wait_for(alive_and_ok, timeout, interval=0.25)
    except _Died:
        raise TaoError(f"{name} exited during start-up: see {_log(name)} (last line: {log_tail(_log(name))})") from None
    if not ok:
        goal = f" ({what})" if what else ""
        raise TaoError(f"{name} did not come up within {timeout}s{goal}: see {_log(name)} "
                       f"(last line: {log_tail(_log(name))})")


class _Died(Exception):
    pass


def _stop_daemon(name: str, exe: str | None, grace: float = 15.0) -> None:
    pidfile = _pidfile(name)
    pid = live_pid(pidfile, exe) if exe else None
    if pid:
        stop_pid(pid, exe, grace=grace)
    pidfile.unlink(missing_ok=True)


def _which(program: str) -> str:
    found = shutil.which(program)
    if not found:
        raise TaoError(f"{program} not found: apt-get install containerd runc containernetworking-plugins "
                       "docker-registry umoci skopeo busybox-static apache2-utils")
    return os.path.realpath(found)


def status_daemons_alive(data: dict, names: list[str]) -> bool:
    exes = data.get("exes", {})
    return all(name in exes and live_pid(_pidfile(name), exes[name]) for name in names)
