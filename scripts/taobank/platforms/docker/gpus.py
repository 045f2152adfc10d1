"""The host's GPUs (one ``nvidia-smi`` query) and the check of a job's request against them."""
from __future__ import annotations

import shutil
from dataclasses import dataclass

from ... import pins
from ...errors import TaoError
from ...run import last_line, run
from . import engine as eng

QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name,driver_version,compute_cap,memory.total",
         "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class Gpu:
    index: str
    uuid: str
    name: str
    driver: str
    compute_cap: str
    memory_mib: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def parse(text: str) -> list[Gpu]:
    """nvidia-smi's CSV rows; a row that does not have the six fields is refused in one line."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 6:
            raise TaoError(f"nvidia-smi printed an unexpected row ({line.strip()[:80]!r}): check the driver (nvidia-smi)")
        mem = cells[5]
        out.append(Gpu(cells[0], cells[1], cells[2], cells[3], cells[4], int(mem) if mem.isdigit() else 0))
    return out


def host_gpus() -> list[Gpu] | None:
    """The GPUs the host's driver shows; None when there is no nvidia-smi (no NVIDIA driver here)."""
    if shutil.which("nvidia-smi") is None:
        return None
    res = run(QUERY, check=False, timeout=60, what="nvidia-smi")
    if not res.ok:
        raise TaoError(f"nvidia-smi failed (exit {res.returncode}): {last_line(res.stderr or res.stdout)[:160]}: "
                       "the NVIDIA driver is not working on this host")
    return parse(res.stdout)


def version_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in str(text).strip().split("."))
    except ValueError:
        return ()


def check_request(request: int | str | list[str], found: list[Gpu] | None) -> list[Gpu]:
    """The GPUs a job would get; a request the host cannot meet is refused in one line."""
    if request in (0, []):
        return []
    if not found:
        why = "no nvidia-smi here (no NVIDIA driver)" if found is None else "nvidia-smi lists no GPU"
        raise TaoError(f"the job asks for GPUs ({shown(request)}) but this host has none ({why}): set gpus: 0 for a "
                       "CPU-only run, or run it on a GPU host; nothing was done")
    if request == "all":
        return list(found)
    if isinstance(request, list):
        known = {g.index: g for g in found} | {g.uuid: g for g in found}
        missing = [d for d in request if d not in known]
        if missing:
            have = ", ".join(f"{g.index} ({g.uuid})" for g in found)
            raise TaoError(f"GPU {', '.join(missing)} is not on this host (it has {have}); nothing was done")
        return [known[d] for d in request]
    count = int(request)  # a count: "all" and named devices were taken above
    if count > len(found):
        raise TaoError(f"the job asks for {count} GPUs but this host has {len(found)}: lower gpus; nothing was done")
    return found[:count]


def in_use(host: str | None, besides: str | None = None) -> dict[str, str]:
    """GPU index -> an active Docker job of the engine at ``host`` (None: this machine's) that was given it,
    from the record store (no engine call; a held sweep trial holds none yet)."""
    from ... import records

    out: dict[str, str] = {}
    for rec in records.find(platform="docker", active=True):
        f = eng.DockerFacts.of(rec)
        if rec.id != besides and not f.held and (f.engine_host or None) == (host or None):
            for index in f.gpu_indices.split(","):
                if index:
                    out.setdefault(index, rec.id)
    return out


def sharing(mine: list[str], host: str | None, besides: str | None = None) -> str | None:
    """The gate's warning when GPUs in ``mine`` were given to other active jobs (each job named with its GPUs)."""
    busy = in_use(host, besides)
    by_job: dict[str, list[str]] = {}
    for index in mine:
        if index in busy:
            by_job.setdefault(busy[index], []).append(index)
    if not by_job:
        return None
    who = ", ".join(f"GPU {','.join(idx)} to job {job}" for job, idx in by_job.items())
    return f"warning: {who} (active in the records): the jobs would share them (--gpu-device names other GPUs)"


def shown(request: int | str | list[str]) -> str:
    return ",".join(request) if isinstance(request, list) else str(request)


def driver_ok(driver: str) -> bool:
    return version_tuple(driver) >= version_tuple(str(pins.resolve("docker.min_driver_version")))


def capability_ok(cap: str) -> bool:
    return version_tuple(cap) >= version_tuple(str(pins.resolve("docker.min_compute_capability")))
