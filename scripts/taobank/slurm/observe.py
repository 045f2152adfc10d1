"""status on SLURM: ONE remote command (one squeue + one sacct, exit markers, TAO's status.json) for
every record, mapped to states; infrastructure failures are resubmitted (bounded)."""
from __future__ import annotations

import os
import posixpath
from typing import Any, Mapping

from ..states import State
from .. import platform, records, states, training
from ..contract import Observation
from ..errors import TaoError
from . import facts, prefetch, remote, status as st, storage, submit
from .ssh import Connection


def _marker_path(b: Mapping[str, Any]) -> str | None:
    """The job's exit marker; None for a record that names no job folder (hand-made or damaged)."""
    d = facts.job_dir_of(b)
    return posixpath.join(d, storage.MARKER_FILE) if d else None


def _retries_path(b: Mapping[str, Any]) -> str | None:
    """What a job that resubmits itself appends to (``meta/retries.jsonl``): which SLURM job carries on."""
    d = facts.job_dir_of(b)
    return posixpath.join(d, storage.RETRIES_FILE) if d and (b.get("self_retry") or b.get("walltime_chain")) else None


def _status_paths(rec: Mapping[str, Any]) -> list[str]:
    """TAO's status files of a job (its results folder, and the action's sub-folder): read in the sweep."""
    folder = (rec.get("backend") or {}).get("results_dir")
    return training.status_paths(folder, rec.get("action")) if folder else []


def _status_texts(rec: Mapping[str, Any], marks: Mapping[str, str]) -> dict[str, str]:
    """The job's status files the sweep read, ``{path relative to its results folder: text}`` (a file that does
    not exist prints an empty section: only files with lines count)."""
    folder = (rec.get("backend") or {}).get("results_dir")
    return {path[len(folder) + 1:]: marks[path] for path in _status_paths(rec)
            if (marks.get(path) or "").strip()} if folder else {}


def _tao_outcome(rec: Mapping[str, Any], texts: Mapping[str, str]) -> dict[str, Any] | None:
    """How TAO says the job's run ended, from the status file progress reports (``train/status.json`` for a train
    action: TAO writes in the action's folder)."""
    chosen = training.chosen_log(texts, rec.get("action")) if texts else None
    return st.parse_tao_status(texts[chosen[0]]) if chosen else None


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


def sweep(conn: Connection, recs: list[dict]) -> dict[str, Observation]:
    """Verdict for every record: one remote command (one squeue + one sacct)."""
    live = []
    for r in recs:
        if not (r.get("backend") or {}).get("slurm_job_id"):
            continue
        try:
            live.append({**r, "backend": facts.backend_of(r)})
        except TaoError:
            if len(recs) == 1:
                raise
            continue  # a damaged record is left as it is; it never hides the others (status of it alone says why)
    if not live:
        return {}
    ids = ",".join(sorted({j for r in live for j in (r["backend"]["slurm_job_id"], r["backend"].get("convert_job_id"),
                                                     r["backend"].get("prefetch_job_id")) if j},
                          key=lambda j: tuple(int(x) for x in j.split("_"))))
    files = [m for r in live for m in (_marker_path(r["backend"]), *_status_paths(r), _retries_path(r["backend"]))
             if m]
    res = conn.script(remote.SWEEP, [ids] + files, what="squeue/sacct", retry_on_drop=True)
    squeue, sacct, marks, accounting = parse_sweep(res.stdout)

    def verdict(r: dict, log: str | None = None) -> Observation:
        b = r["backend"]
        jid = b["slurm_job_id"]
        moved = st.follow_retries(marks.get(_retries_path(b) or ""), jid)
        if moved and moved["reason"] == "walltime":  # the wall-time chain: the next attempt carries on
            return st.verdict(State.PENDING, f"wall time reached: continued as SLURM job {moved['next']} (attempt "
                              f"{moved['attempt']} of {b.get('max_attempts') or '?'}, {_hms(moved['run_seconds'])} run "
                              "so far); it resumes from the latest checkpoint", extra={"moved": moved})
        if moved:  # the job resubmitted itself after an infrastructure failure: follow it
            return st.verdict(State.PENDING, f"infrastructure failure on {moved['failed_on'] or '?'}: the job resubmitted "
                              f"itself as SLURM job {moved['next']} (retry {moved['attempt']} of {facts.max_retries()}, "
                              f"excluding {moved['excluded'] or 'no node'})", extra={"moved": moved})
        marker = st.parse_marker(marks.get(_marker_path(b) or ""))
        if marker and str(marker.get("slurm_job_id")) != str(jid):
            marker = None  # an earlier attempt's marker in a shared job dir
        v = st.classify(squeue.get(jid), sacct.get(jid), marker, accounting=accounting, log_tail=log,
                        tao=_tao_outcome(r, _status_texts(r, marks)))
        if b.get("walltime_chain") and int(b.get("chain_attempt") or 1) > 1 and v.state in (State.PENDING, State.RUNNING):
            v.message = (f"{v.message}; attempt {b['chain_attempt']} of {b.get('max_attempts') or '?'} "
                         f"({_hms(int(b.get('chain_seconds') or 0))} run before it)")
        cid = b.get("convert_job_id")
        if cid:
            v = st.with_conversion(v, squeue.get(cid) or sacct.get(cid), cid,
                                   log_tail=log)
        pid = b.get("prefetch_job_id")
        if pid and not v.extra.get("convert_log"):
            v = st.with_prefetch(v, squeue.get(pid) or sacct.get(pid), pid, log_tail=log)
        texts = _status_texts(r, marks)
        seen = training.progress_of(texts, r.get("action")) if texts else None
        if seen:
            v.extra["progress"] = seen
        return v

    def log_files(r: dict, v: Observation) -> list[str]:
        b = r["backend"]
        if v.extra.get("convert_log"):
            return [b["convert_log"]] if b.get("convert_log") else []
        if v.extra.get("prefetch_log"):
            return [b["prefetch_log"]] if b.get("prefetch_log") else []
        return [posixpath.join(b["log_dir"], "main.err"), posixpath.join(b["log_dir"], "main.out")] \
            if b.get("log_dir") else []

    out: dict[str, Observation] = {r["id"]: verdict(r) for r in live}
    need_logs = [r for r in live if out[r["id"]].needs_log and log_files(r, out[r["id"]])]
    if need_logs:  # only failed jobs: one more command for all of them
        wanted = {r["id"]: log_files(r, out[r["id"]]) for r in need_logs}
        files = [f for fs in wanted.values() for f in fs]
        tails = sections(conn.script(remote.TAIL_FILES, ["65536"] + files, what="log tails").stdout, "@@file ")
        for r in need_logs:
            out[r["id"]] = verdict(r, "".join(tails.get(f, "") for f in wanted[r["id"]]))
    return out


