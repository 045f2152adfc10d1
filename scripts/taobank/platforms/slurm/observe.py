"""status on SLURM: ONE remote command (one squeue + one sacct, exit markers, TAO's status.json) for
every record, mapped to states. Only says what it saw: the core marks the records and resubmits
infrastructure failures (bounded) through :func:`retry_backend` and :func:`relaunch`."""
from __future__ import annotations

import posixpath
import re
from typing import Mapping

from ...states import State
from ...core import training
from ...contract import Launch, Observation
from ...errors import TaoError
from . import facts, prefetch, remote, status as st, storage, submit
from .ssh import Connection
from ...records import Record


def _marker_path(b: facts.SlurmFacts) -> str | None:
    """The job's exit marker; None for a record that names no job folder (hand-made or damaged)."""
    return posixpath.join(b.folder, storage.MARKER_FILE) if b.folder else None


def _retries_path(b: facts.SlurmFacts) -> str | None:
    """What a job that resubmits itself appends to (``meta/retries.jsonl``): which SLURM job carries on."""
    return posixpath.join(b.folder, storage.RETRIES_FILE) if b.folder and (b.self_retry or b.walltime_chain) else None


def _status_paths(b: facts.SlurmFacts) -> list[str]:
    """TAO's status files of a job, read in the sweep: its results folder's, and every sub-folder's (the action's,
    or the one a generic command's trainer names: the files metrics reads, the same rule chooses among them)."""
    folder = b.results_dir
    return [posixpath.join(folder, "status.json"), posixpath.join(folder, remote.STATUS_GLOB)] if folder else []


_STATUS_REL = re.compile(r"(?:[^/]+/)?status\.json\Z")


def _status_texts(b: facts.SlurmFacts, marks: Mapping[str, str]) -> dict[str, str]:
    """The job's status files the sweep read, ``{path relative to its results folder: text}`` (a file that does
    not exist prints an empty section: only files with lines count)."""
    folder = b.results_dir
    if not folder:
        return {}
    return {path[len(folder) + 1:]: text for path, text in marks.items()
            if path.startswith(folder + "/") and _STATUS_REL.match(path[len(folder) + 1:]) and text.strip()}


