"""Resource mapping: job-spec fields + environment -> sbatch directive values.

Defaults come from versions.yaml ``slurm.defaults`` (the defaults of TAO's
own SLURM launcher). Rules that matter:

* wall time: ``time`` (``HH:MM:SS``), ``time_minutes`` or ``time_hours``
  (else ``SLURM_TIME_HOURS``, else 4); never 12 h; more than
  ``max_time_hours`` on the packaged default partitions is refused unless
  another partition is named. Rendered as whole minutes, rounded up.
* the command is stopped (SIGTERM, SIGKILL ``kill_grace_seconds`` later) by
  95 % of the wall time, grace included, unless ``timeout_hours`` (or
  ``SLURM_TIMEOUT_HOURS``) says when; SIGTERM + grace never pass the wall
  time; ``timeout_hours: 0`` disables it.
* ``num_gpus`` is the job's total; ``num_gpus >= max_num_gpus_per_node`` takes
  whole nodes (``--exclusive``) and derives the node count.
* ``use_requeue`` (else ``SLURM_USE_REQUEUE``, else the pin) decides
  ``--requeue`` and whether the job resubmits itself after an infrastructure
  failure.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ... import pins
from ...errors import TaoError
from .spec import SlurmSpec
from ...jobspec import given

_PARTITION = re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*\Z")
_ACCOUNT = re.compile(r"[A-Za-z0-9_.-]+\Z")
_MEM = re.compile(r"[1-9][0-9]*[KMGT]?\Z")


def defaults() -> dict[str, Any]:
    """``slurm.defaults`` from versions.yaml (the only place they are written)."""
    return dict(pins.resolve("slurm.defaults"))


@dataclass
class Resources:
    nodes: int
    gpus_per_node: int
    total_gpus: int
    cpus_per_task: int
    time_minutes: int
    time_hours: float
    timeout_seconds: int  # 0 = no inner timeout
    kill_grace_seconds: int  # SIGKILL this long after the SIGTERM at timeout_seconds (sum <= wall time)
    partition: str
    account: str | None
    requeue: bool
    exclusive: bool
    mem: str | None = None
    notes: list[str] = field(default_factory=list)

    def directives(self) -> list[tuple[str, str | None]]:
        """Resource directives as (option, value) pairs; value None = flag."""
        out: list[tuple[str, str | None]] = [("--partition", self.partition)]
        if self.account:
            out.append(("--account", self.account))
        out += [("--nodes", str(self.nodes)), ("--ntasks-per-node", "1"),
                ("--cpus-per-task", str(self.cpus_per_task))]
        if self.gpus_per_node:
            out.append(("--gres", f"gpu:{self.gpus_per_node}"))
        if self.exclusive:
            out.append(("--exclusive", None))
        if self.mem:
            out.append(("--mem", self.mem))
        if self.nodes > 1:
            out.append(("--wait-all-nodes", "1"))  # start the batch step only when every node has booted
        out.append(("--time", str(self.time_minutes)))
        out.append(("--requeue", None) if self.requeue else ("--no-requeue", None))
        return out


#: Larger than any count or duration a cluster takes; bigger values are typos (and overflow floats).
_MAX_NUMBER = 10 ** 12


def _num(value: Any, name: str, kind=float, minimum: float = 0) -> Any:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    try:
        out = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise TaoError(f"{name}={shown} is not a number: give a {kind.__name__}") from None
    if isinstance(value, bool) or not (minimum <= out <= _MAX_NUMBER) or (kind is float and not math.isfinite(out)):
        raise TaoError(f"{name}={shown} is out of range: it must be >= {minimum} and <= {_MAX_NUMBER}")
    if kind is int and float(value) != out:
        raise TaoError(f"{name}={shown} must be a whole number")
    return out


def _pick(value: Any, env: Mapping[str, str], env_key: str | None, default: Any) -> tuple[Any, bool]:
    """Value and whether the user chose it (the spec's ``value`` beats env beats default)."""
    if value is not None:
        return value, True
    if env_key and env.get(env_key):
        return env[env_key], True
    return default, False


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _env_flag(text: str, name: str) -> bool:
    """An environment switch: true/false (also 1/0, yes/no, on/off)."""
    word = text.strip().lower()
    if word not in _TRUE | _FALSE:
        raise TaoError(f"{name}={text[:20]!r} is not a switch: set it to true or false")
    return word in _TRUE


#: Spec fields that give the wall time; at most one of them.
WALL_TIME_FIELDS = ("time_hours", "time_minutes", "time")
_CLOCK = re.compile(r"(?:(?P<d>[0-9]+)-)?(?P<h>[0-9]+):(?P<m>[0-5]?[0-9]):(?P<s>[0-5]?[0-9])\Z")


def parse_clock(text: str) -> int:
    """``HH:MM:SS`` or ``D-HH:MM:SS`` (SLURM's own forms) -> seconds."""
    m = _CLOCK.match(str(text).strip())
    if not m:
        raise TaoError(f"time {text!r} is not HH:MM:SS or D-HH:MM:SS: write 00:10:00 for ten minutes, "
                       "or use time_minutes / time_hours")
    return ((int(m["d"] or 0) * 24 + int(m["h"])) * 60 + int(m["m"])) * 60 + int(m["s"])


def wall_time_seconds(spec: SlurmSpec | Mapping[str, Any], env: Mapping[str, str],
                      d: Mapping[str, Any] | None = None) -> int:
    """The wall time asked for, in whole seconds: ``time`` (HH:MM:SS), ``time_minutes`` or ``time_hours``
    (else ``SLURM_TIME_HOURS``, else the pinned default). Hours are rounded to the second first, so
    ``0.1667`` h is 600 s (10 minutes), not 11 minutes."""
    spec = SlurmSpec.of(spec)
    d = defaults() if d is None else d
    asked = [k for k in WALL_TIME_FIELDS if getattr(spec, k) is not None]
    if len(asked) > 1:
        raise TaoError(f"give the wall time once: {' and '.join(asked)} are both set (keep one of them)")
    if asked == ["time"]:
        seconds = parse_clock(spec.time)  # type: ignore[arg-type]
    elif asked == ["time_minutes"]:
        seconds = round(_num(spec.time_minutes, "time_minutes") * 60)
    else:
        raw, _ = _pick(spec.time_hours, env, "SLURM_TIME_HOURS", d["time_hours"])
        seconds = round(_num(raw, "time_hours") * 3600)
    if seconds <= 0:
        raise TaoError(f"the wall time must be at least one second: the default is {d['time_hours']} hours")
    return seconds


def inner_timeout(spec: SlurmSpec, env: Mapping[str, str], d: Mapping[str, Any], wall: int) -> tuple[int, int]:
    """(seconds until ``timeout`` sends SIGTERM, seconds until its SIGKILL after that); (0, 0) = none.

    Unset: the SIGKILL lands at the pinned fraction of the wall time (95 %: 3.8 of 4 h), the
    grace inside it (``kill_grace_seconds``, at most a tenth of that budget). Set
    (``timeout_hours`` / ``SLURM_TIMEOUT_HOURS``): SIGTERM then, the grace cut so both fit in
    the wall time. Either way the command is gone before SLURM's own kill.
    """
    grace_pin = int(d["kill_grace_seconds"])
    raw, _ = _pick(spec.timeout_hours, env, "SLURM_TIMEOUT_HOURS", None)
    if raw is None:
        budget = math.floor(wall * float(d["timeout_hours"]) / float(d["time_hours"]))
        grace = min(grace_pin, budget // 10)
        if budget - grace < 1:
            return 0, 0
        return budget - grace, grace
    hours = _num(raw, "timeout_hours")
    if hours == 0:
        return 0, 0
    seconds = round(hours * 3600)
    if seconds < 1:
        raise TaoError(f"timeout_hours {hours:g} is under one second: raise it or use 0")
    if seconds >= wall:
        raise TaoError(
            f"timeout_hours {hours:g} must be below the wall time ({wall // 60} min) so the job can write its "
            "status before SLURM's kill (or 0 to let the wall time end it; unset it for 95 %)")
    return seconds, min(grace_pin, wall - seconds)


def resolve(spec: SlurmSpec | Mapping[str, Any], env: Mapping[str, str] | None = None) -> Resources:
    """Map a job spec's resource fields to concrete, checked values (a mapping is read as its typed spec)."""
    spec = SlurmSpec.of(spec)
    env = os.environ if env is None else env
    d = defaults()
    notes: list[str] = []

    partition, _ = _pick(spec.partition, env, "SLURM_PARTITION", d["partition"])
    partition = ",".join(part.strip() for part in str(partition).split(","))
    if not _PARTITION.match(partition):
        raise TaoError(f"partition {partition!r} is not a comma list of partition names: fix SLURM_PARTITION or --partition")
    account, _ = _pick(spec.account, env, "SLURM_ACCOUNT", None)
    if account is not None and not _ACCOUNT.match(str(account)):
        raise TaoError(f"account {account!r} has characters SLURM accounts do not use: fix SLURM_ACCOUNT or --account")

    wall_seconds = wall_time_seconds(spec, env, d)
    time_hours = wall_seconds / 3600
    max_hours = float(d["max_time_hours"])
    default_parts = {p for p in str(d["partition"]).split(",")}
    if time_hours > max_hours and set(partition.split(",")) <= default_parts:
        raise TaoError(
            f"wall time {time_hours:g} h exceeds the {max_hours:g} h limit of the packaged default partitions "
            f"{d['partition']}: name a partition that allows longer jobs (--partition / SLURM_PARTITION) or ask for <= {max_hours:g} h")
    time_minutes = max(1, math.ceil(wall_seconds / 60))  # SLURM's granularity: whole minutes, rounded up
    timeout_seconds, grace = inner_timeout(spec, env, d, time_minutes * 60)

    max_per_node = _num(given(spec.max_num_gpus_per_node, d["max_num_gpus_per_node"]), "max_num_gpus_per_node", int, 1)
    num_gpus = _num(given(spec.num_gpus, d["num_gpus"]), "num_gpus", int, 0)
    nodes = _num(given(spec.nodes, d["num_nodes"]), "num_nodes", int, 1)
    exclusive = False
    if num_gpus >= max_per_node:
        if num_gpus % max_per_node:
            raise TaoError(
                f"num_gpus {num_gpus} takes whole nodes of {max_per_node} GPUs but is not a multiple of it: "
                f"ask for {num_gpus // max_per_node * max_per_node} or {(num_gpus // max_per_node + 1) * max_per_node}")
        derived = num_gpus // max_per_node
        if nodes not in (1, derived):
            raise TaoError(
                f"num_nodes {nodes} disagrees with num_gpus {num_gpus} at {max_per_node} GPUs per node "
                f"({derived} nodes): drop num_nodes or fix num_gpus")
        if derived != nodes:
            notes.append(f"num_gpus {num_gpus} >= {max_per_node} per node: {derived} whole nodes")
        nodes, gpus_per_node, exclusive = derived, max_per_node, True
    else:
        if num_gpus % nodes:
            raise TaoError(f"num_gpus {num_gpus} cannot be split evenly over num_nodes {nodes}: fix one of them")
        gpus_per_node = num_gpus // nodes

    cpus = _num(given(spec.cpus, d["cpus_per_task"]), "cpus_per_task", int, 1)
    mem = spec.memory
    if mem is not None and not _MEM.match(str(mem)):
        raise TaoError(f"memory {mem!r} is not a SLURM size like 64G or 500M")
    requeue, _ = _pick(spec.use_requeue, env, "SLURM_USE_REQUEUE", d["use_requeue"])
    if spec.use_requeue is None and isinstance(requeue, str):
        requeue = _env_flag(requeue, "SLURM_USE_REQUEUE")
    if not isinstance(requeue, bool):
        raise TaoError("use_requeue must be true or false")
    return Resources(
        nodes=nodes, gpus_per_node=gpus_per_node, total_gpus=nodes * gpus_per_node, cpus_per_task=cpus,
        time_minutes=time_minutes, time_hours=time_minutes / 60, timeout_seconds=timeout_seconds,
        kill_grace_seconds=grace,
        partition=partition, account=str(account) if account else None, requeue=requeue,
        exclusive=exclusive, mem=str(mem) if mem else None, notes=notes)


def cluster_key(spec: SlurmSpec | Mapping[str, Any], env: Mapping[str, str] | None = None) -> str:
    """``cluster_name`` of the spec, else the login hosts; then ``/<partition>`` (nodes of another
    partition are other hardware and another network)."""
    spec = SlurmSpec.of(spec)
    env = os.environ if env is None else env
    name = spec.cluster_name or ",".join(sorted(h.strip() for h in env.get("SLURM_HOSTNAME", "").split(",")
                                                        if h.strip()))
    if not name:
        raise TaoError("cannot name the cluster for the NCCL probe: set SLURM_HOSTNAME (or cluster_name)")
    return f"{name}/{resolve(spec, env).partition}"


# ------------------------------------------------------------------ the partition's node sizes
@dataclass(frozen=True)
class NodeSize:
    """One node of one partition as ``sinfo -N`` has it (``default``: the partition is the cluster's default)."""

    partition: str
    default: bool
    name: str
    cpus: int
    memory_mb: int
    gpus: int


_NODE_LINE = re.compile(r"@@node ([^|\s]+)\|([^|\s]+)\|(\d+)\+?\|(\d+)\+?\|(\S*)")
#: one GRES entry of sinfo's %G: ``gpu:8``, ``gpu:a100:4``, ``gpu:a100:4(S:0-1)``
_GPU_GRES = re.compile(r"gpu(?::[^:,()]+)?:(\d+)")


def node_sizes(text: str) -> list[NodeSize]:
    """The ``@@node PARTITION|NODE|CPUS|MEMORY_MB|GRES`` lines of :data:`taobank.platforms.slurm.remote.MISSING` (other
    lines, and sizes written otherwise, are left out: a size the bank cannot read never refuses a job)."""
    out = []
    for line in text.split("\n"):
        m = _NODE_LINE.fullmatch(line.strip())
        if m is None:
            continue
        gpus = sum(int(g[1]) for g in (_GPU_GRES.match(e) for e in m[5].split(",")) if g)
        out.append(NodeSize(m[1].rstrip("*"), m[1].endswith("*"), m[2], int(m[3]), int(m[4]), gpus))
    return out


#: a partition sinfo names: ``@@part NAME`` (every partition, one without nodes too) or the first field of an
#: ``@@node`` line; a name the job could not name (:data:`_PARTITION`) is no partition of its
_PART_LINE = re.compile(r"@@(?:part ([A-Za-z0-9_.-]+\*?)\Z|node ([A-Za-z0-9_.-]+\*?)\|)")


def partitions(text: str) -> list[str]:
    """The partitions sinfo names in the ``@@part NAME`` and ``@@node PARTITION|...`` lines of
    :data:`taobank.platforms.slurm.remote.MISSING`, the default one marked ``*`` as sinfo marks it; [] when it
    named none (sinfo could not say: nothing is refused for it)."""
    found = (m[1] or m[2] for m in map(_PART_LINE.match, (line.strip() for line in text.split("\n"))) if m)
    return list(dict.fromkeys(found))


def unknown_partition(asked: list[tuple[str, str, str]], known: list[str]) -> str | None:
    """Why sbatch would refuse a submit naming ``asked`` (``(what, partition or comma list, what sets it)``, e.g.
    ``("partition", "gpuu", "--partition or SLURM_PARTITION")``) with ``Invalid partition name specified`` (every
    name of a list must exist), or None: each exists, or sinfo named no partition (``known`` empty: the scheduler
    has the last word). One line naming the partitions there are."""
    names = {k.rstrip("*") for k in known}
    if not names:
        return None
    for what, value, fix in asked:
        bad = [p for p in value.split(",") if p and p not in names]
        if bad:
            have = ", ".join(sorted(k.rstrip("*") + (" (the default)" if k.endswith("*") else "") for k in set(known)))
            named = f"{what} {bad[0]} is not a partition" if len(bad) == 1 else \
                f"{what}s {', '.join(bad)} are not partitions"
            return f"{named} of this cluster (sinfo lists {have}): set {fix} to one of them; nothing was submitted"
    return None


def partition_line(res: Resources, nodes: list[NodeSize]) -> str | None:
    """The gate's line for the job's partition(s) as sinfo has them (how many of its nodes could hold the job),
    None when sinfo listed none of its nodes."""
    mine, fit = _fitting(res, nodes)
    if not mine:
        return None
    where = f"partition {res.partition}" if res.partition else "the default partition"
    return f"{where}: {len({n.name for n in fit})} of its {len({n.name for n in mine})} node(s) can hold the job"


def memory_mb(size: str) -> int:
    """A SLURM size (``64G``, ``500M``, ``1048576K``; a bare number is MB) in MB, rounded up."""
    value, unit = (int(size[:-1]), size[-1]) if size[-1] in "KMGT" else (int(size), "M")
    return math.ceil(value * {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 ** 2}[unit])


def _fitting(res: Resources, nodes: list[NodeSize]) -> tuple[list[NodeSize], list[NodeSize]]:
    """(the nodes of the job's partition(s), or of the default one; those of them that can hold one task of the
    job: its CPUs per task, ``--mem`` and GPUs per node)."""
    wanted = set(res.partition.split(",")) if res.partition else None
    mine = [n for n in nodes if (n.partition in wanted if wanted else n.default)]
    need_mem = memory_mb(res.mem) if res.mem else 0
    return mine, [n for n in mine if n.cpus >= res.cpus_per_task and n.memory_mb >= need_mem
                  and n.gpus >= res.gpus_per_node]


def too_big(res: Resources, nodes: list[NodeSize]) -> str | None:
    """Why the job's partition(s) cannot run ``res`` (``--nodes`` nodes, each with ``--cpus-per-task`` CPUs,
    ``--mem`` and ``--gres gpu:N``: what sbatch refuses outright), or None: it fits, or sinfo said nothing of the
    partition (its scheduler has the last word)."""
    mine, fitting = _fitting(res, nodes)
    if not mine:
        return None
    need_mem = memory_mb(res.mem) if res.mem else 0
    fit = {n.name for n in fitting}
    if len(fit) >= res.nodes:
        return None
    cpus, mem, gpus = (max(n.cpus for n in mine), max(n.memory_mb for n in mine), max(n.gpus for n in mine))
    where = f"partition {res.partition}" if res.partition else "the default partition"
    asks = [text for text, over in ((f"{res.cpus_per_task} CPUs per task", res.cpus_per_task > cpus),
                                    (f"--mem {res.mem}", need_mem > mem),
                                    (f"{res.gpus_per_node} GPUs per node", res.gpus_per_node > gpus)) if over]
    if asks:
        return (f"the job asks {', '.join(asks)}; the largest node of {where} has {cpus} CPUs, {mem}M memory and "
                f"{gpus} GPUs: ask for less or name another partition (nothing was submitted)")
    return (f"the job asks {res.nodes} nodes of {res.cpus_per_task} CPUs, {res.mem or 'the default'} memory and "
            f"{res.gpus_per_node} GPUs; {where} has {len(fit)} such node(s) of {len({n.name for n in mine})}: ask "
            "for fewer nodes or less per node (nothing was submitted)")
