"""A real SLURM cluster on one Debian 12 host, reached over a real sshd (test infrastructure).

``up`` installs the Debian packages if missing, then starts munged, MariaDB
(private datadir, 127.0.0.1), slurmdbd, slurmctld, two slurmd "nodes" with 8
fake GPUs each and an OpenSSH server on a loopback port with key-only login
for an unprivileged test user. It is idempotent: running daemons are kept,
dead ones (stale pid files) are restarted, and every step waits on a real
readiness probe with a timeout. ``down`` cancels jobs, stops each daemon by the
pid in its pid file (never by name) and removes the cluster's state.

Layout and config files: :mod:`testclusters.slurm_conf`; pid/port/readiness
plumbing: :mod:`testclusters.procs`.
"""
from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Callable

from taobank.errors import TaoError
from taobank.run import run
from . import apt, tao_lightning
from . import slurm_conf as conf
from .procs import FileLock, alive, children, live_pid, log_tail, not_ready, port_open, port_refuses, stop_pid, wait_for

#: awscli: the S3 client a submit's CPU-only prefetch job runs on a node (tao_slurm.py submit --prefetch);
#: python3-torch: PyTorch on CPU with gloo and torchrun, for nccl-probe --backend gloo-cpu between the nodes;
#: python3-venv: the nodes' Lightning venv over it (testclusters.tao_lightning).
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurmdbd", "munge", "mariadb-server", "openssh-server",
            "awscli", "python3-torch", "python3-venv")
#: package -> versions.yaml key its Debian version must start with
PINNED = {
    "slurmctld": "test_clusters.slurm.slurm",
    "munge": "test_clusters.slurm.munge",
    "mariadb-server": "test_clusters.slurm.mariadb",
    "openssh-server": "test_clusters.slurm.openssh",
    "awscli": "test_clusters.slurm.awscli",
    "python3-torch": "test_clusters.slurm.torch",
}
MUNGE_PIDFILE = Path("/run/munge/munged.pid")
HOSTS_MARK = "# tao-local-slurm"
LUSTRE_MARK = ".tao-local-lustre"
CGROUP_CONTROLLERS = ("freezer", "memory", "devices", "cpuset")

EXE = {
    "munged": "/usr/sbin/munged",
    "mariadbd": "/usr/sbin/mariadbd",
    "slurmdbd": "/usr/sbin/slurmdbd",
    "slurmctld": "/usr/sbin/slurmctld",
    "slurmd": "/usr/sbin/slurmd",
    "sshd": "/usr/sbin/sshd",
}


def layout() -> conf.Layout:
    return conf.Layout(state=conf.default_state_dir())


def env() -> dict[str, str]:
    """The exports a skill user sets for this cluster (valid once ``up`` ran)."""
    return _env(layout())


def _env(lay: conf.Layout) -> dict[str, str]:
    """conf's exports plus the folder of the TAO stand-in's launchers on the nodes (``$DIR/dino train ...``)."""
    return {**conf.env(lay), "TAO_LOCAL_SLURM_STANDIN_DIR": str(lightning_dir(lay) / "tao-standin")}


def lightning_dir(lay: conf.Layout | None = None) -> Path:
    """The Lightning venv of the nodes (testclusters.tao_lightning): in the daemons' tree, readable by the jobs'
    test user (a home directory is not)."""
    return (lay or layout()).root / "python" / f"lightning-{tao_lightning.key()}"


def tao_standin(network: str = "dino") -> Path:
    """The TAO stand-in's ``<network>`` command on the nodes (``dino train key=value ...``, real Lightning DDP)."""
    return lightning_dir() / "tao-standin" / network


def _ensure_lightning(lay: conf.Layout) -> float:
    """The venv (built once per pin set from cached wheels; ``down`` removes it with the tree) and the
    stand-in's files (refreshed every ``up``); returns seconds spent."""
    t0 = time.monotonic()
    python = tao_lightning.ensure_venv(lightning_dir(lay).parent)
    tao_lightning.install_standin(lightning_dir(lay) / "tao-standin", str(python))
    return time.monotonic() - t0


# ---------------------------------------------------------------------------- helpers
def _slurm_env(lay: conf.Layout) -> dict[str, str]:
    return {"SLURM_CONF": str(lay.slurm_conf)}


