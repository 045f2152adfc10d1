"""Docker's submit flags as data (named GPUs, /dev/shm, bind mounts, results folder) and where each value
goes in its job spec. The command line builds the grammar from :data:`FLAGS` (tao_docker.py submit)."""
from __future__ import annotations

from typing import Any, Mapping

from ...errors import UsageError
from .spec import DockerSpec
from ...jobspec import Flag, Shared, merge, put, put_secrets_and_command

SHARED = Shared(aliases={"cpus": ("--cpus-per-task",)},
                help={"cpus": "a CPU quota for the container: 4 or 0.5",
                      "memory": "the container's memory limit (an OOM kill above it): 32g"})

FLAGS = (
    Flag(("--gpu-device",), kind="list", metavar="INDEX|UUID",
         help="a named GPU instead of a count (repeatable): 0, 2 or GPU-<uuid> from nvidia-smi -L"),
    Flag(("--all-gpus",), kind="on", default=False, help="every GPU of the host (--gpus all)"),
    Flag(("--shm-size",), help="/dev/shm size, e.g. 16g (default: versions.yaml docker.defaults.shm_size)"),
    Flag(("--ipc-host",), kind="on", help="share the host's IPC and /dev/shm"),
    Flag(("--results-base", "--results-dir"), dest="results_dir",
         help="results base on the host: the job writes <dir>/<job id> (as SLURM's --results-base)"),
    Flag(("--mount",), kind="list", metavar="HOST:CONTAINER[:rw]",
         help="bind an existing host folder (read-only unless :rw) (repeatable)"),
    Flag(("--secret-env",), kind="list", metavar="NAME",
         help="NAME of a variable of this shell handed to the container by name (repeatable)"),
    Flag(("--secret",), kind="list", hidden=True),  # the other helpers' old spelling
    Flag(("--network",), choices=("default", "none", "host", "bridge")),
    Flag(("--pull",), choices=("missing", "always", "never")),
    Flag(("--stop-grace",), dest="stop_grace_seconds", type=int, metavar="SECONDS",
         help="cancel: SIGTERM, this long, then SIGKILL"),
)

#: the shared flags' values -> this platform's spec keys (one host: no nodes key)
SHARED_KEYS = DockerSpec.flag_keys()
_OWN_KEYS = ("shm_size", "ipc_host", "results_dir", "network", "pull", "stop_grace_seconds")


def spec_from_flags(path: str | None, values: Mapping[str, Any]) -> dict:
    """The spec file at ``path`` (if any) with the given flag values over it (flags win), then validated."""
    from ... import spec as core_spec
    from . import spec as specmod

    spec = core_spec.load_file(path) if path else {}
    if values.get("nodes") not in (None, 1):
        raise UsageError("--nodes: a Docker job runs on this one host (use tao_k8s.py or tao_slurm.py for more nodes)")
    put(spec, values, SHARED_KEYS, convert={"cpus": _quota})
    merge(spec, values, {"env": "env", "nccl_env": "nccl_env"})
    if values.get("all_gpus"):
        spec["gpus"] = "all"
    if values.get("gpu_device"):
        spec.pop("gpus", None)
        spec["gpu_devices"] = list(values["gpu_device"])
    put(spec, values, {key: key for key in _OWN_KEYS})
    for item in values.get("mount") or []:
        parts = item.split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            raise UsageError(f"--mount {item!r}: give HOST:CONTAINER or HOST:CONTAINER:rw (absolute paths)")
        spec["mounts"] = list(spec.get("mounts") or []) + [
            {"host": parts[0], "container": parts[1], "read_only": not (len(parts) == 3 and parts[2] == "rw")}]
    put_secrets_and_command(spec, values)
    return specmod.validate(spec)


def _quota(value: Any) -> float:
    try:
        quota = float(str(value).strip())
    except ValueError:
        quota = 0.0
    if not 0 < quota <= 1024:
        raise UsageError(f"--cpus {str(value).strip()!r}: Docker takes a CPU quota such as 4 or 0.5")
    return quota
