"""A stand-in for TAO's PyTorch entrypoint (``dino train -e spec.yaml key=value ...``) on the local clusters.

It decides the GPU and node counts the way nvidia_tao_pytorch/core/entrypoint.py (``launch``) does, because
that is what the bank must feed: TAO does not look at the GPUs a scheduler gave the job, only at its own
command line (found by substring), else the spec file's section of the action, else one GPU on one node;
a WORLD_SIZE in the environment (TAO's meaning: the number of NODES) switches to the multi-node branch,
which takes the node count from WORLD_SIZE and the GPUs per node from NUM_GPU_PER_NODE. It then sets
TAO_VISIBLE_DEVICES and runs ``python <train script> <overrides>`` for a Lightning network, as TAO does;
Lightning itself starts one process per device (tao_train.py).

Before that it records what the task's own environment looked like (TAO_STANDIN_TASK_ENV, inherited by
every process Lightning starts), because Lightning rewrites WORLD_SIZE/LOCAL_RANK/NODE_RANK for its children:
the tests need to see what the bank gave the task, not what Lightning made of it.

Pure Python 3, no third-party import at module level: the unit tests import :func:`gpu_counts` directly.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

#: The actions whose GPU counts TAO reads (``launch``'s list); other actions run on one GPU.
GPU_ACTIONS = ("train", "evaluate", "inference", "distill")
#: TAO's ``overrides``: any of these in the command line means "read the counts from the command line".
OVERRIDES = ("num_gpus", "gpu_ids", "cuda_blocking")
#: What TAO's multi-node branch needs (its validate_configs): without them it falls back to one node.
MULTINODE_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK")
#: The task variables the tests ask about (recorded before Lightning touches any of them).
TASK_KEYS = ("WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "NUM_GPU_PER_NODE", "RANK", "LOCAL_RANK",
             "GROUP_RANK", "SLURM_NTASKS", "SLURM_JOB_NAME", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
             "SLURMD_NODENAME")
ENV_SNAPSHOT = "TAO_STANDIN_TASK_ENV"


def _spec_counts(spec_file: str | None, action: str) -> dict:
    """The spec file's ``<action>`` section (distill reads ``train``), as TAO falls back to it."""
    if not spec_file:
        return {}
    import yaml  # only when a spec file is given (Debian's python3-yaml on the local clusters)

    with open(spec_file, encoding="utf-8") as fh:
        config = yaml.safe_load(fh) or {}
    section = config.get("train" if action == "distill" else action) or {}
    return section if isinstance(section, dict) else {}


def multinode_error(env: dict, spec_file: str | None) -> str | None:
    """What makes TAO's multi-node branch fail on this node (entrypoint.py ``launch`` with WORLD_SIZE set), None
    when it goes through: a rendezvous variable missing, MASTER_ADDR not resolving (validator.py
    ``validate_configs``: ``socket.gethostbyname``), then the spec file not rewritable (TAO writes its ``train``
    section back IN PLACE, on every node). TAO then logs two warnings and runs the node with --nnodes=1."""
    missing = [key for key in MULTINODE_ENV if not env.get(key)]
    if missing:
        return f"{', '.join(missing)} not set"
    import socket

    try:
        socket.gethostbyname(env["MASTER_ADDR"])
    except OSError as exc:
        # TAO says only its own words; the stand-in also says why (a miss or a DNS timeout), for a failed test
        print(f"tao stand-in: resolving {env['MASTER_ADDR']}: {exc}", file=sys.stderr, flush=True)
        return f"Invalid master address: {env['MASTER_ADDR']}"
    if spec_file:
        import yaml

        try:
            with open(spec_file, encoding="utf-8") as fh:
                config = yaml.safe_load(fh)
            train = config.get("train", {})  # an empty (just truncated) file: None has no .get, as in TAO
            if train:
                with open(spec_file, "w", encoding="utf-8") as fh:
                    yaml.safe_dump(config, fh, default_flow_style=False)
        except Exception as exc:  # noqa: BLE001  (TAO catches everything here)
            return str(exc)
    return None


