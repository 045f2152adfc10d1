"""Sweeps on SLURM: ONE job array (``--array=0-(N-1)%K``) over every trial, in at most 3 remote commands.

Each trial is staged as an ordinary job (its own folder, script, record), so its logs, status, cancel and
retry work as for any job; the array's one script only picks the trial of its task and runs that trial's
script, its output going to the trial's log folder ``<name>-<array id>_<task>``. The commands: the check
(``test -e``, the core's gate), ONE staging of every folder (which first compares N with the cluster's
``MaxArraySize``), ONE ``sbatch``.
"""
from __future__ import annotations

import dataclasses
import posixpath
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ...contract import UNSET, Batch, Facts, Gate, Launch
from ...jobspec import given
from ...errors import TaoError
from . import chain, facts, render, storage
from .submit import SlurmPlan, _staged_files, script_input
from ...records import Record

if TYPE_CHECKING:
    from .spec import SlurmSpec

#: $1 the jobs folder (parent of every staged folder), $2 the number of trials; then folders to make.
#: stdin: base64 tar relative to $1. Refused before anything is written when N > MaxArraySize.
STAGE_MANY = r'''
root=$1; n=$2; shift 2
max=$(scontrol show config 2>/dev/null | sed -n 's/^MaxArraySize *= *\([0-9][0-9]*\).*/\1/p')
if [ -n "$max" ] && [ "$n" -gt "$max" ]; then
  echo "the sweep has $n trials but this cluster's MaxArraySize is $max: split it into sweeps of at most $max trials (nothing was submitted)" >&2
  exit 7
fi
umask 077
mkdir -p -- "$root" "$@" || exit 3
base64 -d | tar -x -o -f - -C "$root" || exit 3
'''

#: $1 the array script. Prints the array's job id.
SBATCH_ARRAY = r'''
out=$(sbatch --parsable "$1") || exit 3
jid=${out%%;*}
case $jid in ''|*[!0-9]*) echo "unexpected sbatch answer: $out" >&2; exit 4;; esac
echo "$jid"
'''

#: The array task's job: pick the trial, send its output to the trial's log folder, run its script.
DISPATCH = r'''
set -o pipefail
i=${SLURM_ARRAY_TASK_ID:?not an array task}
name=${tao_names[$i]:?no trial $i}
ref="${SLURM_ARRAY_JOB_ID}_${i}"
log="${tao_dirs[$i]}/slurm-logs/$name-$ref"
mkdir -p -- "$log"
# the trial's script reads these: its log folder, its record's job reference and its own name (a job the trial
# resubmits, an infrastructure retry or the wall-time chain's next attempt, runs without TAO_SLURM_JOB_REF)
export SLURM_JOB_NAME="$name" TAO_SLURM_JOB_REF="$ref"
echo "tao: sweep trial $i ($name) in array task $ref"
exec bash "${tao_scripts[$i]}" >> "$log/main.out" 2>> "$log/main.err"
'''



def check_search_site(sp: SlurmPlan, gate: Gate, search: Any) -> None:
    """A search needs a shared folder where creating a symbolic link is exclusive (Optuna's journal lock) and a
    ``python3`` of 3.10 or later with numpy where its trials run: one line naming what to change when not."""
    conn, p = sp.conn, sp.decided
    assert conn is not None and p is not None
    if p.chain is not None:  # a resubmitted attempt would ask the study again and resume another trial's checkpoint
        raise TaoError("a search's trials cannot chain wall-time runs yet (--max-attempts/--max-total-time): give each "
                       "trial a wall time that holds its epochs (nothing was submitted)")
    host = conn.connect().entry
    database = bool(search.settings.storage_env)
    # the one rule of every platform (taobank.campaign.search.site), ONE command on the login host, leaving nothing behind;
    # runtime none: the trials' runner runs on the nodes' python3, as on the login host, so that one is tested too
    script, words = search.site(p.base, python=p.runtime == "none")
    res = conn.script(script, words, what="search site check")
    said = search.site_problems(res.stdout)
    refused = search.site_refusal(
        said, base=p.base, where=f"on {host}", nothing="nothing was submitted",
        python_fix=f"runtime none runs each search trial's runner with the nodes' python3, and {host}'s is missing, "
                   "older than 3.10 or without numpy: install Python 3.10+ with numpy there, or run the trials in an "
                   "image that has it")
    if "unchecked" in said and "no-write" not in said and "no-lock" not in said:  # said before a python3 finding
        raise TaoError(f"the search's site check did not finish on {host} ({res.stdout.strip()[-200:] or 'no output'})"
                       " (nothing was submitted)")
    if refused:
        raise TaoError(refused)
    checked = [w for w, on in (("journal lock", not database), ("python3 with numpy", p.runtime == "none")) if on]
    gate.lines.append(f"search site ok on {host} ({', '.join(checked) or 'writable'})")


