"""sbatch scripts from templates/slurm/*.sbatch.tmpl (pure: no I/O but lint).

Every value goes through ``taobank.render`` with ``kind="shell"`` (shlex-quoted
by construction, newlines refused). Directive values are further limited to
characters that never need quoting, because sbatch parses ``#SBATCH`` lines
with its own rules, not the shell's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ... import failures, multinode
from ...envfile import check_name
from ...errors import TaoError
from ...render import Raw, render_text
from . import storage
from .resources import Resources, defaults

SINGLE = "slurm/single-node.sbatch.tmpl"
MULTI = "slurm/multi-node.sbatch.tmpl"
RUNTIMES = ("pyxis", "none")
MASTER_PORT_SPAN = 1000
_DIRECTIVE_VALUE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+\Z")
#: What each task unsets: with SLURM_NTASKS set (and a job name other than bash), PyTorch Lightning takes
#: its SLURM mode and waits for one srun task per GPU, which one task per node never starts; a LOCAL_RANK or
#: RANK (the Pyxis PyTorch hook sets both) stops it from starting its own processes too. TAO starts Lightning
#: networks with plain ``python``, so every task presents what NVIDIA's SDK presents: SLURM_JOB_NAME=bash,
#: these unset, SLURM_NODEID kept.
TASK_UNSET = ("SLURM_NTASKS SLURM_NNODES SLURM_PROCID SLURM_LOCALID SLURM_NTASKS_PER_NODE "
              "RANK LOCAL_RANK GROUP_RANK")
#: Runs inside every task of a multi-node job (constant text, quoted as one argument): the rendezvous TAO
#: reads (WORLD_SIZE is the node count), NODE_RANK from the task's own node.
TASK_PROLOGUE = (
    f'export SLURM_JOB_NAME=bash; unset {TASK_UNSET}; '
    'export MASTER_ADDR="$TAO_MASTER_ADDR" MASTER_PORT="$TAO_MASTER_PORT" WORLD_SIZE="$TAO_WORLD_SIZE" '
    'NUM_GPU_PER_NODE="$TAO_NUM_GPU_PER_NODE" NNODES="$TAO_WORLD_SIZE" NPROC_PER_NODE="$TAO_NUM_GPU_PER_NODE" '
    'NODE_RANK="${SLURM_NODEID:?}"; exec -- "$@"'
)
#: The task of a one-node job: any WORLD_SIZE (TAO then takes its multi-node path, even at 1) or rendezvous
#: value a site's container hook injects is dropped; NUM_GPU_PER_NODE stays (the batch step sets it).
SINGLE_TASK_PROLOGUE = (
    f'export SLURM_JOB_NAME=bash; unset {TASK_UNSET} WORLD_SIZE NODE_RANK MASTER_ADDR MASTER_PORT NNODES '
    'NPROC_PER_NODE; exec -- "$@"'
)


@dataclass
class ScriptInput:
    job_id: str  # also the SLURM job name
    job_dir: str
    results_parent: str
    command: Sequence[str]
    resources: Resources
    runtime: str = "pyxis"
    image: str | None = None  # Pyxis form or .sqsh path
    container_mounts: str = ""  # derived by taobank.platforms.slurm.mounts
    env: dict[str, str] = field(default_factory=dict)
    nccl_env: dict[str, str] = field(default_factory=dict)
    has_credentials: bool = False
    #: names in the credentials file: kept out of the environment of the job's own resubmission
    secret_names: Sequence[str] = ()
    dataset_root: str | None = None
    #: None: TAO_MASTER_PORT = the pinned base + the job id modulo MASTER_PORT_SPAN, so two multi-node jobs
    #: sharing a node (or two rendezvous on one host) do not both bind the same port
    master_port: int | None = None
    #: max infrastructure retries the job makes itself (0: none; the status verb may resubmit instead)
    self_retries: int = 0
    #: whether the status verb may resubmit an infrastructure failure (it sources the credentials again)
    poller_retries: bool = True
    #: the wall-time chain (taobank.platforms.slurm.chain), None: the job ends at its wall time
    chain: Any = None
    #: the TAO action (the chain resumes a train action from its sub-folder's checkpoints too)
    action: str = ""
    #: the TAO network (its family names the checkpoints and the resume keys)
    network: str = ""


def check_directive_value(option: str, value: str) -> str:
    if not _DIRECTIVE_VALUE.match(value):
        raise TaoError(
            f"#SBATCH {option} value has characters sbatch directives cannot carry safely (newline, space, "
            "quote, ...; the value is not shown): use letters, digits and _@%+=:,./-")
    return value


def directives(inp: ScriptInput) -> list[tuple[str, str | None]]:
    """The intended ``#SBATCH`` list, checked value by value."""
    log = f"{inp.job_dir}/{storage.LOG_DIR}/%x-%j"
    out: list[tuple[str, str | None]] = [
        ("--job-name", inp.job_id),
        ("--output", f"{log}/main.out"),
        ("--error", f"{log}/main.err"),
        ("--open-mode", "append"),  # a requeued run appends to the same logs
        ("--export", "ALL"),
    ]
    out += inp.resources.directives()
    if inp.chain is not None:
        from .chain import signal_directive

        out.append(signal_directive(inp.chain))
    for opt, value in out:
        if value is not None:
            check_directive_value(opt, value)
    return out