def gpu_counts(action: str, unknown_args: list[str], env: dict, spec_file: str | None = None,
               error: str | None = None) -> dict:
    """TAO's rule, step by step (entrypoint.py ``launch``): ``num_gpus``, ``gpu_ids`` (a list), ``num_nodes``
    (an int), whether the multi-node branch was taken, and the ``TAO_VISIBLE_DEVICES`` it sets. ``error``: what
    made the multi-node branch fail on this node (:func:`multinode_error`; a missing variable is found here)."""
    # TAO joins the unknown args with a leading space and searches the text, not the words.
    text = " " + " ".join(unknown_args)
    num_gpus, gpu_ids, num_nodes = 1, [0], 1
    if action in GPU_ACTIONS:
        if any(key in text for key in OVERRIDES):
            if "num_gpus" in text:
                num_gpus = int(text.split("num_gpus=")[1].split()[0])
            if "gpu_ids" in text:
                gpu_ids = ast.literal_eval(text.split("gpu_ids=")[1].split()[0])
            # TAO keeps this one as text; the Lightning script reads its own count from the config
            if "num_nodes" in text:
                num_nodes = text.split("num_nodes=")[1].split()[0]
        else:
            section = _spec_counts(spec_file, action)
            num_gpus = section.get("num_gpus", num_gpus)
            gpu_ids = section.get("gpu_ids", gpu_ids)
            num_nodes = section.get("num_nodes", num_nodes)
    if num_gpus != len(gpu_ids):  # TAO: the larger wins, the ids become 0..n-1
        num_gpus = max(num_gpus, len(gpu_ids))
        gpu_ids = gpu_ids if len(gpu_ids) == num_gpus else list(range(num_gpus))
    multinode = False
    if env.get("WORLD_SIZE"):
        missing = [key for key in MULTINODE_ENV if not env.get(key)]
        error = error or (f"{', '.join(missing)} not set" if missing else None)
        if error:  # TAO logs its two [Multinode] warnings (on stderr) and runs on one node
            print(f"tao stand-in - WARNING - [Multinode] Error overriding configs: {error}", file=sys.stderr, flush=True)
            print("tao stand-in - WARNING - [Multinode] Using default configs.", file=sys.stderr, flush=True)
            num_nodes = 1
        else:
            multinode = True
            num_nodes = int(env["WORLD_SIZE"])  # TAO's WORLD_SIZE is the NUMBER OF NODES
            num_gpus = int(env.get("NUM_GPU_PER_NODE", 0))  # TAO's fallback, cuda.device_count(), is 0 here
            gpu_ids = list(range(num_gpus))
    return {"num_gpus": num_gpus, "gpu_ids": gpu_ids, "num_nodes": int(num_nodes), "multinode": multinode,
            "visible_devices": str(gpu_ids)[1:-1]}


def slurm_detected(env: dict) -> bool:
    """Lightning's SLURMEnvironment.detect() (lightning_fabric ``_is_srun_used``), without importing Lightning."""
    return "SLURM_NTASKS" in env and env.get("SLURM_JOB_NAME") not in ("bash", "interactive")


def task_snapshot(env: dict) -> dict:
    """What the tests need to know about the task's own environment."""
    return {"slurm_detect": slurm_detected(env), "present": {k: env[k] for k in TASK_KEYS if k in env}}


def _split(argv: list[str]) -> tuple[str, str | None, list[str]]:
    """``<action> [-e SPEC] key=value ...`` -> (action, spec file, the other args)."""
    if not argv:
        raise SystemExit("usage: <network> <action> [-e spec.yaml] [key=value ...]")
    action, rest, spec, unknown = argv[0], argv[1:], None, []
    i = 0
    while i < len(rest):
        if rest[i] in ("-e", "--experiment_spec_file") and i + 1 < len(rest):
            spec = rest[i + 1]
            i += 2
            continue
        unknown.append(rest[i])
        i += 1
    return action, spec, unknown


def main(network: str, argv: list[str] | None = None) -> int:
    action, spec, unknown = _split(list(sys.argv[1:] if argv is None else argv))
    error = multinode_error(dict(os.environ), spec) if os.environ.get("WORLD_SIZE") else None
    counts = gpu_counts(action, unknown, dict(os.environ), spec, error)
    env = dict(os.environ)
    env[ENV_SNAPSHOT] = json.dumps(task_snapshot(os.environ), sort_keys=True)
    env["TAO_VISIBLE_DEVICES"] = counts["visible_devices"]
    print(f"tao stand-in: {network} {action}: num_gpus={counts['num_gpus']} num_nodes={counts['num_nodes']} "
          f"multinode={counts['multinode']} TAO_VISIBLE_DEVICES={counts['visible_devices']}", flush=True)
    if action not in GPU_ACTIONS:
        print(f"tao stand-in: {action} is not a GPU action here", file=sys.stderr)
        return 2
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tao_train.py")
    # TAO: "python " + script + script_args + unknown args (the spec file goes along as -e)
    call = [sys.executable, script, *(["-e", spec] if spec else []), *unknown]
    return subprocess.call(call, env=env)