def _pidfiles(lay: conf.Layout) -> dict[str, tuple[Path, str]]:
    """daemon label -> (pid file, executable), in start order."""
    files = {
        "munged": (MUNGE_PIDFILE, EXE["munged"]),
        "mariadbd": (lay.mysql_run / "mysqld.pid", EXE["mariadbd"]),
        "slurmdbd": (lay.run / "slurmdbd.pid", EXE["slurmdbd"]),
        "slurmctld": (lay.run / "slurmctld.pid", EXE["slurmctld"]),
    }
    for node in conf.NODES:
        files[f"slurmd-{node}"] = (lay.run / f"slurmd-{node}.pid", EXE["slurmd"])
    files["sshd"] = (lay.run / "sshd.pid", EXE["sshd"])
    return files


def _logs(lay: conf.Layout) -> dict[str, Path]:
    logs = {
        "munged": lay.root / "munge" / "munged.log",
        "mariadbd": lay.mysql_run / "mysqld.err",
        "slurmdbd": lay.log / "slurmdbd.log",
        "slurmctld": lay.log / "slurmctld.log",
        "sshd": lay.log / "sshd.log",
    }
    for node in conf.NODES:
        logs[f"slurmd-{node}"] = lay.log / f"slurmd-{node}.log"
    return logs


def _ports(lay: conf.Layout) -> dict[str, int]:
    p = lay.ports
    ports = {"mariadbd": p.mariadb, "slurmdbd": p.slurmdbd, "slurmctld": p.slurmctld, "sshd": p.ssh}
    for node, port in zip(conf.NODES, p.slurmd):
        ports[f"slurmd-{node}"] = port
    return ports


def _ids(name: str) -> tuple[int, int]:
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise TaoError(f"system user {name!r} is missing: reinstall the SLURM packages (apt-get install --reinstall)") from None
    return pw.pw_uid, pw.pw_gid


def _mkdir(path: Path, owner: str = "root", mode: int = 0o755) -> None:
    path.mkdir(parents=True, exist_ok=True)
    uid, gid = _ids(owner)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def _write(path: Path, text: str, owner: str = "root", mode: int = 0o644) -> bool:
    """Write ``text`` if it differs; return True when the file changed."""
    old = path.read_text() if path.exists() else None
    if old != text:
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    uid, gid = _ids(owner)
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    return old != text


def _cluster_file(lay: conf.Layout) -> Path:
    return lay.state / "cluster.json"


def _load_cluster(lay: conf.Layout) -> dict:
    try:
        return json.loads(_cluster_file(lay).read_text())
    except (OSError, ValueError):
        return {}


def _save_cluster(lay: conf.Layout, data: dict) -> None:
    lay.state.mkdir(parents=True, exist_ok=True)
    _write(_cluster_file(lay), json.dumps(data, indent=2, sort_keys=True) + "\n", mode=0o600)


# ---------------------------------------------------------------------------- install
def _ensure_packages() -> float:
    """apt-get install what is missing (no service may auto-start); return seconds spent."""
    if os.geteuid() != 0:
        raise TaoError("the local SLURM cluster needs root (packages, users, daemons): run it as root")
    found, spent = apt.ensure(PACKAGES, "SLURM cluster")
    apt.check_pins(found, PINNED)
    return spent


def _shadow_password(user: str) -> str | None:
    try:
        for line in Path("/etc/shadow").read_text().splitlines():
            fields = line.split(":")
            if fields[0] == user and len(fields) > 1:
                return fields[1]
    except OSError:
        pass
    return None


def _ensure_accounts(lay: conf.Layout) -> None:
    for name in ("slurm", "munge", "mysql"):
        _ids(name)
    try:
        pwd.getpwnam(lay.user)
    except KeyError:
        run(["useradd", "-m", "-s", "/bin/bash", lay.user], timeout=30)
    # useradd leaves the password '!' (locked): sshd with UsePAM=no then refuses even keys.
    if _shadow_password(lay.user) != "*":
        run(["usermod", "-p", "*", lay.user], timeout=30)
    key = Path("/etc/munge/munge.key")
    if not key.exists() or key.stat().st_size == 0:
        run(["mungekey", "--create", f"--keyfile={key}"], timeout=30)
    uid, gid = _ids("munge")
    os.chown(key, uid, gid)
    os.chmod(key, 0o600)


