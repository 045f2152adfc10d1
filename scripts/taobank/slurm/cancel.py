"""cancel on SLURM: scancel the recorded job (found by its exact name when the sbatch answer was lost)."""
from __future__ import annotations

import posixpath

from ..states import State
from .. import platform, records, states
from ..errors import TaoError
from ..run import last_line
from . import facts, prefetch, remote, storage, submit
from .ssh import Connection


def cancel(job_id: str, *, conn: Connection | None = None) -> dict:
    """scancel; a job that is gone or already ended counts as cancelled."""
    rec = platform.load_for(job_id, facts.PLATFORM, "cancel")
    if rec["state"] in states.TERMINAL:
        return rec
    b = facts.backend_of(rec)
    conn = conn or Connection()
    jid = b.get("slurm_job_id")
    if not jid and facts.job_dir_of(b):  # submitted but the answer was lost?
        found = submit.find_by_name(conn, b.get("job_name") or job_id)
        jid = found[-1] if found else None
    msg = "cancelled before it reached SLURM"
    if b.get("convert_job_id"):  # the image conversion it waits for: a finished one answers "already completed"
        conn.remote(["scancel", b["convert_job_id"]], check=False, what="scancel (image conversion)")
    if b.get("prefetch_job_id"):  # the CPU-only prefetch it waits for
        conn.remote(["scancel", b["prefetch_job_id"]], check=False, what="scancel (prefetch)")
    if jid:
        res = conn.remote(["scancel", jid], check=False, what="scancel")
        if res.ok:
            msg = f"scancel {jid}"
        elif "Invalid job id" in res.stderr or "already completing or completed" in res.stderr:
            msg = f"SLURM job {jid} was already gone: counted as cancelled"
        else:
            raise TaoError(f"scancel {jid} failed: {last_line(res.stderr)}")
    if jid and b.get("self_retry"):
        # a job that resubmitted itself runs under another id with the same name: stop every one of them
        conn.script(remote.CANCEL_NAME, [b.get("job_name") or job_id], check=False, what="scancel --name")
    # the job is stopped: the record says so first (the backend state must not stay RUNNING either)
    rec = records.mark(job_id, State.CANCELED, message=msg, backend={"slurm_state": "CANCELLED"} if jid else None)
    staged = [f for f, on in ((storage.CREDS_FILE, b.get("staged_secrets")),
                              (prefetch.CREDS_FILE, b.get("staged_prefetch_secrets"))) if on]
    if staged and facts.job_dir_of(b):
        paths = [posixpath.join(facts.job_dir_of(b), f) for f in staged]
        creds = " ".join(paths)
        try:
            conn.script(remote.REMOVE, paths, what="remove credentials")
        except TaoError as exc:
            rec = {**rec, "message": f"{msg}; the staged credentials {creds} could not be removed ({exc}): "
                                     "delete that file on the cluster by hand"}
    return rec