def _hms(seconds: int) -> str:
    """``3h04m`` / ``4m10s``: a run time in a status line."""
    h, rest = divmod(int(seconds), 3600)
    return f"{h}h{rest // 60:02d}m" if h else f"{rest // 60}m{rest % 60:02d}s"


def _chain_attempt(rec: Mapping[str, Any]) -> int:
    return int(rec.get("attempt") or 1)


def status(ids: list[str] | None = None, *, conn: Connection | None = None, retry: bool = True,
           env: Mapping[str, str] | None = None) -> list[dict]:
    """Refresh records (given ids, or every active SLURM record) and mark them.

    Infrastructure failures are resubmitted (new linked record) up to
    MAX_JOB_RETRIES; credentials of chains that really ended are removed.
    """
    recs = platform.select(facts.PLATFORM, ids, "status")
    return refresh(recs, conn=conn, retry=retry, env=env)


def refresh(recs: list[dict], *, conn: Connection | None = None, retry: bool = True,
            env: Mapping[str, str] | None = None) -> list[dict]:
    """Observe ``recs`` (SLURM records) with one sweep and mark them; retries are appended."""
    active = [r for r in recs if r["state"] not in states.TERMINAL]
    if not any((r.get("backend") or {}).get("slurm_job_id") for r in active):
        return recs  # nothing SLURM could tell: no connection needed
    conn = conn or Connection(env)
    verdicts = sweep(conn, active)
    out: dict[str, dict] = {r["id"]: r for r in recs}
    cleanup: list[str] = []
    for r in active:
        v = verdicts.get(r["id"])
        if v is None:
            continue  # never submitted (no slurm_job_id): leave it
        new_state = v.state
        if r["state"] == State.UNKNOWN and new_state == State.PENDING:
            new_state = State.UNKNOWN  # the table forbids UNKNOWN -> PENDING; it moves once the job runs or ends
        meta = {"slurm_state": v.observed, "exit_code": v.exit_status}
        moved = v.extra.get("moved")
        if moved:
            jid, name = moved["next"], r["backend"].get("job_name") or r["id"]
            # backend_ref and slurm_job_id follow the live SLURM job (job_name stays: cancel stops every job of it)
            # from UNKNOWN the table allows no PENDING: the job ran (it failed and resubmitted itself)
            hop_state = State.UNKNOWN if r["state"] == State.UNKNOWN else State.PENDING
            hop = {"self_retries": moved["attempt"], "excluded_nodes": moved["excluded"]} \
                if moved["reason"] != "walltime" else {"chain_attempt": moved["attempt"],
                                                       "chain_seconds": moved["run_seconds"]}
            # the record's backend id follows the live SLURM job (status and cancel act on it)
            out[r["id"]] = records.mark(r["id"], hop_state, source="poller", message=v.message,
                                        backend_ref=f"slurm:{jid}", rebind=True,
                                        backend={"slurm_job_id": jid, "log_dir": facts.log_dir_of(facts.backend_of(r), name, jid),
                                                 **hop, "slurm_state": "REQUEUED"})
            continue
        message, retry_now, chain_continues = v.message, False, False
        # NODE_FAIL/BOOT_FAIL: the job's own footer never ran, so only this verb can resubmit it
        if new_state == State.ERROR and v.retry and r["backend"].get("self_retry") and v.observed == "DEADLINE":
            message += "; stopped at its deadline (its own retry check never ran): not resubmitted"
        elif new_state == State.ERROR and v.retry and r["backend"].get("self_retry") and v.observed not in st.INFRA_STATES:
            message += "; the job did not resubmit itself (retry limit reached, or sbatch refused on the node: see main.out)"
        elif new_state == State.ERROR and v.retry and retry and r["backend"].get("infra_retries", True):
            if _chain_attempt(r) > facts.max_retries():
                message += f"; retry limit {facts.max_retries()} reached"
            else:
                chain_continues = True  # keep the credentials: the retry sources them
                if _claim_retry(r["id"]):  # one poller resubmits, never two
                    message += f"; resubmitting (attempt {_chain_attempt(r) + 1})"
                    retry_now = True
        out[r["id"]] = records.mark(r["id"], new_state, source="poller", message=message,
                                    err_class=v.err_class if new_state == State.ERROR else None,
                                    backend={k: x for k, x in meta.items() if x is not None})
        if v.extra.get("progress"):  # shown, never stored: the record changes only when the state does
            out[r["id"]] = {**out[r["id"]], "progress": v.extra["progress"]}
        if retry_now:
            nxt = resubmit(conn, out[r["id"]])
            out[nxt["id"]] = nxt
            if nxt["state"] != State.ERROR:  # the resubmit failed: the chain ends here
                continue
            chain_continues = False
        folder = facts.job_dir_of(facts.backend_of(r))
        if new_state in states.TERMINAL and r["backend"].get("staged_secrets") and not chain_continues and folder:
            cleanup.append(posixpath.join(folder, storage.CREDS_FILE))
        if new_state in states.TERMINAL and r["backend"].get("staged_prefetch_secrets") and folder:
            cleanup.append(posixpath.join(folder, prefetch.CREDS_FILE))  # a prefetch that never ran left it
    if cleanup:
        conn.script(remote.REMOVE, cleanup, what="remove credentials")
    return list(out.values())