# ---------------------------------------------------------------------------- config tree
def _cgroup_v1_writable() -> bool:
    """True when the cgroup v1 controllers Slurm's cgroup/v1 plugin needs are mounted and writable."""
    mounts = Path("/proc/mounts").read_text().splitlines()
    for ctrl in CGROUP_CONTROLLERS:
        base = Path("/sys/fs/cgroup") / ctrl
        if not any(f" {base} cgroup " in f" {m} " and ctrl in m.split()[3].split(",") for m in mounts):
            return False
        probe = base / f"tao_probe_{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError:
            return False
    return True


def _use_cgroup(lay: conf.Layout, running: bool) -> bool:
    """cgroup v1 enforcement when possible. A running cluster keeps the mode it
    was started with; TAO_LOCAL_SLURM_CGROUP=none forces the linuxproc fallback
    (what a cgroup-v2-only host gets) so it can be tested on this machine."""
    mode = os.environ.get("TAO_LOCAL_SLURM_CGROUP", "")
    if mode not in ("", "auto", "none"):
        raise TaoError(f"TAO_LOCAL_SLURM_CGROUP={mode!r} is not auto or none: fix it")
    if not mode and running and lay.slurm_conf.exists():
        return "ProctrackType=proctrack/cgroup\n" in lay.slurm_conf.read_text()
    return mode != "none" and _cgroup_v1_writable()


def _no_in_addr_any() -> bool:
    """Bind daemons to loopback only when the hostname resolves to 127.x."""
    import socket

    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return False
    return bool(infos) and all(i[4][0].startswith("127.") for i in infos)


def _ensure_hosts() -> None:
    """node1/node2 resolve to 127.0.0.1 so a MASTER_ADDR rendezvous on NodeHostname works."""
    hosts = Path("/etc/hosts")
    text = hosts.read_text() if hosts.exists() else ""
    if HOSTS_MARK in text:
        return
    with open(hosts, "a") as fh:  # in place: /etc/hosts may be a bind mount
        fh.write(("" if text.endswith("\n") or not text else "\n") + f"127.0.0.1 {' '.join(conf.NODES)} {HOSTS_MARK}\n")


def _remove_hosts() -> None:
    hosts = Path("/etc/hosts")
    try:
        text = hosts.read_text()
    except OSError:
        return
    if HOSTS_MARK in text:
        kept = "".join(ln for ln in text.splitlines(keepends=True) if HOSTS_MARK not in ln)
        with open(hosts, "w") as fh:
            fh.write(kept)


def _ssh_material(lay: conf.Layout) -> None:
    """Host key, client key, pinned known_hosts, authorized_keys (client-side
    files: rewriting them never needs a daemon restart)."""
    _mkdir(lay.state, mode=0o700)
    _mkdir(lay.client_dir, mode=0o700)
    _mkdir(lay.sshd_dir, mode=0o700)
    host_key = lay.sshd_dir / "ssh_host_ed25519_key"
    for key, comment in ((host_key, "tao-local-slurm-host"), (lay.key, "tao-local-slurm-client")):
        if not key.exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key, "-C", comment], timeout=30)
    _write(lay.known_hosts, conf.known_hosts_line(lay, (host_key.with_suffix(".pub")).read_text()), mode=0o644)
    _write(lay.ssh_config, conf.ssh_config(lay), mode=0o644)
    home = Path(pwd.getpwnam(lay.user).pw_dir)
    _mkdir(home / ".ssh", owner=lay.user, mode=0o700)
    # Add, never replace: an operator with another TAO_LOCAL_CLUSTER_DIR may share this cluster.
    auth = home / ".ssh" / "authorized_keys"
    have = auth.read_text() if auth.exists() else ""
    mine = lay.key.with_suffix(".pub").read_text()
    _write(auth, have if mine in have else have + mine, owner=lay.user, mode=0o600)


def _db_password(lay: conf.Layout) -> str:
    """The slurm DB user's password: random once, kept in a mode-600 root file beside the datadir."""
    path = lay.root / "mariadb-slurm.password"
    if path.exists():
        return path.read_text().strip()
    value = secrets.token_hex(16)
    _write(path, value + "\n", mode=0o600)
    return value