@dataclass(kw_only=True)
class TrialFacts(Facts):
    """What the record keeps of one trial of a sweep's array job: where it was staged, how it is retried, and
    (once the array is submitted) its array task and folders."""

    staged_dir: str
    results_dir: str
    script: str
    login_host: str
    job_name: str
    staged_secrets: bool
    self_retry: bool
    #: the wall-time chain, when the job asked for one
    walltime_chain: bool = UNSET
    max_attempts: int = UNSET
    infra_retries: bool
    #: set once sbatch answered
    slurm_job_id: str = UNSET
    array_job_id: str = UNSET
    job_dir: str = UNSET
    log_dir: str = UNSET
    #: a search's folder (the bundle, the settings, the study's journal), shared by every trial
    search_dir: str = UNSET

def array_script(sweep_id: str, sweep_dir: str, first: render.ScriptInput, names: list[str], dirs: list[str],
                 scripts: list[str], max_concurrent: int) -> str:
    """The one sbatch script of the array: the trials' resources, the array range, the dispatcher."""
    n = len(names)
    log = f"{sweep_dir}/{storage.LOG_DIR}/%x-%A_%a"
    heads: list[tuple[str, str | None]] = [("--job-name", sweep_id), ("--output", f"{log}.out"), ("--error", f"{log}.err"),
             ("--array", f"0-{n - 1}%{max_concurrent}"), ("--export", "ALL")]
    heads += first.resources.directives()
    if first.chain is not None:  # the trials' wall-time chain: each task's batch shell (the trial's script) gets USR1
        heads.append(chain.signal_directive(first.chain))
    lines = ["#!/bin/bash"]
    for opt, value in heads:
        lines.append(f"#SBATCH {opt}" if value is None else f"#SBATCH {opt}={render.check_directive_value(opt, value)}")
    lines.append(f"# A tao-skill-bank sweep of {n} trials: each array task runs its trial's own staged script.")
    for var, values in (("tao_names", names), ("tao_dirs", dirs), ("tao_scripts", scripts)):
        lines.append(f"{var}=(" + " ".join(shlex.quote(v) for v in values) + ")")
    return "\n".join(lines) + DISPATCH


def array_for(sweep_id: str, base: str, first: render.ScriptInput, ids: list[str], max_concurrent: int) -> str:
    """The array script of the trials ``ids`` staged under ``base`` (each trial's folder and script where the
    launch stages them): what the launch sends (after its lint) and the dry run shows."""
    dirs = [storage.job_dir(base, jid) for jid in ids]
    scripts = [posixpath.join(d, f"sbatch/job_{jid}.sbatch") for d, jid in zip(dirs, ids)]
    return array_script(sweep_id, storage.job_dir(base, sweep_id), first, ids, dirs, scripts, max_concurrent)


def preview(specs: Sequence[SlurmSpec | Mapping[str, Any]], ids: list[str], batch: Batch,
            env: Mapping[str, str] | None = None
            ) -> tuple[str, list[tuple[str, str]], list[str]]:
    """(the array script, each trial's script, each trial's results folder) as the launch renders them,
    contacting nothing; refused as the launch refuses a script holding a credential."""
    from .submit import plan

    assert batch.sweep is not None
    decided = [plan(spec, env, need_secrets=False) for spec in specs]
    first = decided[0]
    image = (first.sqsh or first.pyxis_image) if first.runtime == "pyxis" else first.pyxis_image
    trials = []
    search_dir = posixpath.join(storage.job_dir(first.base, batch.sweep), "search")
    for i, (d, jid) in enumerate(zip(decided, ids)):
        inp = script_input(d, jid, image)
        if batch.search is not None:  # as the launch wraps it
            inp = dataclasses.replace(inp, command=batch.search.wrap(inp.command, search_dir, i))
        text = render.render(inp)
        render.lint_secrets(text, f"job_{jid}.sbatch")
        trials.append((f"job_{jid}.sbatch", text))
    array = array_for(batch.sweep, first.base, script_input(first, ids[0], image), ids, batch.max_concurrent)
    render.lint_secrets(array, f"{batch.sweep}.sbatch")
    return array, trials, [storage.results_dir(first.base, jid) for jid in ids]


