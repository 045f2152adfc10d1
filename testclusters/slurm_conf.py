"""Layout and configuration files of the local SLURM cluster (pure functions).

Every file is built from Python data: ``key=value`` / ``key value`` pairs
joined by :func:`_lines`, which refuses any value that could break out of its
line (newline, NUL) or that the config parsers would split (whitespace,
quotes). Paths come from the layout, so a home directory with a space in it
fails with one clear line instead of a silently broken config.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from taobank.errors import TaoError

NODES = ("node1", "node2")
#: 8 GPUs per node (the max_num_gpus_per_node default: 8 GPUs = a whole node).
#: CPUs: the host's real ones (each node declares all of them), so
#: cgroup.conf's ConstrainCores binds a step to CPUs that exist and a step
#: given fewer CPUs than asked shows it (nproc). Jobs on this cluster ask for
#: a CPU or two (cpus_per_task), not the default 16.
GPUS_PER_NODE = 8


def host_cpus() -> int:
    return max(1, len(os.sched_getaffinity(0)))
REAL_MEMORY_MB = 16000
#: NVIDIA's character-device major: Slurm only stat()s the files, so fake
#: devices with this major stand in for /dev/nvidiaN.
NVIDIA_MAJOR = 195


@dataclass(frozen=True)
class Ports:
    ssh: int = 22022
    slurmctld: int = 16817
    slurmdbd: int = 16819
    mariadb: int = 13306
    slurmd: tuple[int, ...] = (17001, 17002)


@dataclass(frozen=True)
class Layout:
    """Where everything lives. ``state`` is private to the operator (client key,
    ssh config, cluster.json); ``root`` is the daemons' tree, readable by the
    ``slurm``/``mysql``/test users (a home directory usually is not)."""

    state: Path
    root: Path = Path("/var/lib/tao-local-slurm")
    lustre: Path = Path("/srv/tao-lustre")
    user: str = "taotest"
    cluster: str = "taolocal"
    partition: str = "local"
    #: CPU partition standing in for a site's image-conversion partition (same nodes, no GPU asked).
    convert_partition: str = "convert"
    #: The account jobs must name: the user's default account may submit nothing
    #: (MaxSubmitJobs=0 under AccountingStorageEnforce), like an account-required site.
    account: str = "tao-local"
    default_account: str = "tao-nobudget"
    login_alias: str = "tao-slurm-login"
    refused_alias: str = "tao-slurm-refused"
    #: 127.0.0.2 is loopback too, but sshd listens on 127.0.0.1 only: a
    #: connection there is refused, like a login node that is down.
    refused_addr: str = "127.0.0.2"
    ports: Ports = field(default_factory=Ports)

    # --- paths (all derived) ---
    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def dev(self) -> Path:
        return self.root / "dev"

    @property
    def mysql_data(self) -> Path:
        return self.root / "mysql"

    @property
    def mysql_run(self) -> Path:
        return self.root / "mysqlrun"

    @property
    def mysql_socket(self) -> Path:
        return self.mysql_run / "mysqld.sock"

    @property
    def sshd_dir(self) -> Path:
        return self.root / "sshd"

    @property
    def client_dir(self) -> Path:
        return self.state / "ssh"

    @property
    def key(self) -> Path:
        return self.client_dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.client_dir / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.client_dir / "ssh_config"

    @property
    def results_dir(self) -> Path:
        return self.lustre / "users" / self.user

    def gpu_devices(self) -> list[Path]:
        return [self.dev / f"nvidia{i}" for i in range(GPUS_PER_NODE)]


def default_state_dir() -> Path:
    """``${TAO_LOCAL_CLUSTER_DIR:-~/.local/state/tao-skill-bank/clusters}/slurm``."""
    base = os.environ.get("TAO_LOCAL_CLUSTER_DIR") or str(
        Path.home() / ".local" / "state" / "tao-skill-bank" / "clusters"
    )
    return Path(base) / "slurm"


def _check(value: object) -> str:
    text = str(value)
    if not text or any(c.isspace() or c in "\"'\\#\x00" for c in text):
        raise TaoError(
            f"local SLURM config value {text!r} is empty or holds whitespace/quotes/#: "
            "use a path without them (set TAO_LOCAL_CLUSTER_DIR)"
        )
    return text


def _lines(pairs: list[tuple[str, object]], sep: str = "=") -> str:
    return "".join(f"{k}{sep}{_check(v)}\n" for k, v in pairs)


def _words(pairs: list[tuple[str, object]]) -> str:
    """One line of space-separated ``key=value`` words (a NodeName= line)."""
    return " ".join(f"{k}={_check(v)}" for k, v in pairs) + "\n"


# ----------------------------------------------------------------------------
def slurm_conf(lay: Layout, *, cgroup: bool, no_in_addr_any: bool, cpus: int | None = None) -> str:
    """slurm.conf: one controller, two slurmd "nodes" on 127.0.0.1, fake GPUs.

    ``cgroup``: the cgroup v1 controllers are writable, so proctrack/task
    cgroup plugins enforce --mem (OUT_OF_MEMORY) and --gres devices; without
    them, linuxproc + OverMemoryKill kills with signal 9 (FAILED 0:9).
    """
    p = lay.ports
    pairs: list[tuple[str, object]] = [
        ("ClusterName", lay.cluster),
        ("SlurmctldHost", "localhost"),  # other names may not resolve as the controller
        ("SlurmctldPort", p.slurmctld),
        ("SlurmUser", "slurm"),
        ("AuthType", "auth/munge"),
        ("CredType", "cred/munge"),
        # A requeued job may start again cred_expire+1 s later (default 120).
        ("AuthInfo", "cred_expire=10"),
        ("MailProg", "/bin/true"),
        ("StateSaveLocation", lay.root / "spool" / "ctld"),
        ("SlurmdSpoolDir", lay.root / "spool" / "slurmd-%n"),
        ("SlurmctldPidFile", lay.run / "slurmctld.pid"),
        ("SlurmdPidFile", lay.run / "slurmd-%n.pid"),
        ("SlurmctldLogFile", lay.log / "slurmctld.log"),
        ("SlurmdLogFile", lay.log / "slurmd-%n.log"),
        ("SlurmctldDebug", "info"),
        ("SlurmdDebug", "info"),
        ("MpiDefault", "none"),
        ("ReturnToService", 2),
        ("SlurmdParameters", "config_overrides"),
        ("SchedulerType", "sched/backfill"),
        ("SchedulerParameters", "sched_interval=1,bf_interval=1"),
        ("SelectType", "select/cons_tres"),
        ("SelectTypeParameters", "CR_Core_Memory"),
        ("DefMemPerCPU", 100),
        ("KillWait", 2),
        ("MinJobAge", 300),  # squeue keeps finished jobs 5 min; sacct keeps them forever
        ("InactiveLimit", 0),
        ("Waittime", 0),
        ("SlurmctldTimeout", 30),
        ("SlurmdTimeout", 60),
        ("GresTypes", "gpu"),
        ("AccountingStorageType", "accounting_storage/slurmdbd"),
        ("AccountingStorageHost", "localhost"),
        ("AccountingStoragePort", p.slurmdbd),
        ("AccountingStorageTRES", "gres/gpu"),
        # Jobs need an association, and its limits apply: see accounts_argv.
        ("AccountingStorageEnforce", "associations,limits"),
        ("JobAcctGatherType", "jobacct_gather/linux"),
        ("JobAcctGatherFrequency", "task=1"),
        ("JobCompType", "jobcomp/none"),
    ]
    if cgroup:
        pairs += [("ProctrackType", "proctrack/cgroup"), ("TaskPlugin", "task/cgroup")]
    else:
        pairs += [
            ("ProctrackType", "proctrack/linuxproc"),
            ("TaskPlugin", "task/none"),
            ("JobAcctGatherParams", "OverMemoryKill"),
        ]
    if no_in_addr_any:
        # Bind to the address hostname resolves to (loopback) instead of 0.0.0.0.
        pairs.append(("CommunicationParameters", "NoInAddrAny,NoCtldInAddrAny"))
    text = _lines(pairs)
    # Debian's build is not --enable-multiple-slurmd: NodeHostname must differ
    # per node (a label here); both nodes share 127.0.0.1 with distinct ports.
    for name, port in zip(NODES, p.slurmd):
        text += _words([
            ("NodeName", name), ("NodeHostname", name), ("NodeAddr", "127.0.0.1"), ("Port", port),
            ("Sockets", 1), ("CoresPerSocket", cpus or host_cpus()), ("ThreadsPerCore", 1),
            ("RealMemory", REAL_MEMORY_MB),
            ("Gres", f"gpu:{GPUS_PER_NODE}"), ("State", "UNKNOWN"),
        ])
    text += _words([
        ("PartitionName", lay.partition), ("Nodes", ",".join(NODES)), ("Default", "YES"),
        ("MaxTime", "INFINITE"), ("State", "UP"),
    ])
    text += _words([
        ("PartitionName", lay.convert_partition), ("Nodes", ",".join(NODES)), ("Default", "NO"),
        ("MaxTime", "02:00:00"), ("State", "UP"),
    ])
    return text


def accounts_argv(lay: Layout) -> list[list[str]]:
    """``sacctmgr -i`` commands (idempotent) that make an account required for the test user.

    The user's default account may submit no job (MaxSubmitJobs=0), so a job
    without ``--account`` is refused at submit, as on sites that bill every
    job; ``lay.account`` is the one to name.
    """
    c = f"cluster={_check(lay.cluster)}"
    return [
        ["sacctmgr", "-i", "add", "cluster", lay.cluster],
        ["sacctmgr", "-i", "add", "account", f"{_check(lay.default_account)},{_check(lay.account)}", c],
        ["sacctmgr", "-i", "add", "user", _check(lay.user), f"account={lay.default_account},{lay.account}",
         f"defaultaccount={lay.default_account}", c],
        ["sacctmgr", "-i", "modify", "account", "where", f"name={lay.default_account}", c, "set", "MaxSubmitJobs=0"],
    ]


def gres_conf(lay: Layout) -> str:
    """AutoDetect=off + File= char devices: a GPU count without File= is dropped."""
    text = _lines([("AutoDetect", "off")])
    files = f"{lay.dev}/nvidia[0-{GPUS_PER_NODE - 1}]"
    text += _words([("NodeName", ",".join(NODES)), ("Name", "gpu"), ("File", files)])
    return text


def cgroup_conf(*, cgroup: bool) -> str:
    if not cgroup:
        return _lines([("CgroupPlugin", "autodetect")])
    return _lines([
        ("CgroupPlugin", "cgroup/v1"),
        ("ConstrainRAMSpace", "yes"),
        ("ConstrainSwapSpace", "no"),
        ("ConstrainDevices", "yes"),
        ("ConstrainCores", "yes"),
    ])


def slurmdbd_conf(lay: Layout, db_password: str) -> str:
    return _lines([
        ("AuthType", "auth/munge"),
        ("DbdHost", "localhost"),
        ("DbdPort", lay.ports.slurmdbd),
        ("SlurmUser", "slurm"),
        ("LogFile", lay.log / "slurmdbd.log"),
        ("PidFile", lay.run / "slurmdbd.pid"),
        ("DebugLevel", "info"),
        ("StorageType", "accounting_storage/mysql"),
        ("StorageHost", "127.0.0.1"),
        ("StoragePort", lay.ports.mariadb),
        ("StorageUser", "slurm"),
        ("StoragePass", db_password),
        ("StorageLoc", "slurm_acct_db"),
    ])


def mariadb_grants_sql(db_password: str) -> str:
    """SQL fed to the mariadb client on stdin (the password never reaches argv)."""
    _check(db_password)
    stmts = ["CREATE DATABASE IF NOT EXISTS slurm_acct_db;"]
    for host in ("localhost", "127.0.0.1"):
        stmts.append(f"CREATE USER IF NOT EXISTS 'slurm'@'{host}' IDENTIFIED BY '{db_password}';")
        stmts.append(f"ALTER USER 'slurm'@'{host}' IDENTIFIED BY '{db_password}';")
        stmts.append(f"GRANT ALL ON slurm_acct_db.* TO 'slurm'@'{host}';")
    return "\n".join(stmts) + "\n"


def sshd_config(lay: Layout) -> str:
    """Key-only login for the test user on 127.0.0.1 (UsePAM no: no system auth stack)."""
    return _lines([
        ("Port", lay.ports.ssh),
        ("ListenAddress", "127.0.0.1"),
        ("HostKey", lay.sshd_dir / "ssh_host_ed25519_key"),
        ("PidFile", lay.run / "sshd.pid"),
        ("AuthenticationMethods", "publickey"),
        ("PubkeyAuthentication", "yes"),
        ("PasswordAuthentication", "no"),
        ("KbdInteractiveAuthentication", "no"),
        ("PermitRootLogin", "no"),
        ("UsePAM", "no"),
        ("AllowUsers", lay.user),
        ("SetEnv", f"SLURM_CONF={lay.slurm_conf}"),
        ("LogLevel", "VERBOSE"),
    ], sep=" ")


def ssh_config(lay: Layout) -> str:
    """Client config passed with ``ssh -F``: one alias per login address."""
    text = ""
    for alias, addr in ((lay.login_alias, "127.0.0.1"), (lay.refused_alias, lay.refused_addr)):
        text += f"Host {_check(alias)}\n" + "".join(
            f"  {line}" for line in _lines([
                ("HostName", addr),
                ("Port", lay.ports.ssh),
                ("User", lay.user),
                ("IdentityFile", lay.key),
                ("IdentitiesOnly", "yes"),
                ("UserKnownHostsFile", lay.known_hosts),
                ("StrictHostKeyChecking", "yes"),
                ("BatchMode", "yes"),
                ("ConnectTimeout", 5),
            ], sep=" ").splitlines(keepends=True)
        )
    return text


def known_hosts_line(lay: Layout, host_pubkey: str) -> str:
    """Pin the server's host key for ``[127.0.0.1]:<port>`` (what ssh looks up)."""
    kind, blob = host_pubkey.split()[:2]
    return f"[127.0.0.1]:{lay.ports.ssh} {kind} {blob}\n"


def env(lay: Layout) -> dict[str, str]:
    """What a skill user exports to reach this cluster (refusing address FIRST)."""
    return {
        "SLURM_USER": lay.user,
        "SLURM_HOSTNAME": f"{lay.refused_alias},{lay.login_alias}",
        "SSH_KEY_PATH": str(lay.key),
        "TAO_SSH_CONFIG": str(lay.ssh_config),
        "TAO_SSH_KNOWN_HOSTS": str(lay.known_hosts),
        "SLURM_PARTITION": lay.partition,
        "SLURM_ACCOUNT": lay.account,
        "TAO_SLURM_CONVERSION_PARTITION": lay.convert_partition,
        "SLURM_BASE_RESULTS_DIR": str(lay.results_dir),
        "TAO_LOCAL_LUSTRE_ROOT": str(lay.lustre),
        "TAO_SLURM_CONTAINER_RUNTIME": "none",
        # no GPUs here: the gloo-cpu probe's ok (a real all-reduce between node1 and node2) opens the gate
        "TAO_NCCL_GATE_ACCEPTS": "nccl,gloo-cpu",
    }