def _daemon_configs(lay: conf.Layout, cgroup: bool) -> dict[Path, tuple[str, str, int]]:
    """Every file a daemon reads: path -> (text, owner, mode)."""
    return {
        lay.slurm_conf: (conf.slurm_conf(lay, cgroup=cgroup, no_in_addr_any=_no_in_addr_any()), "root", 0o644),
        lay.etc / "gres.conf": (conf.gres_conf(lay), "root", 0o644),
        lay.etc / "cgroup.conf": (conf.cgroup_conf(cgroup=cgroup), "root", 0o644),
        # slurmdbd refuses a slurmdbd.conf that is not 600 and owned by SlurmUser.
        lay.etc / "slurmdbd.conf": (conf.slurmdbd_conf(lay, _db_password(lay)), "slurm", 0o600),
        lay.etc / "sshd_config": (conf.sshd_config(lay), "root", 0o644),
    }


def _stale_configs(lay: conf.Layout, cgroup: bool) -> list[str]:
    """Config files whose text differs from what this code generates (read-only)."""
    stale = []
    for path, (text, _owner, _mode) in _daemon_configs(lay, cgroup).items():
        try:
            if path.read_text() != text:
                stale.append(path.name)
        except OSError:
            stale.append(path.name)
    return stale


def _prepare_tree(lay: conf.Layout, cgroup: bool) -> None:
    """Create folders, fake GPU devices and config files."""
    _mkdir(lay.state, mode=0o700)
    _mkdir(lay.root)
    _mkdir(lay.etc)
    _mkdir(lay.log, owner="slurm")
    _mkdir(lay.root / "munge", owner="munge", mode=0o700)
    _mkdir(lay.run, owner="slurm")
    _mkdir(lay.root / "spool")
    _mkdir(lay.root / "spool" / "ctld", owner="slurm", mode=0o700)
    _mkdir(lay.dev)
    _mkdir(lay.mysql_data, owner="mysql", mode=0o700)
    _mkdir(lay.mysql_run, owner="mysql")
    for i, dev in enumerate(lay.gpu_devices()):
        if not dev.exists():
            os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(conf.NVIDIA_MAJOR, i))
        os.chmod(dev, 0o666)
    for path, (text, owner, mode) in _daemon_configs(lay, cgroup).items():
        _write(path, text, owner=owner, mode=mode)
    _ssh_material(lay)
    # The Lustre stand-in: owned by the test user, visible to jobs on both nodes.
    if not lay.lustre.exists():
        _mkdir(lay.lustre, owner=lay.user)
        _write(lay.lustre / LUSTRE_MARK, "created by testclusters.slurm; removed by `down`\n")
    _mkdir(lay.lustre, owner=lay.user)
    _mkdir(lay.lustre / "users", owner=lay.user)
    _mkdir(lay.results_dir, owner=lay.user)
    _ensure_hosts()


# ---------------------------------------------------------------------------- readiness probes
def _munge_ok() -> bool:
    cred = run(["munge", "-n"], timeout=10, check=False)
    return cred.ok and run(["unmunge"], stdin=cred.stdout, timeout=10, check=False).ok


def _mariadb_ok(lay: conf.Layout) -> bool:
    return run(["mariadb-admin", "--no-defaults", f"--socket={lay.mysql_socket}", "ping"], timeout=10, check=False).ok


def _slurmdbd_ok(lay: conf.Layout) -> bool:
    return run(["sacctmgr", "-n", "show", "cluster", "format=cluster"], env=_slurm_env(lay), timeout=10, check=False).ok


def _slurmctld_ok(lay: conf.Layout) -> bool:
    res = run(["scontrol", "ping"], env=_slurm_env(lay), timeout=10, check=False)
    return res.ok and "is UP" in res.stdout


#: sinfo's short node states of a node that runs jobs ("plnd": the backfill scheduler planned it for a
#: pending job, as a busy test run does when a multi-node job waits)
NODE_OK = {"idle", "mix", "alloc", "comp", "plnd"}


def _node_states(lay: conf.Layout) -> dict[str, str]:
    res = run(["sinfo", "-h", "-N", "-o", "%N %t"], env=_slurm_env(lay), timeout=10, check=False)
    return dict(line.split()[:2] for line in res.stdout.splitlines() if len(line.split()) >= 2) if res.ok else {}


def _node_ok(lay: conf.Layout, node: str) -> bool:
    if not port_open(_ports(lay)[f"slurmd-{node}"]):
        return False
    state = _node_states(lay).get(node, "")
    if state.rstrip("*~#!%$@^-") in {"drain", "drng", "down"}:
        # A test cluster: a node drained by an earlier failure (e.g. "Kill task failed") goes back to work.
        run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], env=_slurm_env(lay), timeout=10, check=False)
    return state in NODE_OK