def launch(plans: list[SlurmPlan], recs: list[Record], batch: Batch) -> list[Launch]:
    """Every trial staged as an ordinary job in ONE command, then ONE sbatch of the array over them."""
    first = plans[0]
    conn = first.conn
    assert conn is not None and batch.sweep is not None
    sweep_id, max_concurrent = batch.sweep, batch.max_concurrent
    base = first.decided.base
    if first.convert:
        raise TaoError(f"the image {first.decided.pyxis_image} is not converted to {first.decided.sqsh} yet: "
                       "submit one job first (it converts it), then the sweep")
    root = posixpath.dirname(storage.job_dir(base, sweep_id))
    sweep_dir = storage.job_dir(base, sweep_id)
    files: dict[str, str | bytes] = {}
    made: list[str] = [posixpath.join(sweep_dir, storage.LOG_DIR), posixpath.join(sweep_dir, "sbatch")]
    backends, names = [], []
    search_dir = posixpath.join(sweep_dir, "search") if batch.search is not None else ""
    if batch.search is not None:  # the study beside the array: every trial shares it
        made.append(search_dir)
        for name, data in batch.search.files(sweep_id).items():
            files[f"{sweep_id}/search/{name}"] = data
    for p, rec in zip(plans, recs):
        jid = rec.id
        d = p.decided
        jdir, results = storage.job_dir(base, jid), storage.results_dir(base, jid)
        inp = script_input(d, jid, first.run_image)
        if batch.search is not None:  # the trial's runner first: it asks the study, then runs this command
            inp = dataclasses.replace(inp, command=batch.search.wrap(inp.command, search_dir, int(rec.trial or 0)))
        text = render.render(inp)
        render.lint_secrets(text, f"job_{jid}.sbatch")
        meta = {"job_id": jid, "sweep": sweep_id, "trial": rec.trial, "network_arch": rec.network_arch,
                "action": rec.action, "partition": d.resources.partition, "nodes": d.resources.nodes,
                "gpus_per_node": d.resources.gpus_per_node, "runtime": d.runtime, "image": first.run_image,
                "results_dir": results, "secrets": sorted(d.secrets)}
        for rel, data in _staged_files(d, jid, jdir, results, text, meta).items():
            files[f"{jid}/{rel}"] = data
        made += [results] + [posixpath.join(jdir, sub) for sub in ("sbatch", storage.LOG_DIR, "meta", "specs", "env")]
        script = posixpath.join(jdir, f"sbatch/job_{jid}.sbatch")
        names.append(jid)
        backends.append(TrialFacts(
            staged_dir=jdir, results_dir=results, script=script, login_host=conn.connect().entry, job_name=jid,
            staged_secrets=bool(d.secrets), self_retry=inp.self_retries > 0,
            **({"walltime_chain": True, "max_attempts": inp.chain.max_attempts} if inp.chain else {}),
            infra_retries=bool(given(d.spec.infra_retries, True))))
        if search_dir:
            backends[-1].search_dir = search_dir
    render.lint(render.render(script_input(first.decided, recs[0].id, first.run_image)), "trial.sbatch")
    array = array_for(sweep_id, base, script_input(first.decided, recs[0].id, first.run_image), names,
                      max_concurrent)
    render.lint(array, f"{sweep_id}.sbatch")
    array_path = posixpath.join(sweep_dir, "sbatch", "array.sbatch")
    files[f"{sweep_id}/sbatch/array.sbatch"] = array
    conn.script(STAGE_MANY, [root, str(len(recs))] + made, stdin=storage.bundle(files), what="stage sweep")
    res = conn.script(SBATCH_ARRAY, [array_path], check=False, what="sbatch (sweep array)")
    aid = res.stdout.strip().splitlines()[-1] if res.ok and res.stdout.strip() else ""
    if not aid.isdigit():
        from .submit import sbatch_error

        raise TaoError(sbatch_error(res.stderr or res.stdout))
    out = []
    for i, b in enumerate(backends):
        ref = f"{aid}_{i}"
        b.slurm_job_id, b.array_job_id, b.job_dir = ref, aid, b.staged_dir
        b.log_dir = facts.SlurmFacts(job_dir=b.job_dir).log_dir_for(b.job_name, ref)
        out.append(Launch(f"slurm:{ref}", b, f"submitted as SLURM array task {ref}",
                          details={"job_dir": b.job_dir, "log_dir": b.log_dir}))
    return out
