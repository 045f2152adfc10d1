"""The one way the adapter calls the engine's CLI (docker or podman): argv lists through taobank.run,
the record's engine and host, and the engine's refusals turned into one line a user can act on; the
platform's names, labels and pinned defaults (one place: every module of the adapter calls the engine); and a
record's backend read back typed (:class:`DockerFacts`), the adapter's one reader of what submit recorded."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ... import names, pins, run as runner
from ...errors import TaoError
from ...run import Result, last_line
from ...records import Record

PLATFORM = "docker"
#: Engines whose CLI the adapter drives; podman takes the same words (where it differs, render says so).
ENGINES = ("docker", "podman")
ENGINE_ENV = "TAO_DOCKER_ENGINE"
RESULTS_ENV = "TAO_DOCKER_RESULTS_DIR"
#: Labels on every container the bank starts: the job id, and the bank's mark (docker ps --filter label=...).
LABEL_JOB = "org.tao-skill-bank.job-id"
LABEL_BANK = "org.tao-skill-bank.managed"


def defaults() -> Mapping[str, Any]:
    """The pinned defaults (versions.yaml ``docker.defaults``), read once for every value a plan needs."""
    found = pins.resolve("docker.defaults")
    return found if isinstance(found, Mapping) else {}


def default(key: str, pinned: Mapping[str, Any] | None = None) -> Any:
    """One pinned default: from ``pinned`` (:func:`defaults`, read already) when it has it, else the pins."""
    if pinned is not None and key in pinned:
        return pinned[key]
    return pins.resolve(f"docker.defaults.{key}")


def engine_name(value: str | None = None) -> str:
    """``--engine``, else $TAO_DOCKER_ENGINE, else docker; anything else is refused in one line."""
    name = (value or os.environ.get(ENGINE_ENV) or "docker").strip().lower()
    if name not in ENGINES:
        raise TaoError(f"engine {name!r} is not supported: use docker or podman (--engine or {ENGINE_ENV})")
    return name


@dataclass(frozen=True)
class DockerFacts:
    """A Docker record's backend read back typed (:meth:`of`), with the defaults the adapter always read it with:
    None (or "") for what the record does not hold, since a record an older bank wrote may lack a key."""

    #: the engine the job runs under (None: docker; :func:`engine_of` checks it)
    engine: str | None = None
    #: the engine's address recorded at submit (None: the CLI's default socket)
    engine_host: str | None = None
    #: the container's name: the recorded one, else the job id itself (unique on the host, a DNS label)
    container: str = ""
    #: the job's own results folder: the recorded one, else the record's results_dir
    folder: str = ""
    #: the memory limit the job asked for (``--memory``), named when the kernel kills it for it
    memory: str | None = None
    #: the engine's last reason, as status recorded it
    reason: str | None = None
    #: seconds between SIGTERM and SIGKILL at cancel (None: the pinned default)
    stop_grace_seconds: int | None = None
    #: a sweep trial created but not started yet (it holds no GPU)
    held: bool = False
    #: the GPUs the job was given, comma-separated
    gpu_indices: str = ""
    #: a search's folder (settings, journal), shared by a sweep's trials
    search_dir: str = ""

    @classmethod
    def of(cls, rec: Record) -> "DockerFacts":
        """The record's facts. A value of another type reads as text (falsy stays falsy, None stays None), a
        number that is none as None: the tolerance every read had."""
        b = rec.backend or {}
        v = names.backend_read(b, ("engine", "engine_host", "container", "results_dir", "memory", "reason",
                                   "gpu_indices", "search_dir"), counts=("stop_grace_seconds",))
        return cls(engine=v["engine"], engine_host=v["engine_host"], container=v["container"] or rec.id,
                   folder=v["results_dir"] or rec.results_dir, memory=v["memory"], reason=v["reason"],
                   stop_grace_seconds=v["stop_grace_seconds"], held=bool(b.get("held")),
                   gpu_indices=v["gpu_indices"] or "", search_dir=v["search_dir"] or "")


def engine_of(rec: Record) -> str:
    """The engine a record's job runs under (recorded at submit)."""
    return engine_name(DockerFacts.of(rec).engine or "docker")