def ssh_argv(lay: conf.Layout, alias: str | None = None) -> list[str]:
    """``ssh`` as a skill user runs it against this cluster (pinned host key, batch mode)."""
    return ["ssh", "-F", str(lay.ssh_config), "-o", "BatchMode=yes", alias or lay.login_alias]


def _ssh_ok(lay: conf.Layout) -> bool:
    res = run([*ssh_argv(lay), "sinfo -h -o %P"], timeout=15, check=False)
    return res.ok and res.stdout.split()[:1] == [lay.partition + "*"]


# ---------------------------------------------------------------------------- daemons
def _start_munged(lay: conf.Layout) -> None:
    _mkdir(Path("/run/munge"), owner="munge")
    run(["runuser", "-u", "munge", "--", EXE["munged"], f"--log-file={_logs(lay)['munged']}"],
        timeout=30, what="munged")


def _start_mariadbd(lay: conf.Layout) -> None:
    if not (lay.mysql_data / "mysql").exists():
        run(["mariadb-install-db", "--no-defaults", f"--datadir={lay.mysql_data}", "--user=mysql",
             "--auth-root-authentication-method=socket"], timeout=300, what="mariadb-install-db")
    argv = [EXE["mariadbd"], "--no-defaults", f"--datadir={lay.mysql_data}", "--user=mysql",
            "--bind-address=127.0.0.1", f"--port={lay.ports.mariadb}", f"--socket={lay.mysql_socket}",
            f"--pid-file={lay.mysql_run / 'mysqld.pid'}", f"--log-error={lay.mysql_run / 'mysqld.err'}",
            "--innodb-buffer-pool-size=128M", "--innodb-log-file-size=64M", "--innodb-lock-wait-timeout=900"]
    # mariadbd does not daemonize: its own session, so it outlives this process.
    subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)


def _after_mariadbd(lay: conf.Layout) -> None:
    run(["mariadb", "--no-defaults", f"--socket={lay.mysql_socket}", "-u", "root"],
        stdin=conf.mariadb_grants_sql(_db_password(lay)), timeout=60, what="mariadb (slurm grants)")


def _after_slurmdbd(lay: conf.Layout) -> None:
    """The accounts (every step is idempotent: "already exists"/"nothing new" answers are fine)."""
    for argv in conf.accounts_argv(lay):
        res = run(argv, env=_slurm_env(lay), timeout=60, check=False, what="sacctmgr")
        text = (res.stdout + res.stderr).lower()
        if not res.ok and "already exist" not in text and "nothing new" not in text and "nothing modified" not in text:
            raise TaoError(f"{' '.join(argv[:4])} failed: {(res.stderr or res.stdout).strip()[-200:]}")


def _start_slurm(exe: str, *args: str) -> Callable[[conf.Layout], None]:
    def start(lay: conf.Layout) -> None:
        run([exe, *args], env=_slurm_env(lay), timeout=60, what=os.path.basename(exe))
    return start


def _start_sshd(lay: conf.Layout) -> None:
    _mkdir(Path("/run/sshd"))
    cfg = lay.etc / "sshd_config"
    run([EXE["sshd"], "-t", "-f", cfg], timeout=30, what="sshd -t (config check)")
    run([EXE["sshd"], "-f", cfg, "-E", _logs(lay)["sshd"]], timeout=30, what="sshd")


def _daemons(lay: conf.Layout) -> list[tuple[str, Callable[[conf.Layout], None], Callable[[], bool], float]]:
    """(label, start, ready probe, timeout s) in start order."""
    items = [
        ("munged", _start_munged, _munge_ok, 15.0),
        ("mariadbd", _start_mariadbd, lambda: _mariadb_ok(lay), 90.0),
        ("slurmdbd", _start_slurm(EXE["slurmdbd"]), lambda: _slurmdbd_ok(lay), 45.0),
        ("slurmctld", _start_slurm(EXE["slurmctld"]), lambda: _slurmctld_ok(lay), 45.0),
    ]
    for node in conf.NODES:
        items.append((f"slurmd-{node}", _start_slurm(EXE["slurmd"], "-N", node),
                      lambda node=node: _node_ok(lay, node), 60.0))
    items.append(("sshd", _start_sshd, lambda: _ssh_ok(lay), 20.0))
    return items


