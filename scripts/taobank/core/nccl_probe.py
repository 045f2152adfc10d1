"""NCCL probe core: a tiny multi-node all-reduce run as an ordinary job, its verdict cached per cluster.

Before a long multi-node run, prove the nodes can all-reduce over NCCL. Each
platform supplies only what differs (how it names the cluster, the job spec
and how to submit it); this module owns the all-reduce script, the verdict
rule, the wait, the per-cluster cache and the gate multi-node submits pass.

Two backends run the same check (an all-reduce of ones whose sum must be the
world size): ``nccl`` (the default: torchrun, one process per GPU, NCCL over
the GPUs) and ``gloo-cpu`` (one process per node, PyTorch's gloo over TCP on
the CPU: it proves the rendezvous and the network path between the nodes, not
NCCL over GPUs; it runs where no GPU is, such as the bank's local clusters).
Every verdict says which backend proved what (:data:`PROVES`).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

from ..states import State
from .. import pins
from . import platform
from . import nccl_verdicts
from .nccl_verdicts import (CACHE_FILE, STAMP, age_days, cache_path, cached, fresh_ok, load_cache, require_ok,
                            save_verdict)
from ..contract import SubmitOptions
from ..errors import TaoError, UsageError

TIMEOUT_EXIT = 124  # what coreutils ``timeout`` returns when it had to stop the command
WAIT_SLACK_S = 600  # scheduling + image pull on top of --timeout before the agent gives up waiting

#: The probe backends: NCCL over GPUs (default), or gloo over TCP on the CPU.
BACKENDS = ("nccl", "gloo-cpu")
#: What an ok verdict of each backend proves (said by the probe, the cache and the gate).
PROVES = nccl_verdicts.PROVES

# Runs once per GPU under torchrun: one all-reduce of ones; the sum must be the world size.
SCRIPT = """\
import datetime, os, sys
import torch
import torch.distributed as dist
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=RENDEZVOUS_S))
t = torch.ones(1, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
world = dist.get_world_size()
ok = int(t.item()) == world
print(f"nccl-probe rank {dist.get_rank()}/{world}: all_reduce sum={int(t.item())} {'ok' if ok else 'WRONG'}", flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
"""

# Runs once per node (no torchrun): gloo over TCP on the CPU, rendezvous from the bank's multi-node
# variables (MASTER_ADDR, MASTER_PORT, NODE_RANK, NNODES); the same check. No PyTorch: exit 127.
GLOO_CPU_SCRIPT = """\
import datetime, os, socket, sys
try:
    import torch
    import torch.distributed as dist
except ImportError as exc:
    print(f"gloo-cpu probe: PyTorch is not installed here ({exc})", file=sys.stderr, flush=True)
    sys.exit(127)
rank, world = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
addr, port = os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]
dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=RENDEZVOUS_S))
t = torch.ones(1)
dist.all_reduce(t)
ok = int(t.item()) == world
node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
print(f"gloo-cpu probe rank {rank}/{world} on {node}: all_reduce sum={int(t.item())} "
      f"{'ok' if ok else 'WRONG'}", flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
"""


#: What the NCCL probe exits with where PyTorch sees no CUDA GPU (before torchrun starts anything).
NO_GPU_EXIT = 3
_GPU_CHECK = ("import sys\ntry:\n    import torch\nexcept ImportError as exc:\n"
              "    print(f'nccl-probe: PyTorch is not installed here ({exc})', file=sys.stderr); sys.exit(127)\n"
              "if not torch.cuda.is_available():\n"
              "    print('nccl-probe: PyTorch sees no CUDA GPU here: NCCL cannot run (use GPU nodes, or "
              "--backend gloo-cpu to prove only the network path)', file=sys.stderr); sys.exit(3)\n")


def one_line_python(script: str) -> str:
    """``script`` as one line of Python (an sbatch value may not hold a newline): base64, run with exec."""
    import base64

    return f"import base64; exec(base64.b64decode('{base64.b64encode(script.encode()).decode()}'))"


def gpu_precheck() -> str:
    """Shell text run before torchrun by the NCCL probe: no PyTorch exits 127, no CUDA GPU exits
    :data:`NO_GPU_EXIT` (a verdict of its own, not an NCCL failure). Skipped where python3 is missing
    (torchrun then says so: 127)."""
    import shlex

    return f"if command -v python3 >/dev/null 2>&1; then python3 -c {shlex.quote(one_line_python(_GPU_CHECK))} || exit $?; fi; "


def probe_command(timeout: int, backend: str = "nccl", *, one_line: bool = False) -> str:
    """Shell text run on every node (``/bin/sh -c`` in a pod, an srun task) under coreutils ``timeout``, the
    rendezvous variables (NNODES, NPROC_PER_NODE, NODE_RANK, MASTER_ADDR, MASTER_PORT) set by the bank's
    multi-node job: nccl, torchrun with one process per GPU (underscore options, which every torchrun release
    reads) after the GPU check; gloo-cpu, one python3 per node. ``one_line``: the script as one line (SLURM)."""
    import shlex

    if int(timeout) < 1:
        raise UsageError("--timeout must be at least 1 second")
    script = script_for(backend, timeout)
    script = shlex.quote(one_line_python(script) if one_line else script)
    if backend == "gloo-cpu":
        return f"timeout -k 10 {int(timeout)} python3 -c {script}"
    return (gpu_precheck() + f"timeout -k 10 {int(timeout)} torchrun --nnodes=\"$NNODES\" "
            "--nproc_per_node=\"$NPROC_PER_NODE\" --node_rank=\"$NODE_RANK\" --master_addr=\"$MASTER_ADDR\" "
            f"--master_port=\"$MASTER_PORT\" --no_python python3 -c {script}")


def check_request(nodes: int, gpus: int, backend: str) -> int:
    """Refuse a probe that would prove nothing; the GPUs per node it asks for (gloo-cpu: none)."""
    check_backend(backend)
    if nodes < 2:
        raise UsageError("--nodes must be at least 2: the probe tests traffic between nodes")
    if gpus < 1 and backend == "nccl":
        raise UsageError("--gpus-per-node must be at least 1: NCCL needs a GPU per process")
    return 0 if backend == "gloo-cpu" else gpus


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise TaoError(f"probe backend {backend!r} is not one of {', '.join(BACKENDS)}")
    return backend


def script_for(backend: str, timeout: int = 300) -> str:
    """The Python each probe process runs. Its rendezvous waits the whole ``timeout`` for the other nodes: their
    pods or tasks may start minutes apart (an image pulled on one node only), which is no network fault."""
    script = GLOO_CPU_SCRIPT if check_backend(backend) == "gloo-cpu" else SCRIPT
    return script.replace("RENDEZVOUS_S", str(int(timeout)))


def backend_of(entry: dict[str, Any] | None) -> str:
    """A cached verdict's backend (verdicts from before backends existed were NCCL's)."""
    return str((entry or {}).get("backend") or "nccl")


#: Exit codes of a shell that found no program to run (127) or could not run it (126).
MISSING_EXITS = (126, 127)
#: What a backend says of an image it could not pull (Kubernetes reasons, enroot's words on SLURM).
_PULL_WORDS = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "image pull", "pull access denied",
               "unauthorized", "Could not process JSON input", "enroot-import")


def verdict_of(result: dict[str, Any]) -> str:
    """The probe's verdict by cause, from a terminal status result: ok | hang/timeout | program-missing |
    no-gpu (the NCCL probe found no CUDA GPU) | pull-failed | not-run | failed (the collective itself failed)."""
    if result["state"] == State.COMPLETE:
        return "ok"
    said = " ".join(str(result.get(k) or "") for k in ("message", "reason"))
    if any(word.lower() in said.lower() for word in _PULL_WORDS):
        return "pull-failed"
    if result.get("never_ran"):
        return "not-run"
    if result.get("exit_code") == TIMEOUT_EXIT:
        return "hang/timeout"
    if result.get("exit_code") in MISSING_EXITS:
        return "program-missing"
    if result.get("exit_code") == NO_GPU_EXIT and result.get("backend", "nccl") == "nccl":
        return "no-gpu"
    return "failed"


def advice_for(verdict: str, *, helper: str, job_id: str, network_advice: str) -> str | None:
    """What to do about a probe that did not pass, by its cause (NCCL variables only when NCCL is the cause)."""
    if verdict == "ok":
        return None
    again = f"then re-probe with {helper} nccl-probe --force"
    return {
        "not-run": f"the probe never started (see {helper} status {job_id}): fix that, {again}",
        "pull-failed": (f"the probe's image could not be pulled (see {helper} status {job_id}): give it a pull "
                        f"secret (--ngc-pull-secret or --image-pull-secret on Kubernetes; enroot credentials on "
                        f"SLURM: {helper} enroot-credentials), {again}"),
        "no-gpu": (f"PyTorch saw no CUDA GPU where the probe ran (see {helper} logs {job_id}): probe on GPU nodes "
                   f"(--partition / --node-selector) with a CUDA PyTorch image, {again}; on a cluster without "
                   f"GPUs, --backend gloo-cpu proves the network path between nodes (not NCCL over GPUs)"),
        "program-missing": (f"the probe's program was not found (exit 127: torchrun or python3 with PyTorch is not in "
                            f"the image or on the nodes; see {helper} logs {job_id}): probe with an image that has "
                            f"PyTorch (--image), {again}"),
    }.get(verdict, network_advice)


def wait_terminal(platform_name: str, job_id: str, deadline_s: float, interval: float) -> dict[str, Any]:
    """Watch the job until it is terminal or the deadline passes (then cancel it)."""
    (view,) = platform.watch(platform_name, [job_id], on_line=lambda line: None, first=interval, cap=interval,
                             deadline=deadline_s)
    result = view.to_dict()
    if view.terminal:
        return result
    views, errors = platform.cancel(platform_name, [job_id])
    if errors:
        raise TaoError(f"NCCL probe {job_id} outlived its wait and cancel failed: {errors[0]}")
    if views[0].state != State.CANCELED:  # it finished meanwhile: take that verdict
        return platform.status(platform_name, [job_id], retry=False)[0].to_dict()
    ran = result["state"] == State.RUNNING  # PENDING this long is scheduling/pull trouble, not NCCL
    return {**result, "state": State.CANCELED, "exit_code": TIMEOUT_EXIT if ran else None, "never_ran": not ran,
            "message": f"still {result['state']} after {int(deadline_s)}s ({result.get('message') or ''}): canceled"}


def run(platform_name: str, cluster: str, spec: dict[str, Any], submit: Callable[[dict[str, Any]], str], *, nodes: int,
        gpus_per_node: int, timeout: int, helper: str, advice: str, force: bool = False, interval: float = 5.0,
        max_wait: float | None = None, backend: str = "nccl") -> dict[str, Any]:
    """Run (or reuse) the probe; returns {"verdict", "cached", "cluster", "job_id", "message", "advice", ...}.

    ``submit`` sends ``spec`` through the platform's ordinary submit and returns the job id;
    ``helper`` is the script name the advice tells the user to run again.
    """
    entry = cached(platform_name, cluster)
    if fresh_ok(entry) and not force and backend_of(entry) == check_backend(backend):
        return {**entry, "backend": backend, "proves": PROVES[backend], "cached": True, "cluster": cluster}
    job_id = submit(spec)
    result = wait_terminal(platform_name, job_id, max_wait if max_wait is not None else timeout + WAIT_SLACK_S,
                           interval)
    verdict = verdict_of({**result, "backend": backend})
    entry = {"verdict": verdict, "job_id": job_id, "state": result["state"], "exit_code": result.get("exit_code"),
             "message": result.get("message") or "", "nodes": nodes,
             "gpus_per_node": gpus_per_node, "image": spec.get("image"),
             "nccl_env": spec.get("nccl_env") or {}, "backend": backend,
             "checked_at": datetime.now(timezone.utc).strftime(STAMP)}
    if verdict == "ok":
        entry["proves"] = PROVES[backend]
    save_verdict(platform_name, cluster, entry)
    note = advice_for(verdict, helper=helper, job_id=job_id, network_advice=advice)
    return {**entry, "cached": False, "cluster": cluster, "advice": note}



def probe(platform_name: str, cluster: str, spec: dict[str, Any], opts: SubmitOptions, *, nodes: int, gpus: int,
          backend: str, timeout: int, advice: str, **kw: Any) -> dict[str, Any]:
    """:func:`run` with ``spec`` sent through the platform's ordinary submit (same gates and record)."""
    adapter = platform.get(platform_name)
    return run(adapter.name, cluster, spec, lambda s: adapter.submit(s, opts).id, nodes=nodes,
               gpus_per_node=check_request(nodes, gpus, backend), timeout=timeout, helper=adapter.helper,
               advice=advice, backend=backend, **kw)


#: The verdict cache and gate live in :mod:`taobank.core.nccl_verdicts`; named here too for the probe's callers.
__all__ = ["SCRIPT", "one_line_python", "gpu_precheck", "probe_command", "check_request", "probe", "GLOO_CPU_SCRIPT", "BACKENDS", "PROVES", "script_for", "backend_of", "check_backend", "TIMEOUT_EXIT", "WAIT_SLACK_S", "MISSING_EXITS", "verdict_of", "advice_for", "wait_terminal", "run", "pins",
           "CACHE_FILE", "STAMP", "age_days", "cache_path", "cached", "fresh_ok", "load_cache", "require_ok",
           "save_verdict"]