def container_of(rec: Record) -> str:
    """The container's name: the job id itself (unique on the host, a DNS label)."""
    return DockerFacts.of(rec).container


def container_results_dir(pinned: Mapping[str, Any] | None = None) -> str:
    return str(default("container_results_dir", pinned)).rstrip("/") or "/results"


#: The variables that point the CLI at an engine; a job's value is recorded so a new shell finds it again.
HOST_ENVS = {"docker": "DOCKER_HOST", "podman": "CONTAINER_HOST"}


def host_now(engine: str) -> str | None:
    """The engine address this shell uses (None: the CLI's default socket)."""
    return os.environ.get(HOST_ENVS[engine]) or None


def _env(engine: str, host: str | None) -> dict[str, str] | None:
    return {HOST_ENVS[engine]: host} if host else None


class Engine:
    """The CLI of one engine at one address."""

    def __init__(self, name: str | None = None, host: str | None = None) -> None:
        self.name = engine_name(name)
        self.host = host if host is not None else host_now(self.name)

    @classmethod
    def of(cls, rec: Record) -> "Engine":
        """The engine (and address) the record's job was started on."""
        facts = DockerFacts.of(rec)
        return cls(engine_name(facts.engine or "docker"), facts.engine_host or None)

    @classmethod
    def grouped(cls, recs: list[Record]) -> list[tuple["Engine", list[Record]]]:
        """``recs`` by the engine (and address) their jobs run on, in first-seen order: one call per engine."""
        groups: dict[tuple[str, str], list[Record]] = {}
        for rec in recs:
            e = cls.of(rec)
            groups.setdefault((e.name, e.host or ""), []).append(rec)
        return [(cls(name, host or None), group) for (name, host), group in groups.items()]

    def argv(self, words: Sequence[str]) -> list[str]:
        return [self.name, *words]

    def run(self, words: Sequence[str], *, check: bool = True, stdin: str | None = None, timeout: float = 120.0,
            what: str | None = None) -> Result:
        """Run ``<engine> WORDS``; a failure with ``check`` is one line naming the cause (no engine, socket
        permission, unknown image ...)."""
        label = what or f"{self.name} {words[0]}"
        try:
            res = runner.run(self.argv(words), stdin=stdin, timeout=timeout, check=False,
                             env=_env(self.name, self.host), what=label)
        except TaoError as exc:
            raise TaoError(explain(self.name, str(exc), label)) from None
        if check and not res.ok:
            raise TaoError(explain(self.name, res.stderr or res.stdout, label, res.returncode))
        return res

    def stream(self, words: Sequence[str], on_text: Callable[[str], None], *, merge_stderr: bool = False) -> int:
        """Run ``<engine> WORDS`` handing its output to ``on_text`` as it comes (pull progress, logs -f)."""
        try:
            return runner.stream(self.argv(words), on_text, env=_env(self.name, self.host),
                                 merge_stderr=merge_stderr)
        except TaoError as exc:
            raise TaoError(explain(self.name, str(exc), f"{self.name} {words[0]}")) from None


def explain(engine: str, text: str, what: str, code: int | None = None) -> str:
    """The engine's error as one actionable line."""
    low = (text or "").lower()
    line = last_line(text or "") or "no output"
    if "not found on path" in low:
        return (f"{engine} not found on PATH: install the engine's CLI (Debian: apt-get install docker.io; "
                f"or podman) or use --engine")
    if "permission denied" in low and (".sock" in low or "connect" in low):
        return (f"{engine}: permission denied on the engine's socket: add your user to the docker group "
                f"(sudo usermod -aG docker $USER, then log in again) or use rootless {engine}; nothing was done")
    # "connection refused" is the engine's only when its socket is named: a registry refusing is not the engine
    if "cannot connect to the docker daemon" in low or "is the docker daemon running" in low \
            or "unable to connect to podman" in low or ("connection refused" in low and ".sock" in low):
        return (f"no {engine} engine answers ({line}): start it (sudo systemctl start {engine}) or point "
                f"{HOST_ENVS[engine]} at it; nothing was done")
    if "did not answer within" in low:
        return f"{what}: the {engine} engine did not answer in time: check it ({engine} info) and retry"
    rc = f" (exit {code})" if code is not None else ""
    return f"{what} failed{rc}: {line}"
