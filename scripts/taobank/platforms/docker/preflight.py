"""tao_docker.py preflight: one line per check, read-only.

Engine reachable (and its version); the NVIDIA runtime or CDI devices; the GPU count; the driver against
the pinned CUDA requirement; each GPU's compute capability against what the images are built for.
With ``no_gpus`` (a CPU-only host) the GPU checks say they were not run instead of failing.
"""
from __future__ import annotations

import glob
import os
import shutil

from ... import pins
from ...contract import Finding, preflight_ok
from ...errors import TaoError
from . import engine as eng
from . import gpus, userns

CDI_DIRS = ("/etc/cdi", "/var/run/cdi")


def _engine(e: eng.Engine) -> tuple[Finding, dict | None]:
    try:
        info = userns.read_info(e)
    except TaoError as exc:
        return Finding("MISSING", "engine", str(exc)), None
    version = userns.version(info)
    where = e.host or "the default socket"
    rootless = userns.rootless(info)
    return Finding("OK", "engine", f"{e.name} engine {version} reachable at {where}"
                   + (" (rootless)" if rootless else ""), data={"version": version, "host": e.host}), info


def _cdi_specs() -> list[str]:
    return sorted(p for d in CDI_DIRS for p in glob.glob(os.path.join(d, "*")) if "nvidia" in os.path.basename(p))


def _runtime(e: eng.Engine, info: dict | None, no_gpus: bool) -> Finding:
    runtimes = sorted((info or {}).get("Runtimes") or {})
    cdi = _cdi_specs()
    hook = shutil.which("nvidia-container-runtime-hook") or shutil.which("nvidia-ctk")
    facts = {"runtimes": runtimes, "cdi_specs": cdi, "toolkit": hook}
    if "nvidia" in runtimes or (e.name == "docker" and hook):
        return Finding("OK", "nvidia_runtime", "NVIDIA Container Toolkit present ("
                       + ("nvidia runtime" if "nvidia" in runtimes else os.path.basename(hook or "")) + ")", data=facts)
    if cdi:
        return Finding("OK", "nvidia_runtime", f"CDI devices: {', '.join(cdi)}", data=facts)
    if no_gpus:
        return Finding("INFO", "nvidia_runtime", "NVIDIA runtime: not checked (--no-gpus: CPU-only jobs)", data=facts)
    gen = "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" if e.name == "podman" else \
        "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker"
    return Finding("MISSING", "nvidia_runtime", "no NVIDIA runtime and no CDI devices: install the NVIDIA Container "
                   f"Toolkit {pins.resolve('gpu_host.nvidia_container_toolkit')}, then {gen}", data=facts)


def run_preflight(engine: str | None = None, *, no_gpus: bool = False) -> dict:
    e = eng.Engine(engine)
    found: list[Finding] = []
    first, info = _engine(e)
    found.append(first)
    found.append(_runtime(e, info, no_gpus))
    try:
        host = gpus.host_gpus()
    except TaoError as exc:
        host, err = [], str(exc)
    else:
        err = ""
    if no_gpus:
        found.append(Finding("INFO", "gpus", "GPU count, driver and compute capability: not checked (--no-gpus)"))
    elif err or not host:
        found.append(Finding("MISSING", "gpus", err or ("no nvidia-smi on this host: install the NVIDIA driver "
                             f"(branch {pins.resolve('gpu_host.driver_branch')}), or pass --no-gpus for CPU-only jobs"
                             if host is None else "nvidia-smi lists no GPU")))
    else:
        found.append(Finding("OK", "gpus", f"{len(host)} GPU(s): " + ", ".join(f"{g.index} {g.name}" for g in host),
                             data=[g.to_dict() for g in host]))
        need = pins.resolve("docker.min_driver_version")
        drivers = sorted({g.driver for g in host})
        ok = all(gpus.driver_ok(d) for d in drivers)
        found.append(Finding("OK" if ok else "MISSING", "driver",
                             f"driver {', '.join(drivers)} " + ("meets" if ok else "is older than")
                             + f" {need} (CUDA {pins.resolve('gpu_host.cuda')})"
                             + ("" if ok else f": update the driver (branch {pins.resolve('gpu_host.driver_branch')})")))
        cap = pins.resolve("docker.min_compute_capability")
        low = [g for g in host if not gpus.capability_ok(g.compute_cap)]
        found.append(Finding("MISSING" if low else "OK", "compute_capability",
                             (f"GPU {', '.join(f'{g.index} ({g.compute_cap})' for g in low)} below compute capability "
                              f"{cap}: the CUDA {pins.resolve('gpu_host.cuda')} images do not run there") if low else
                             f"compute capability {', '.join(sorted({g.compute_cap for g in host}))} >= {cap}"))
    return {"ok": preflight_ok(found), "engine": e.name, "findings": [f.to_dict() for f in found],
            "lines": [line for f in found for line in f.lines()]}
