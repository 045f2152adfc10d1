"""One SSH connection to a SLURM login node, reused by every remote command.

* Non-interactive: ``BatchMode=yes`` and a connect timeout.
* Failover over every entry of ``SLURM_HOSTNAME`` (``host``, ``host:port``,
  ``user@host``, ``[v6]:port`` or an ``ssh_config`` alias), remembered host
  first; the one that worked is written to the state dir.
* Host keys always checked (``StrictHostKeyChecking=yes``; known_hosts from
  ``TAO_SSH_KNOWN_HOSTS`` or ssh's defaults). Never turned off.
* Key from ``SSH_KEY_PATH`` (``-i``, ``IdentitiesOnly``), else the agent in
  ``SSH_AUTH_SOCK``. ``TAO_SSH_CONFIG`` is passed with ``-F``.
* Multiplexed: ``ControlMaster=auto``, ``ControlPath=<short private dir>/%C``
  (socket paths are limited to ~104 bytes), ``ControlPersist`` so later verbs
  reuse it; a socket whose master is gone is removed and replaced.
* Remote commands are argv lists joined with :func:`shlex.join`; secrets go
  on stdin only.
"""
from __future__ import annotations

import os
import re
import shlex
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from ... import fsio
from ...errors import TaoError
from ...run import Result, last_line, run

CONNECT_TIMEOUT = 10
PERSIST_SECONDS = 600
#: OpenSSH's own cipher order (``ssh -G`` prints it where ssh_config sets none) and the same set with AES-GCM
#: first, which the master asks for on a CPU with AES instructions: there it moves bytes at about 1.6x
#: chacha20's speed (a 1 GiB fetch), and a server that took the default set takes this one.
DEFAULT_CIPHERS = ("chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com,"
                   "aes256-gcm@openssh.com")
AES_FIRST_CIPHERS = ("aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr,"
                     "aes192-ctr,aes256-ctr")