# ---------------------------------------------------------------------------- public verbs
def _lock(lay: conf.Layout, verb: str) -> FileLock:
    # Beside the daemons' tree, not in the state dir: two state dirs still share the ports.
    return FileLock(lay.root.parent / f"{lay.root.name}.lock", f"`local_cluster.py {verb} slurm`")


def up() -> dict[str, str]:
    """Install if needed, start what is not running, wait until every daemon answers."""
    lay = layout()
    if os.geteuid() != 0:
        raise TaoError("the local SLURM cluster needs root (packages, users, daemons): run it as root")
    with _lock(lay, "up"):
        return _up(lay)


def _up(lay: conf.Layout) -> dict[str, str]:
    t0 = time.monotonic()
    apt_s = _ensure_packages()
    _ensure_accounts(lay)
    pidfiles, logs, ports = _pidfiles(lay), _logs(lay), _ports(lay)
    running = {name: live_pid(pf, exe) for name, (pf, exe) in pidfiles.items()}
    info = _load_cluster(lay)
    busy = any(pid for name, pid in running.items() if name != "munged")
    cgroup = _use_cgroup(lay, busy)
    if busy and lay.root.exists() and (stale := _stale_configs(lay, cgroup)):
        raise TaoError(f"the running local SLURM cluster was started with other settings ({', '.join(stale)}): "
                       "run `local_cluster.py down slurm`, then `up slurm`")
    _prepare_tree(lay, cgroup)
    lightning_s = _ensure_lightning(lay)
    started = []
    for name, start, ready, timeout in _daemons(lay):
        if running[name] is None:
            port = ports.get(name)
            if name == "munged" and _munge_ok():
                info["munged_external"] = True  # someone else's munged already serves the socket
                continue
            if port is not None and port_open(port):
                raise TaoError(f"port {port} needed by {name} is in use by a process this cluster did not start: "
                               "free it (or run `local_cluster.py down slurm`) and retry")
            try:
                start(lay)
            except TaoError as exc:
                raise TaoError(f"{name} did not start ({exc}): see {logs[name]} (last line: {log_tail(logs[name])})") from None
            started.append(name)
        if not wait_for(ready, timeout, interval=0.2):
            raise not_ready(name, timeout, logs[name])
        if name == "mariadbd":
            _after_mariadbd(lay)
        if name == "slurmdbd":
            _after_slurmdbd(lay)
        if name == "munged" and running[name] is None:
            info["munged_external"] = False
            info["munged_pid"] = live_pid(*pidfiles["munged"])
    if not port_refuses(lay.ports.ssh, lay.refused_addr):
        raise TaoError(f"{lay.refused_addr}:{lay.ports.ssh} (the refusing login address) does not refuse "
                       "connections: stop whatever listens there and retry")
    info.update({
        "cgroup": "v1" if cgroup else "none",
        "memory_kill": "OUT_OF_MEMORY" if cgroup else "FAILED 0:9",
        "root": str(lay.root),
        "lustre": str(lay.lustre),
        "slurm_conf": str(lay.slurm_conf),
        "env": _env(lay),
        "last_up": {"started": started, "apt_seconds": round(apt_s, 1), "lightning_seconds": round(lightning_s, 1),
                    "total_seconds": round(time.monotonic() - t0, 1)},
    })
    _save_cluster(lay, info)
    return _env(lay)


def status() -> dict:
    """Which daemons run (by pid file) and whether the cluster answers; key ``ready``."""
    lay = layout()
    info = _load_cluster(lay)
    out: dict = {"state_dir": str(lay.state), "root": str(lay.root)}
    pids = {}
    for name, (pf, exe) in _pidfiles(lay).items():
        pid = _peek_pid(pf, exe)
        pids[name] = pid
        out[f"pid.{name}"] = pid
    problem = None
    if not lay.slurm_conf.exists():
        problem = "not set up (run `local_cluster.py up slurm`)"
    elif missing := [n for n, p in pids.items() if p is None and not (n == "munged" and info.get("munged_external"))]:
        problem = f"not running: {', '.join(missing)}"
    elif not _slurmctld_ok(lay):
        problem = "slurmctld does not answer `scontrol ping`"
    elif bad := {n: s for n, s in _node_states(lay).items() if s not in NODE_OK}:
        problem = f"nodes not usable: {bad}"
    elif not _ssh_ok(lay):
        problem = f"ssh to {lay.login_alias} fails (see {_logs(lay)['sshd']})"
    out["ready"] = problem is None
    if problem:
        out["problem"] = problem
    for key in ("cgroup", "memory_kill", "slurm_conf", "lustre"):
        if key in info:
            out[key] = info[key]
    return out


