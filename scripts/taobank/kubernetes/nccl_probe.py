"""NCCL probe: a tiny multi-node all-reduce submitted like any job, its verdict cached per cluster.

Before a long multi-node run, prove the pods can all-reduce over NCCL. The probe goes through :func:`verbs.submit` (same gates,
record, no Secret) and :func:`verbs.status`; only the command is special. The
verdict is cached per cluster (kube context + API server URL) in the state dir,
so an "ok" costs nothing the next time. On the local kwok cluster no container
runs: the probe then exercises the lifecycle only, never real NCCL traffic.
"""
from __future__ import annotations

import argparse
import json
import shlex
from datetime import datetime, timezone
from pathlib import Path

from .. import fsio, pins, platform, records
from ..errors import TaoError, UsageError
from . import verbs
from .kubectl import Kubectl

CACHE_FILE = "k8s-nccl-probe.cache.json"  # the dot keeps it out of list_records (stem is no record id)
TIMEOUT_EXIT = 124  # what coreutils ``timeout`` returns when it had to stop the command
WAIT_SLACK_S = 600  # scheduling + image pull on top of --timeout before the agent gives up waiting
ADVICE = ("set TAO_K8S_NCCL_ENV to a file of NCCL_*=value lines for this cluster (NCCL_SOCKET_IFNAME, "
          "NCCL_IB_HCA, ...) and re-probe: tao_k8s.py nccl-probe --force")

# Runs once per GPU under torchrun: one all-reduce of ones; the sum must be the world size.
SCRIPT = """\
import datetime, os, sys
import torch
import torch.distributed as dist
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60))
t = torch.ones(1, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
world = dist.get_world_size()
ok = int(t.item()) == world
print(f"nccl-probe rank {dist.get_rank()}/{world}: all_reduce sum={int(t.item())} {'ok' if ok else 'WRONG'}", flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
"""


def probe_command(timeout: int) -> str:
    """Shell text for ``/bin/sh -c``: torchrun (one process per GPU) under ``timeout``.
    The rendezvous variables come from the pod env the bank sets for multi-node jobs."""
    if int(timeout) < 1:
        raise UsageError("--timeout must be at least 1 second")
    return (f"timeout -k 10 {int(timeout)} torchrun --nnodes=\"$NNODES\" --nproc-per-node=\"$NPROC_PER_NODE\" "
            "--node-rank=\"$NODE_RANK\" --master-addr=\"$MASTER_ADDR\" --master-port=\"$MASTER_PORT\" "
            f"--no-python python3 -c {shlex.quote(SCRIPT)}")


def build_spec(*, nodes: int, gpus: int, image: str | None, timeout: int,
               pod_annotations: list[str] | None = None, node_selector: list[str] | None = None) -> dict:
    """The probe's job spec, through the same flag merge as submit (TAO_K8S_NCCL_ENV applies)."""
    from .specargs import spec_arguments, spec_from_args

    if nodes < 2:
        raise UsageError("--nodes must be at least 2: the probe tests traffic between nodes")
    if gpus < 1:
        raise UsageError("--gpus-per-node must be at least 1: NCCL needs a GPU per process")
    parser = argparse.ArgumentParser(add_help=False)
    spec_arguments(parser)
    args = parser.parse_args([])  # every submit flag at its default, then the probe's values
    args.image = image or pins.resolve("images.nccl_probe")
    args.command = probe_command(timeout)
    args.network_arch, args.action, args.no_results = "nccl-probe", "probe", True
    args.nodes, args.gpus = nodes, gpus
    args.active_deadline_seconds = int(timeout) + WAIT_SLACK_S  # the cluster stops it even if nobody waits
    args.pod_annotation, args.node_selector = pod_annotations, node_selector
    return spec_from_args(args)


def cluster_key(kube: Kubectl) -> str:
    """``<context>@<server URL>`` of the cluster kubectl talks to."""
    view = kube.json("config", "view", "--minify", what="kubectl config view")
    context = kube.context or view.get("current-context") or ""
    clusters = view.get("clusters") or [{}]
    server = (clusters[0].get("cluster") or {}).get("server") or ""
    if not server:
        raise TaoError("cannot tell which cluster kubectl talks to (no server in kubectl config view): "
                       "check KUBECONFIG / --context")
    return f"{context}@{server}"


def cache_path() -> Path:
    return records.state_dir() / CACHE_FILE


def load_cache() -> dict:
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # a damaged cache only costs a re-probe
    return data if isinstance(data, dict) else {}


def save_verdict(key: str, entry: dict) -> None:
    """Atomic mode-600 write (temp file + rename), like the record store."""
    path = cache_path()
    data = load_cache()
    data[key] = entry
    fsio.write_private(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def verdict_of(result: dict) -> str:
    """ok | hang/timeout | not-run | failed, from a terminal status result."""
    if result["state"] == "COMPLETE":
        return "ok"
    if result.get("never_ran"):
        return "not-run"
    if result.get("exit_code") == TIMEOUT_EXIT:
        return "hang/timeout"
    return "failed"


def wait_terminal(job_id: str, deadline_s: float, interval: float) -> dict:
    """Watch the record until it is terminal or the deadline passes (then cancel it)."""
    (view,) = platform.watch(verbs.PLATFORM, [job_id], on_line=lambda line: None, first=interval, cap=interval,
                             deadline=deadline_s)
    result = view.to_dict()
    if view.terminal:
        return result
    if verbs.cancel(job_id)["state"] != "CANCELED":  # it finished meanwhile: take that verdict
        return verbs.status([job_id])[0]
    ran = result["state"] == "RUNNING"  # PENDING this long is scheduling/pull trouble, not NCCL
    return {**result, "state": "CANCELED", "exit_code": TIMEOUT_EXIT if ran else None, "never_ran": not ran,
            "message": f"still {result['state']} after {int(deadline_s)}s ({result.get('message') or ''}): canceled"}


def probe(*, kube: Kubectl, nodes: int = 2, gpus: int = 1, image: str | None = None, timeout: int = 300,
          force: bool = False, interval: float = 5.0, pod_annotations: list[str] | None = None,
          node_selector: list[str] | None = None, max_wait: float | None = None) -> dict:
    """Run (or reuse) the probe; returns {"verdict", "cached", "cluster", "job_id", "message", ...}."""
    spec = build_spec(nodes=nodes, gpus=gpus, image=image, timeout=timeout,
                      pod_annotations=pod_annotations, node_selector=node_selector)
    key = cluster_key(kube)
    cached = load_cache().get(key)
    if cached and cached.get("verdict") == "ok" and not force:
        return {**cached, "cached": True, "cluster": key}
    out = verbs.submit(spec, kube=kube)
    result = wait_terminal(out["id"], max_wait if max_wait is not None else timeout + WAIT_SLACK_S, interval)
    verdict = verdict_of(result)
    entry = {"verdict": verdict, "job_id": out["id"], "state": result["state"], "exit_code": result.get("exit_code"),
             "message": result.get("message") or "", "nodes": nodes, "gpus_per_node": gpus, "image": spec["image"],
             "nccl_env": spec.get("nccl_env") or {},
             "checked_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    save_verdict(key, entry)
    advice = None if verdict == "ok" else ADVICE
    if verdict == "not-run":
        advice = f"the probe pods never started (see tao_k8s.py status {out['id']}): fix that, then re-probe with --force"
    return {**entry, "cached": False, "cluster": key, "advice": advice}