def cpu_has_aes(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """This host's CPU has AES instructions (x86 ``flags``, Arm ``Features``)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return False
    return any(line.split(":", 1)[0].strip() in ("flags", "Features") and "aes" in line.split(":", 1)[-1].split()
               for line in text.splitlines())


def cipher_options(effective_ciphers: str | None, *, aes: bool | None = None) -> list[str]:
    """``-o Ciphers=`` for a new master: AES-GCM first where ssh_config left OpenSSH's default order and the CPU
    has AES; nothing otherwise (a site's own cipher list is kept as it is)."""
    if effective_ciphers != DEFAULT_CIPHERS or not (cpu_has_aes() if aes is None else aes):
        return []
    return ["-o", f"Ciphers={AES_FIRST_CIPHERS}"]
_HOST = re.compile(r"(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(?P<port>[0-9]{1,5}))?\Z")
#: ssh's own failures (exit 255) that mean "this host cannot be reached/used".
_CONN_ERRORS = ("Connection refused", "Connection timed out", "Could not resolve", "No route to host",
                "Connection closed", "Connection reset", "Network is unreachable", "Host key verification failed",
                "Permission denied", "kex_exchange_identification", "Broken pipe", "Control socket connect",
                "mux_client", "Too many authentication failures", "connect to host")

#: Counters for benchmarks/tests (per process).
STATS = {"connections": 0, "commands": 0}


@dataclass(frozen=True)
class Host:
    entry: str  # as written in SLURM_HOSTNAME
    host: str
    user: str | None = None
    port: int | None = None


def parse_hosts(spec: str) -> list[Host]:
    """``SLURM_HOSTNAME`` comma list -> hosts, in order, duplicates dropped."""
    out: list[Host] = []
    for raw in (spec or "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        m = _HOST.match(entry)
        if not m or entry.startswith("-"):
            raise TaoError(f"SLURM_HOSTNAME entry {entry!r} is not host, host:port or user@host: fix SLURM_HOSTNAME")
        port = int(m["port"]) if m["port"] else None
        if port is not None and not 0 < port < 65536:
            raise TaoError(f"SLURM_HOSTNAME entry {entry!r} has an invalid port")
        host = m["host"].strip("[]")
        if entry not in {h.entry for h in out}:
            out.append(Host(entry, host, m["user"], port))
    if not out:
        raise TaoError("SLURM_HOSTNAME is empty: set it to the login host(s), comma-separated for failover")
    return out


def control_dir() -> Path:
    """A short private folder for the ControlMaster sockets (mode 700, ours)."""
    base = Path(os.environ.get("TAO_SSH_CONTROL_DIR") or Path(tempfile.gettempdir()) / f"tao-ssh-{os.getuid()}")
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(base)
    except OSError as exc:
        raise TaoError(f"cannot create the SSH control folder {base}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise TaoError(f"SSH control folder {base} is not a private folder of yours (mode 700): remove it or set TAO_SSH_CONTROL_DIR")
    return base


def _remembered_file() -> Path:
    from ...records import state_dir

    return Path(state_dir()) / "slurm" / "login_host"


def remembered_host() -> str | None:
    """The login host that answered last (a hint for the failover order); None when absent or not a plain file."""
    try:
        text = fsio.read_text(_remembered_file(), "remembered login host", max_bytes=4096, follow_links=False,
                              missing_ok=True)
    except TaoError:
        return None
    return (text or "").strip() or None


def remember_host(entry: str) -> None:
    """Remember ``entry`` inside the state folder only: a symlinked ``slurm`` folder is never written through."""
    path = _remembered_file()
    try:
        path.parent.mkdir(exist_ok=True, mode=0o700)
        st = os.lstat(path.parent)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return  # a symlink or a foreign folder: remembering is an optimisation, never a reason to write elsewhere
        fsio.write_private(path, entry + "\n")
    except OSError:
        pass  # remembering is an optimisation, never a failure


def is_connection_error(res: Result) -> bool:
    return res.returncode == 255 and any(p in (res.stderr or "") for p in _CONN_ERRORS)


def _seconds(raw: str | None, name: str, default: int) -> int:
    """A whole number of seconds from the environment (1 to 3600), else the default when unset."""
    text = (raw or "").strip()
    if not text:
        return default
    if not text.isdigit() or len(text) > 4 or not 1 <= int(text) <= 3600:
        raise TaoError(f"{name} must be a whole number of seconds from 1 to 3600: fix or unset it")
    return int(text)


class Connection:
    """SSH to the first working login host; all commands share its master."""

    def __init__(self, env: Mapping[str, str] | None = None, *, connect_timeout: int | None = None) -> None:
        env = os.environ if env is None else env
        self.user = (env.get("SLURM_USER") or "").strip() or None
        self.hosts = parse_hosts(env.get("SLURM_HOSTNAME", ""))
        self.key = (env.get("SSH_KEY_PATH") or "").strip() or None
        self.config = (env.get("TAO_SSH_CONFIG") or "").strip() or None
        self.known_hosts = (env.get("TAO_SSH_KNOWN_HOSTS") or "").strip() or None
        self.timeout = connect_timeout or _seconds(env.get("TAO_SSH_CONNECT_TIMEOUT"), "TAO_SSH_CONNECT_TIMEOUT",
                                                   CONNECT_TIMEOUT)
        self.host: Host | None = None
        self.errors: dict[str, str] = {}
        if not self.user and not all(h.user for h in self.hosts):
            # Required by the skill; an ssh_config User would hide a missing setting.
            raise TaoError("SLURM_USER is not set: export SLURM_USER=<login user> (or write every SLURM_HOSTNAME entry as user@host)")
        if self.key:
            p = Path(self.key).expanduser()
            if not p.is_file():
                raise TaoError(f"SSH_KEY_PATH {self.key} is not a file: point it at your private key")
            if p.stat().st_mode & 0o077:
                raise TaoError(f"SSH_KEY_PATH {self.key} is readable by others and ssh will refuse it: chmod 600 {self.key}")
            self.key = str(p)
        for name, path in (("TAO_SSH_CONFIG", self.config), ("TAO_SSH_KNOWN_HOSTS", self.known_hosts)):
            if path and not Path(path).is_file():
                raise TaoError(f"{name} {path} does not exist: fix the variable or unset it")

    # ------------------------------------------------------------------ argv
    def options(self, host: Host) -> list[str]:
        """ssh options for ``host`` (without the destination)."""
        opts = ["ssh"]
        if self.config:
            opts += ["-F", self.config]
        opts += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.timeout}",
                 "-o", "StrictHostKeyChecking=yes",
                 "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4",
                 "-o", "ControlMaster=auto", "-o", f"ControlPath={control_dir()}/%C",
                 "-o", f"ControlPersist={PERSIST_SECONDS}"]
        if self.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.key:
            opts += ["-i", self.key, "-o", "IdentitiesOnly=yes"]
        user = host.user or self.user
        if user:
            opts += ["-l", user]
        if host.port:
            opts += ["-p", str(host.port)]
        return opts

    def _effective(self, host: Host) -> dict[str, str]:
        """What ssh makes of its configuration for ``host`` (``ssh -G``): ``controlpath`` for the stale check,
        ``ciphers`` for :func:`cipher_options`."""
        res = run(self.options(host) + ["-G", "--", host.host], check=False, timeout=15, what="ssh -G")
        out = {}
        for line in res.stdout.splitlines():
            key, _, value = line.partition(" ")
            if key.lower() in ("controlpath", "ciphers"):
                out[key.lower()] = value.strip()
        return out

    def _master_alive(self, host: Host) -> bool:
        return run(self.options(host) + ["-O", "check", "--", host.host], check=False, timeout=15, what="ssh -O check").ok

    def _master_gone(self, host: Host | None) -> bool:
        """After a silent exit 255: is the master dead (it may take a moment to exit)?"""
        import time

        if host is None:
            return True
        for _ in range(3):
            if not self._master_alive(host):
                return True
            time.sleep(0.2)
        return False

    # ------------------------------------------------------------- connect
    def _order(self) -> list[Host]:
        first = remembered_host()
        return sorted(self.hosts, key=lambda h: 0 if h.entry == first else 1)

    def connect(self) -> Host:
        """Reuse a live master or open one, failing over across the hosts."""
        if self.host is not None:
            return self.host
        self.errors = {}
        for host in self._order():
            if self._master_alive(host):
                self.host = host
                break
            effective = self._effective(host)
            sock = effective.get("controlpath")
            if sock and os.path.exists(sock):
                os.unlink(sock)  # stale: the master died but left its socket
            res = run(self.options(host) + cipher_options(effective.get("ciphers")) + ["--", host.host, "true"],
                      check=False, timeout=self.timeout + 20, what="ssh")
            if res.ok:
                STATS["connections"] += 1
                self.host = host
                break
            self.errors[host.entry] = last_line(res.stderr)
        if self.host is None:
            detail = "; ".join(f"{h}: {e}" for h, e in self.errors.items())
            raise TaoError(f"no SLURM login host answered over passwordless SSH ({detail}): "
                           "see references/ssh-setup.md (SSH_KEY_PATH, known_hosts, SLURM_HOSTNAME)")
        if remembered_host() != self.host.entry:
            remember_host(self.host.entry)
        return self.host

    # ------------------------------------------------------------- commands
    def command_argv(self, argv: Sequence[str]) -> list[str]:
        host = self.connect()
        return self.options(host) + ["--", host.host, shlex.join([str(a) for a in argv])]

    def remote(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float = 120, check: bool = True,
               what: str | None = None, retry_on_drop: bool = False) -> Result:
        """Run ``argv`` on the login host (quoted with shlex.join). Secrets only via ``stdin``."""
        label = what or str(argv[0])
        for attempt in (1, 2):
            full = self.command_argv(argv)
            STATS["commands"] += 1
            res = run(full, stdin=stdin, timeout=timeout, check=False, what=label)
            # ssh's own failures exit 255; a master killed mid-command may print nothing,
            # so a 255 with the master gone is a dropped connection too.
            if res.returncode == 255 and (is_connection_error(res) or self._master_gone(self.host)):
                dropped = self.host.entry if self.host else "?"
                self.host = None
                if retry_on_drop and attempt == 1:
                    continue
                why = last_line(res.stderr) if (res.stderr or "").strip() else "connection lost (exit 255)"
                raise TaoError(f"SSH to {dropped} failed during {label}: {why}")
            break
        if check and not res.ok:
            raise TaoError(f"{label} failed on the login host (exit {res.returncode}): {last_line(res.stderr or res.stdout)}")
        return res

    def script(self, script: str, args: Sequence[str] = (), **kw) -> Result:
        """A constant shell script run with ``sh -c``; user values only as positional args."""
        return self.remote(["sh", "-c", script, "tao"] + [str(a) for a in args], **kw)

    def close(self) -> None:
        """Stop the master (tests; verbs leave it for the next verb)."""
        for host in self.hosts:
            run(self.options(host) + ["-O", "exit", "--", host.host], check=False, timeout=15, what="ssh -O exit")
        self.host = None


def classify_argv(argv: Sequence[str]) -> str:
    """'control' (-O/-G), 'connect' (the ``true`` probe) or 'command', for call-log counting."""
    if not argv or os.path.basename(argv[0]) != "ssh":
        return "other"
    if "-O" in argv or "-G" in argv:
        return "control"
    if argv[-1] == "true" and argv[-3] == "--":
        return "connect"
    return "command"