def _claim_retry(job_id: str) -> bool:
    """Only one poller may resubmit a failed record: the one that creates this file."""
    try:
        fd = os.open(records.artifact_dir(job_id) / "slurm-retry.claim", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def resubmit(conn: Connection, failed: dict) -> dict:
    """A new record linked by retry_of that sbatches the same staged script."""
    b = failed["backend"]
    rec = records.open_record(facts.PLATFORM, failed["image"], failed["network_arch"], failed["action"],
                              failed.get("storage_tier") or "A", failed["results_dir"], retry_of=failed["id"],
                              description=failed.get("description"),
                              backend={k: b[k] for k in ("backend_type", "partition", "cluster_name", "container_runtime")
                                       if b.get(k) is not None})
    # the same staged script, so the same footer: self_retry decides whether retries.jsonl is read and
    # whether cancel stops every job of the name; infra_retries whether this verb may resubmit again
    backend = {k: b[k] for k in ("results_dir", "script", "staged_secrets", "self_retry", "infra_retries") if k in b}
    backend["staged_dir"] = facts.job_dir_of(b)  # the same staged folder; job_dir comes with the new sbatch answer
    backend.update({"job_name": rec["id"], "login_host": conn.host.entry if conn.host else b.get("login_host")})
    records.mark(rec["id"], State.PENDING, message=f"infrastructure retry of {failed['id']}", backend=backend)
    try:
        done = submit.sbatch(conn, rec["id"])
        return records.mark(rec["id"], State.PENDING, backend_ref=done.backend_ref, backend=done.backend,
                            message=done.message)
    except TaoError as exc:  # the retry could not be submitted: say so on its record
        return records.mark(rec["id"], State.ERROR, message=f"resubmit failed: {exc}", err_class="ERR_INFRA")
