"""The ``docker run`` argv of a job: a pure function of the plan (no I/O), so it is property-tested and previewed.

Every value reaches argv as its own element; the image is last before the command, so nothing of
the command is read as the engine's option. Secrets go by NAME (``-e NAME``): the engine copies the
value from the submitting process's environment, so it never appears on argv or in the record.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import redact
from ...contract import RESULTS_VAR
from ...errors import TaoError
from . import engine as eng

#: What the bank itself sets in the container: a spec's env may not override them (the job would lose its folder).
RESERVED_ENV = ("TAO_API_RESULTS_DIR", "TAO_API_JOB_ID", RESULTS_VAR)


@dataclass(frozen=True)
class RunSpec:
    """Everything the argv says, decided by the plan."""

    engine: str
    job_id: str
    image: str
    command: list[str]
    host_results: str
    container_results: str
    user: str
    gpus: int | str | list[str] = 0
    cpus: float | None = None
    memory: str | None = None
    shm_size: str | None = None
    ipc_host: bool = False
    mounts: tuple[tuple[str, str, bool], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    secrets: tuple[str, ...] = ()
    network: str | None = None
    workdir: str | None = None
    labels: dict = field(default_factory=dict)
    #: ``--userns`` (rootless Podman: keep-id); an empty ``user`` means no ``--user`` (a rootless engine)
    userns: str | None = None


def gpu_args(engine: str, gpus: int | str | list[str]) -> list[str]:
    """Docker: ``--gpus N`` / ``--gpus "device=0,2"`` (the NVIDIA Container Toolkit's hook).
    Podman: the CDI devices ``--device nvidia.com/gpu=I`` (podman's own ``--gpus`` only exists since 5.0)."""
    if gpus in (0, [], None):
        return []
    if engine == "podman":
        if gpus == "all":
            return ["--device", "nvidia.com/gpu=all"]
        names = gpus if isinstance(gpus, list) else [str(i) for i in range(int(gpus))]
        return [a for n in names for a in ("--device", f"nvidia.com/gpu={n}")]
    if isinstance(gpus, list):
        return ["--gpus", '"device=' + ",".join(gpus) + '"']  # the CLI reads --gpus as CSV: quote the list
    return ["--gpus", str(gpus)]


def run_argv(s: RunSpec) -> list[str]:
    """``run -d ...`` (the engine's words, without the engine's name)."""
    job_dir = f"{s.container_results}/{s.job_id}"
    argv = ["run", "--detach", "--name", s.job_id, "--init",
            "--label", f"{eng.LABEL_JOB}={s.job_id}", "--label", f"{eng.LABEL_BANK}=true"]
    for key, value in sorted(s.labels.items()):
        argv += ["--label", f"{key}={value}"]
    if s.user:
        argv += ["--user", s.user]
    if s.userns:
        argv += ["--userns", s.userns]
    argv += gpu_args(s.engine, s.gpus)
    if s.cpus is not None:
        argv += ["--cpus", f"{s.cpus:g}"]
    if s.memory:
        argv += ["--memory", s.memory, "--memory-swap", s.memory]  # no swap: over the limit is an OOM kill
    if s.ipc_host:
        argv += ["--ipc", "host"]
    elif s.shm_size:
        argv += ["--shm-size", s.shm_size]
    if s.network and s.network != "default":
        argv += ["--network", s.network]
    argv += ["--mount", f"type=bind,source={s.host_results},target={job_dir}"]
    for host, container, read_only in s.mounts:
        argv += ["--mount", f"type=bind,source={host},target={container}" + (",readonly" if read_only else "")]
    env = [("HOME", "/tmp"), ("TAO_API_RESULTS_DIR", s.container_results), ("TAO_API_JOB_ID", s.job_id),
           (RESULTS_VAR, job_dir), *s.env]
    for key, value in env:
        argv += ["--env", f"{key}={value}"]
    for name in s.secrets:
        argv += ["--env", name]  # by name: the engine reads the value from our environment
    argv += ["--workdir", s.workdir or job_dir]
    return argv + [s.image, *s.command]


def create_argv(s: RunSpec) -> list[str]:
    """``create ...``: the same container as :func:`run_argv`, made but not started (a held sweep trial)."""
    argv = run_argv(s)
    assert argv[:2] == ["run", "--detach"]
    return ["create", *argv[2:]]


def lint_argv(*argvs: list[str]) -> None:
    """The bank's secret lint over the argv (what ``ps`` and ``docker inspect`` show), every job's in one call;
    the value is never echoed."""
    findings = redact.lint_objects(list(argvs), "docker run argv")
    if findings:
        raise TaoError(f"the docker run command line would hold what looks like a secret ({findings[0].rule}): pass "
                       "credentials with --secret-env NAME (the value stays in your environment), never in env or "
                       "the command; nothing was done")