def container_args(inp: ScriptInput) -> list[str]:
    if inp.runtime not in RUNTIMES:
        raise TaoError(f"container runtime {inp.runtime!r} is not supported: use pyxis (default) or none")
    if inp.runtime == "none":
        return []
    if not inp.image:
        raise TaoError("container runtime pyxis needs an image: give --image")
    if not inp.container_mounts:
        raise TaoError("container runtime pyxis needs container mounts (at least the results base)")
    return [f"--container-image={inp.image}", f"--container-mounts={inp.container_mounts}"]


def render(inp: ScriptInput) -> str:
    """The sbatch script text (single- or multi-node template)."""
    if not inp.command or not all(isinstance(a, str) for a in inp.command):
        raise TaoError("command must be a non-empty list of strings")
    for key in list(inp.env) + list(inp.nccl_env):
        check_name(key)
    template = MULTI if inp.resources.nodes > 1 else SINGLE
    command = list(inp.command)
    if inp.resources.nodes > 1:  # each node: its own spec copies, rank 0's name, no silent one-node fallback
        command = multinode.guarded(command, inp.job_id, inp.resources.nodes)
    ctx: dict[str, Any] = {
        "template_name": template.split("/", 1)[1],
        "directives": [(Raw(o), v) for o, v in directives(inp)],
        "job_id": inp.job_id,
        "job_dir": inp.job_dir,
        "results_parent": inp.results_parent,
        "marker_rel": storage.MARKER_FILE,
        "creds_rel": storage.CREDS_FILE if inp.has_credentials else None,
        "env_items": [(Raw(k), v) for k, v in sorted(inp.env.items())],
        "nccl_items": [(Raw(k), v) for k, v in sorted(inp.nccl_env.items())],
        "dataset_root": inp.dataset_root,
        "gpus_per_node": inp.resources.gpus_per_node,
        "nodes": inp.resources.nodes,
        # the chain's USR1 replaces the inner timeout (both would stop the program before the wall time)
        "timeout_seconds": 0 if inp.chain is not None else inp.resources.timeout_seconds,
        "kill_grace_seconds": inp.resources.kill_grace_seconds,
        # srun does not take the batch step's --cpus-per-task on every SLURM release: always say it.
        "cpus_per_task": inp.resources.cpus_per_task,
        "container_args": container_args(inp),
        "command": command,
        "master_port": int(inp.master_port) if inp.master_port else None,
        "master_port_base": int(defaults()["master_port"]),
        "master_port_span": MASTER_PORT_SPAN,
        "task_prologue": TASK_PROLOGUE if inp.resources.nodes > 1 else SINGLE_TASK_PROLOGUE,
        "script_rel": f"sbatch/job_{inp.job_id}.sbatch",
        "self_retry": inp.self_retries > 0,
        # the run's own log is checked for an infrastructure failure: to resubmit itself, or to keep the
        # credentials for the status verb's resubmission
        "infra_check": inp.self_retries > 0 or (inp.has_credentials and inp.poller_retries),
        "max_retries": int(inp.self_retries),
        "infra_pcre": failures.pcre(exclude=failures.REQUEUED_BY_SLURM),
        "secret_names": [check_name(n) for n in sorted(inp.secret_names)],
        "chain": inp.chain,
        "action": inp.action or "-",
        **_chain_shell(inp),
    }
    return render_text(template, ctx, "shell")


def _chain_shell(inp: ScriptInput) -> dict[str, Any]:
    """The checkpoint finder and the argv rewrite of a chained train job (built from the one table)."""
    if inp.chain is None or not inp.chain.resume:
        return {"chain_finder": None, "chain_resume_set": None}
    from ... import checkpoints

    return {"chain_finder": Raw(checkpoints.shell_finder(inp.network or None).rstrip("\n")),
            "chain_resume_set": Raw(checkpoints.resume_set(network=inp.network or None).rstrip("\n"))}


def parse_directives(text: str) -> list[str]:
    """Every ``#SBATCH`` line sbatch would read (it stops at the first command line)."""
    out = []
    for line in text.split("\n")[1:]:  # sbatch splits on \n only
        s = line.strip()
        if s.startswith("#SBATCH"):
            out.append(s[len("#SBATCH"):].strip())
        elif s and not s.startswith("#"):
            break
    return out


def intended_directives(inp: ScriptInput) -> list[str]:
    return [opt if v is None else f"{opt}={v}" for opt, v in directives(inp)]


def lint(text: str, filename: str = "job.sbatch") -> None:
    """``bash -n``, shellcheck and the secret lint; TaoError on the first failure."""
    import os
    import shutil
    import tempfile

    from ...run import last_line, run

    with tempfile.TemporaryDirectory(prefix="tao-sbatch-") as tmp:
        path = os.path.join(tmp, os.path.basename(filename))
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        res = run(["bash", "-n", path], check=False, what="bash -n")
        if not res.ok:
            raise TaoError(f"rendered sbatch script has a syntax error: {last_line(res.stderr)}")
        if shutil.which("shellcheck"):
            res = run(["shellcheck", "-s", "bash", "-S", "warning", "-f", "gcc", path], check=False, what="shellcheck")
            if not res.ok:
                raise TaoError(f"rendered sbatch script fails shellcheck: {last_line(res.stdout or res.stderr)}")
    lint_secrets(text, filename)


def lint_secrets(text: str, filename: str = "job.sbatch") -> None:
    """The secret lint alone (what every preview runs too): TaoError naming rule and line, never the value."""
    from ...redact import lint_text

    findings = lint_text(text, filename)
    if findings:
        f = findings[0]
        raise TaoError(f"rendered sbatch script looks like it holds a secret ({f.rule} at line {f.line}): "
                       "pass secrets by name under 'secrets', never as values")