def sections(text: str, prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    key = None
    for line in text.splitlines(keepends=True):
        if line.startswith(prefix):
            key = line[len(prefix):].strip()
            out[key] = ""
        elif key is not None:
            out[key] += line
    return out


def parse_sweep(text: str) -> tuple[dict, dict, dict[str, str], bool]:
    """Split the SWEEP output: squeue rows, sacct rows, marker texts, accounting ok."""
    sq_part, _, rest = text.partition("@@sacct\n")
    sq_body = sq_part.replace("@@squeue\n", "")
    sq_body, _, _ = sq_body.rpartition("@@rc ")
    ac_body, _, rest2 = rest.partition("@@rc ")
    ac_rc, _, marker_text = rest2.partition("\n")
    accounting = ac_rc.strip() == "0" and "error" not in ac_body.lower()[:200]
    squeue = st.parse_squeue(sq_body)
    sacct = st.parse_sacct(ac_body) if accounting else {}
    return squeue, sacct, sections(marker_text, "@@marker "), accounting


def sweep(conn: Connection, recs: list[Record]) -> dict[str, st.SlurmObservation]:
    """Verdict for every record: one remote command (one squeue + one sacct)."""
    live: list[Record] = []
    known: dict[str, facts.SlurmFacts] = {}
    for r in recs:
        if not r.backend.get("slurm_job_id"):
            continue
        try:
            known[r.id] = facts.SlurmFacts.of(r)
            live.append(r)
        except TaoError:
            if len(recs) == 1:
                raise
            continue  # a damaged record is left as it is; it never hides the others (status of it alone says why)
    if not live:
        return {}
    ids = ",".join(sorted({j for b in known.values() for j in (b.slurm_job_id, b.convert_job_id, b.prefetch_job_id)
                           if j}, key=lambda j: tuple(int(x) for x in j.split("_"))))
    files = [m for b in known.values() for m in (_marker_path(b), *_status_paths(b), _retries_path(b)) if m]
    res = conn.script(remote.SWEEP, [ids] + files, what="squeue/sacct", retry_on_drop=True)
    squeue, sacct, marks, accounting = parse_sweep(res.stdout)

    def verdict(r: Record, log: str | None = None) -> st.SlurmObservation:
        b = known[r.id]
        jid = b.slurm_job_id
        moved = st.follow_retries(marks.get(_retries_path(b) or ""), jid)
        if moved and moved["reason"] == "walltime":  # the wall-time chain: the next attempt carries on
            return st.verdict(State.PENDING, f"wall time reached: continued as SLURM job {moved['next']} (attempt "
                              f"{moved['attempt']} of {b.max_attempts or '?'}, {_hms(moved['run_seconds'])} run "
                              "so far); it resumes from the latest checkpoint", moved=moved)
        if moved:  # the job resubmitted itself after an infrastructure failure: follow it
            return st.verdict(State.PENDING, f"infrastructure failure on {moved['failed_on'] or '?'}: the job resubmitted "
                              f"itself as SLURM job {moved['next']} (retry {moved['attempt']} of {facts.max_retries()}, "
                              f"excluding {moved['excluded'] or 'no node'})", moved=moved)
        marker = st.parse_marker(marks.get(_marker_path(b) or ""))
        if marker and str(marker.get("slurm_job_id")) != str(jid):
            marker = None  # an earlier attempt's marker in a shared job dir
        texts = _status_texts(b, marks)
        row = sacct.get(jid)
        if row and b.memory:  # what the job asked for, as submitted (sacct's ReqMem lags a job's end)
            row = {**row, "req_mem": b.memory}
        v = st.classify(squeue.get(jid), row, marker, accounting=accounting, log_tail=log,
                        tao=training.tao_end(texts, r.action))
        if b.walltime_chain and b.chain_attempt > 1 and v.state in (State.PENDING, State.RUNNING):
            v.message = (f"{v.message}; attempt {b.chain_attempt} of {b.max_attempts or '?'} "
                         f"({_hms(b.chain_seconds)} run before it)")
        cid = b.convert_job_id
        if cid:
            v = st.with_conversion(v, squeue.get(cid) or sacct.get(cid), cid,
                                   log_tail=log)
        pid = b.prefetch_job_id
        if pid and not v.convert_log:
            v = st.with_prefetch(v, squeue.get(pid) or sacct.get(pid), pid, log_tail=log)
        seen = training.progress_of(texts, r.action) if texts else None
        if seen:
            v.progress = seen
        return v

    def log_files(r: Record, v: st.SlurmObservation) -> list[str]:
        b = known[r.id]
        if v.convert_log:
            return [b.convert_log] if b.convert_log else []
        if v.prefetch_log:
            return [b.prefetch_log] if b.prefetch_log else []
        return [posixpath.join(b.log_dir, "main.err"), posixpath.join(b.log_dir, "main.out")] if b.log_dir else []

    out: dict[str, st.SlurmObservation] = {r.id: verdict(r) for r in live}
    need_logs = [r for r in live if out[r.id].needs_log and log_files(r, out[r.id])]
    if need_logs:  # only failed jobs: one more command for all of them
        wanted = {r.id: log_files(r, out[r.id]) for r in need_logs}
        files = [f for fs in wanted.values() for f in fs]
        tails = sections(conn.script(remote.TAIL_FILES, ["65536"] + files, what="log tails").stdout, "@@file ")
        for r in need_logs:
            out[r.id] = verdict(r, "".join(tails.get(f, "") for f in wanted[r.id]))
    return out


def _hms(seconds: int) -> str:
    """``3h04m`` / ``4m10s``: a run time in a status line."""
    h, rest = divmod(int(seconds), 3600)
    return f"{h}h{rest // 60:02d}m" if h else f"{rest // 60}m{rest % 60:02d}s"


def connection(context: dict, env: Mapping[str, str] | None = None) -> Connection:
    """The one connection of a status or cancel (kept in ``context``, opened when first needed)."""
    if "conn" not in context:
        context["conn"] = Connection(env)
    return context["conn"]


def observe(recs: list[Record], context: dict) -> list[Observation]:
    """What SLURM says of ``recs`` with one sweep; a record never submitted (no slurm_job_id) gets no
    observation (it stays as it is, and no connection is opened when none was submitted)."""
    if not any(r.backend.get("slurm_job_id") for r in recs):
        return []  # nothing SLURM could tell: no connection needed
    verdicts = sweep(connection(context), recs)
    out = []
    for r in recs:
        v = verdicts.get(r.id)
        if v is None:
            continue  # never submitted (no slurm_job_id): leave it
        out.append(_said(r, v))
    return out


def _said(r: Record, v: st.SlurmObservation) -> Observation:
    """The observation as the core applies it: the record's facts, the job that carries on, why no retry."""
    b = facts.SlurmFacts.of(r)
    v.job_id = r.id
    moved = v.moved
    if moved:  # backend_ref and slurm_job_id follow the live SLURM job (job_name stays: cancel stops every job of it)
        jid, name = moved["next"], b.job_name or r.id
        hop = {"self_retries": moved["attempt"], "excluded_nodes": moved["excluded"]} \
            if moved["reason"] != "walltime" else {"chain_attempt": moved["attempt"], "chain_seconds": moved["run_seconds"]}
        v.backend_ref = f"slurm:{jid}"
        v.backend = {"slurm_job_id": jid, "log_dir": b.log_dir_for(name, jid), **hop,
                     "slurm_state": "REQUEUED"}
        return v
    v.backend = {"slurm_state": v.observed, "exit_code": v.exit_status}
    if v.progress:  # shown, never stored: the record changes only when the state does
        v.view.progress = v.progress
    if v.state == State.ERROR and v.retry:
        # NODE_FAIL/BOOT_FAIL: the job's own footer never ran, so only status can resubmit it
        if b.self_retry and v.observed == "DEADLINE":
            v.message += "; stopped at its deadline (its own retry check never ran): not resubmitted"
            v.retry = False
        elif b.self_retry and v.observed not in st.INFRA_STATES:
            v.message += "; the job did not resubmit itself (retry limit reached, or sbatch refused on the node: see main.out)"
            v.retry = False
        else:
            v.retry = b.infra_retries
    else:
        v.retry = False
    return v


def ended(recs: list[Record], context: dict, carried_on: frozenset[str] = frozenset()) -> dict[str, str]:
    """Remove the staged credentials of jobs that ended (one remote command): a job whose infrastructure retry
    carries on keeps its own (the retry sources them); a prefetch that never ran left its file too."""
    cleanup = []
    for r in recs:
        b = facts.SlurmFacts.of(r)
        folder = b.folder
        if not folder:
            continue
        if b.staged_secrets and r.id not in carried_on:
            cleanup.append(posixpath.join(folder, storage.CREDS_FILE))
        if b.staged_prefetch_secrets:
            cleanup.append(posixpath.join(folder, prefetch.CREDS_FILE))
    if cleanup:
        connection(context).script(remote.REMOVE, cleanup, what="remove credentials")
    return {}


def retry_backend(failed: Record, job_id: str, context: dict) -> dict:
    """The facts of the retry ``job_id`` of ``failed``: the same staged script, so the same footer (self_retry
    decides whether retries.jsonl is read and whether cancel stops every job of the name; infra_retries whether
    status may resubmit again)."""
    b = failed.backend
    conn = connection(context)
    backend = {k: b[k] for k in ("backend_type", "partition", "cluster_name", "container_runtime") if b.get(k) is not None}
    backend.update({k: b[k] for k in ("results_dir", "script", "staged_secrets", "self_retry", "infra_retries") if k in b})
    backend["staged_dir"] = facts.SlurmFacts.of(failed).folder  # the same staged folder; job_dir comes with the new sbatch answer
    backend.update({"job_name": job_id, "login_host": conn.host.entry if conn.host else b.get("login_host")})
    return backend


def relaunch(job_id: str, context: dict) -> Launch | None:
    """sbatch the staged script of a record that has no SLURM job yet (an infrastructure retry, a resumed
    submit), reconciled by name first, never twice; None when it has one already."""
    return submit.relaunch(job_id, connection(context))