def _peek_pid(pidfile: Path, exe: str) -> int | None:
    """Like live_pid, but read-only (status never deletes anything)."""
    from .procs import pid_runs, read_pid

    pid = read_pid(pidfile)
    return pid if pid is not None and pid_runs(pid, exe) else None


def down() -> None:
    """Cancel jobs, stop every daemon by its pid file, remove the cluster's state."""
    lay = layout()
    with _lock(lay, "down"):
        _down(lay)


def _down(lay: conf.Layout) -> None:
    info = _load_cluster(lay)
    pidfiles = _pidfiles(lay)

    def stop(name: str) -> None:
        pf, exe = pidfiles[name]
        pid = _peek_pid(pf, exe)
        if pid is None:
            return
        if name == "munged" and (info.get("munged_external") or info.get("munged_pid") != pid):
            return  # not ours
        if name == "sshd":  # open login sessions (ssh ControlMaster clients) end with the cluster
            for kid in children(pid, exe):
                stop_pid(kid, exe, grace=5.0)
        stop_pid(pid, exe, grace=20.0 if name == "mariadbd" else 10.0)
        pf.unlink(missing_ok=True)

    stop("sshd")  # first: no new submissions over ssh while jobs are cancelled
    if lay.slurm_conf.exists() and _peek_pid(*pidfiles["slurmctld"]) and _slurmctld_ok(lay):
        senv = _slurm_env(lay)
        run(["scontrol", "update", f"PartitionName={lay.partition}", "State=INACTIVE"], env=senv, timeout=30, check=False)
        run(["scancel", f"--partition={lay.partition}"], env=senv, timeout=30, check=False)
        # let slurmstepd processes finish while slurmd is still up
        wait_for(lambda: not run(["squeue", "-h", "-o", "%i"], env=senv, timeout=10).stdout.strip(), 30.0, 0.3)
    for node in conf.NODES:
        stop(f"slurmd-{node}")
    _kill_job_processes()
    for name in ("slurmctld", "slurmdbd", "mariadbd", "munged"):
        stop(name)
    _remove_cgroups()
    for path in (lay.root, lay.state):
        shutil.rmtree(path, ignore_errors=True)
    if (lay.lustre / LUSTRE_MARK).exists():
        shutil.rmtree(lay.lustre, ignore_errors=True)
    _remove_hosts()
    try:
        (Path(pwd.getpwnam(lay.user).pw_dir) / ".ssh" / "authorized_keys").unlink(missing_ok=True)
    except KeyError:
        pass


def _node_cgroups() -> list[Path]:
    """The per-node cgroup v1 trees slurmd made: /sys/fs/cgroup/<ctrl>/slurm_<node>."""
    tops = [Path("/sys/fs/cgroup") / ctrl / f"slurm_{node}" for ctrl in CGROUP_CONTROLLERS for node in conf.NODES]
    return [top for top in tops if top.is_dir()]


def _kill_job_processes() -> None:
    """SIGKILL what still runs inside our nodes' job cgroups (a slurmstepd whose
    slurmd is gone): found by cgroup membership, never by name."""
    pids: set[int] = set()
    for top in _node_cgroups():
        for dirpath, _dirs, files in os.walk(top):
            if "cgroup.procs" in files:
                try:
                    pids.update(int(x) for x in (Path(dirpath) / "cgroup.procs").read_text().split())
                except (OSError, ValueError):
                    pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    wait_for(lambda: not any(alive(pid) for pid in pids), 10.0)


def _remove_cgroups() -> None:
    """Remove the (empty) per-node cgroup v1 trees slurmd made: /sys/fs/cgroup/<ctrl>/slurm_<node>."""
    for top in _node_cgroups():
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda t: -len(t[0])):
            try:
                os.rmdir(dirpath)  # deepest first; a non-empty one stays
            except OSError:
                pass


__all__ = ["up", "down", "status", "env", "layout", "ssh_argv"]
