"""cancel on SLURM: scancel the recorded job (found by its exact name when the sbatch answer was lost).

Only stops and says what happened (:class:`taobank.contract.Stop`); the core marks the records."""
from __future__ import annotations

import posixpath
import re

from ...contract import Stop
from ... import states
from ...errors import TaoError
from ...run import last_line
from . import facts, prefetch, remote, storage, submit
from .ssh import Connection
from ...records import Record


def stop(recs: list[Record], conn: Connection) -> list[Stop]:
    """One job alone (:func:`cancel`), several with one scancel (:func:`cancel_many`)."""
    return [cancel(recs[0], conn=conn)] if len(recs) == 1 else cancel_many(recs, conn=conn)


def cancel(rec: Record, *, conn: Connection) -> Stop:
    """scancel; a job that is gone or already ended counts as cancelled."""
    job_id = rec.id
    f = facts.SlurmFacts.of(rec)
    jid: str | None = f.slurm_job_id
    if not jid and f.folder:  # submitted but the answer was lost?
        found = submit.find_by_name(conn, f.job_name or job_id)
        jid = found[-1] if found else None
    msg, outcome = "cancelled before it reached SLURM", "never_launched"
    if f.convert_job_id:  # the image conversion it waits for: a finished one answers "already completed"
        conn.remote(["scancel", f.convert_job_id], check=False, what="scancel (image conversion)")
    if f.prefetch_job_id:  # the CPU-only prefetch it waits for
        conn.remote(["scancel", f.prefetch_job_id], check=False, what="scancel (prefetch)")
    if jid:
        res = conn.remote(["scancel", jid], check=False, what="scancel")
        if res.ok:
            msg, outcome = f"scancel {jid}", "stopped"
        elif "Invalid job id" in res.stderr or "already completing or completed" in res.stderr:
            msg, outcome = f"SLURM job {jid} was already gone: counted as cancelled", "gone"
        else:
            raise TaoError(f"scancel {jid} failed: {last_line(res.stderr)}")
    if jid and (f.self_retry or f.walltime_chain):
        # a job that resubmitted itself runs under another id with the same name: stop every one of them
        conn.script(remote.CANCEL_NAME, [f.job_name or job_id], check=False, what="scancel --name")
    # the job is stopped: the record says so (the backend state must not stay RUNNING either)
    done = Stop(job_id, outcome, msg, backend={"slurm_state": "CANCELLED"} if jid else {})
    staged = [name for name, on in ((storage.CREDS_FILE, f.staged_secrets),
                                    (prefetch.CREDS_FILE, f.staged_prefetch_secrets)) if on]
    if staged and f.folder:
        paths = [posixpath.join(f.folder, name) for name in staged]
        creds = " ".join(paths)
        try:
            conn.script(remote.REMOVE, paths, what="remove credentials")
        except TaoError as exc:
            done.said = (f"{msg}; the staged credentials {creds} could not be removed ({exc}): "
                         "delete that file on the cluster by hand")
    return done


#: One remote command for many jobs. $1 the job ids (array tasks ``<array>_<task>``), space separated and checked
#: by :data:`JOB_ID` first; $2 the names of jobs that resubmit themselves (an infrastructure retry or the wall-time
#: chain: each runs on under another id with its name);
#: then the staged credential files to remove.
CANCEL_MANY = r'''
ids=$1; names=$2; shift 2
echo "@@scancel"
# shellcheck disable=SC2086 # the ids are checked words, one argument each
scancel $ids 2>&1
echo "@@rc $?"
for n in $names; do scancel --name="$n" --user="$(id -un)" >/dev/null 2>&1; done
if [ "$#" -gt 0 ]; then rm -f -- "$@" 2>&1; echo "@@rm $?"; fi
'''

#: What may reach CANCEL_MANY unquoted: a SLURM job id or array task, a job name (the bank's ids).
JOB_ID = re.compile(r"[0-9]+(_[0-9]+)?\Z")
NAME = re.compile(r"[a-z][a-z0-9-]{0,62}\Z")
_KILL_ERROR = re.compile(r"job id ([0-9_]+)[^:]*: (.*)")


def cancel_many(recs: list[Record], *, conn: Connection) -> list[Stop]:
    """Cancel several submitted jobs (the trials of a sweep) with ONE ``scancel`` of all their ids over one
    connection; each says what happened as :func:`cancel` would. A job this cannot take (no SLURM id
    recorded, an image conversion to stop) goes through :func:`cancel`. A job not stopped is its ``Stop.error``."""
    batch: list[Record] = []
    alone: list[Record] = []
    for rec in recs:
        f = facts.SlurmFacts.of(rec)
        jid, name = f.slurm_job_id, f.job_name or rec.id
        ok = JOB_ID.match(jid) and NAME.match(name) and not f.convert_job_id and f.folder
        (batch if ok and rec.state not in states.TERMINAL else alone).append(rec)
    out: list[Stop] = []
    for rec in alone:
        try:
            out.append(cancel(rec, conn=conn))
        except TaoError as exc:
            out.append(Stop(rec.id, error=str(exc)))
    if not batch:
        return out
    backends = [facts.SlurmFacts.of(r) for r in batch]
    ids = [b.slurm_job_id for b in backends]
    names = [b.job_name or r.id for r, b in zip(batch, backends) if b.self_retry or b.walltime_chain]
    creds = [posixpath.join(b.folder, storage.CREDS_FILE) for b in backends  # a batched job has its folder (above)
             if b.staged_secrets and b.folder]
    res = conn.script(CANCEL_MANY, [" ".join(ids), " ".join(names), *creds], check=False, what="scancel (many)")
    text = res.stdout
    rc = re.search(r"^@@rc (\d+)$", text, re.M)
    if not res.ok or rc is None:  # the command itself failed (no connection): nothing is known
        line = last_line(res.stderr or text)
        return out + [Stop(r.id, error=f"scancel failed: {line}") for r in batch]
    said = text.split("@@scancel\n", 1)[-1].split("@@rc", 1)[0]
    per_id = {m.group(1): m.group(2) for m in map(_KILL_ERROR.search, said.splitlines()) if m}
    rm_failed = re.search(r"^@@rm (\d+)$", text, re.M) is not None and not re.search(r"^@@rm 0$", text, re.M)
    for rec, b, jid in zip(batch, backends, ids):
        why = per_id.get(jid)
        if why and "Invalid job id" not in why and "already completing or completed" not in why:
            out.append(Stop(rec.id, error=f"scancel {jid} failed: {why}"))
            continue
        if why is None and rc.group(1) != "0" and not per_id:
            out.append(Stop(rec.id, error=f"scancel {jid} failed: {last_line(said) or 'exit ' + rc.group(1)}"))
            continue
        msg = f"scancel {jid}" if why is None else f"SLURM job {jid} was already gone: counted as cancelled"
        if rm_failed and b.staged_secrets and b.folder:
            cred_file = posixpath.join(b.folder, storage.CREDS_FILE)
            msg += f"; the staged credentials {cred_file} could not be removed: delete that file on the cluster by hand"
        out.append(Stop(rec.id, "stopped" if why is None else "gone", msg, backend={"slurm_state": "CANCELLED"}))
    return out
