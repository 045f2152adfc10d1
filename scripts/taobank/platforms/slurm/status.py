"""Pure mapping from ``squeue`` / ``sacct`` / exit-marker data to the bank's
status vocabulary (no I/O here: the verbs fetch, this module decides).

Queries (one of each for a whole sweep)::

    squeue -h -o '%i|%T|%r|%j' -j ID,ID,...
    sacct -n -P -o JobID,JobName,State,ExitCode,ReqMem,Timelimit,NodeList -j ID,ID,...

``-P`` keeps ``CANCELLED by 1001`` whole; a fixed-width ``CANCELLED+`` is
handled too (first word, ``+`` stripped). The step lines (``ID.batch``,
``ID.0``) are read for one thing: a step SLURM killed OUT_OF_MEMORY, which
the job's own line shows only as ``FAILED 1:0`` (the batch script outlives
its ``srun`` step); the exit marker says the same from the job's log
(``oom``), for when accounting is off.

Classification choices:

* NODE_FAIL and BOOT_FAIL are infrastructure (ERR_INFRA, retried); FAILED
  and DEADLINE are too when the job's log matches an infrastructure pattern
  (Xid, ECC, NCCL transport ... ``taobank.failures.infra_log_match``).
* OUT_OF_MEMORY is ERR_PROGRAM: the job outgrew its own memory request; the
  same job would fail again, so it is reported at once, not retried; unless
  its log shows an infrastructure cause (an Xid, a stale mount ... that
  made the program balloon or hang): then ERR_INFRA, retried.
* TIMEOUT is ERR_PROGRAM (raise ``time_hours`` or lower ``timeout_hours``).
* Each of OUT_OF_MEMORY, NODE_FAIL, TIMEOUT and PREEMPTED reaches the
  status line as ``<STATE>: <cause>; <what to do>``, naming the request
  sacct saw (``ReqMem``, ``Timelimit``) or the node (``NodeList``).
* SUSPENDED/STOPPED stay RUNNING with a "paused" message (the vocabulary has
  no PAUSED state); REQUEUED/REQUEUE_HOLD and a PREEMPTED job still in
  ``squeue`` are PENDING (``--requeue`` keeps the same job alive).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

from ...states import State
from ... import states
from ...contract import Observation, TaoEnd


@dataclass
class SlurmObservation(Observation):
    """An :class:`Observation` with what SLURM's own observe reads of it next (never stored as it is)."""

    #: the job carried on as another SLURM job: its hop marker (next, attempt, reason ...)
    moved: dict[str, Any] | None = None
    #: squeue's pending reason, as SLURM words it
    pending_reason: str | None = None
    #: how the training goes (shown, never stored: :attr:`Observation.view`)
    progress: dict | None = None
    #: the verdict waits on the log of the image conversion / prefetch job (not the training job's)
    convert_log: bool = False
    prefetch_log: bool = False


SQUEUE_FORMAT = "%i|%T|%r|%j"
SACCT_FIELDS = "JobID,JobName,State,ExitCode,ReqMem,Timelimit,NodeList"

PENDING_STATES = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "CONFIGURING"}
RUNNING_STATES = {"RUNNING", "COMPLETING", "RESIZING", "SIGNALING", "STAGE_OUT"}
PAUSED_STATES = {"SUSPENDED", "STOPPED"}
FAILED_STATES = {"FAILED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "NODE_FAIL"}
INFRA_STATES = {"NODE_FAIL", "BOOT_FAIL"}
CANCEL_STATES = {"CANCELLED", "PREEMPTED", "REVOKED"}

#: squeue pending reasons -> what they mean for the user.
PENDING_REASONS: dict[str, str] = {
    "None": "just submitted; the scheduler has not looked at it yet",
    "Resources": "waiting for free nodes/GPUs (normal on a busy partition)",
    "Priority": "higher-priority jobs are ahead in the queue",
    "Dependency": "waiting for a job it depends on",
    "DependencyNeverSatisfied": "a job it depends on failed: it will never start; cancel it",
    "JobHeldUser": "held by the user: scontrol release <id>",
    "JobHeldAdmin": "held by an administrator: ask the cluster admins",
    "BeginTime": "its start time has not come yet",
    "PartitionNodeLimit": "asks for more nodes than the partition allows: it will not start; cancel and resubmit with fewer nodes",
    "PartitionTimeLimit": "asks for more time than the partition allows: cancel and resubmit with a shorter time_hours",
    "BadConstraints": "no node can ever satisfy the request (GPUs/CPUs/memory/features): cancel and resubmit with less",
    "PartitionDown": "the partition is down: wait or use another partition",
    "ReqNodeNotAvail": "required nodes are down or reserved",
    "Reservation": "waiting for its reservation",
    "launch failed requeued held": "launch failed and the job was held: scontrol release <id> after fixing the node issue",
}
_LIMIT_PREFIXES = {"QOS": "a QOS limit of your account is reached (jobs, GPUs or time); it starts when your other jobs finish",
                   "Assoc": "an association (account/user) limit is reached; it starts when your other jobs finish"}


#: Container-launch failures worth a specific hint (the program never started).
LOG_HINTS: tuple[tuple[str, str], ...] = (
    ("Could not process JSON input", "the registry login failed: install ~/.config/enroot/.credentials on the cluster "
     "(tao_slurm.py enroot-credentials; references/ssh-setup.md)"),
    ("unrecognized option '--container-image", "this cluster has no Pyxis: ask the admins or use container_runtime none"),
    ("pyxis: ", "Pyxis could not start the container: see main.err and references/troubleshooting.md"),
)


def explain_reason(reason: str) -> str:
    """One human sentence for a squeue pending reason."""
    r = (reason or "").strip().strip("()")
    if r in PENDING_REASONS:
        return PENDING_REASONS[r]
    for prefix, text in _LIMIT_PREFIXES.items():
        if r.startswith(prefix):
            return f"{text} ({r})"
    return r or "no reason given"


def first_word(state: str) -> str:
    """``CANCELLED by 1001`` / ``CANCELLED+`` -> ``CANCELLED``."""
    word = (state or "").strip().split(" ")[0] if state else ""
    return word.rstrip("+").upper()


def parse_squeue(text: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for line in (text or "").splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) < 4 or not parts[0]:
            continue
        jid, state, reason, name = parts
        out[jid] = {"state": first_word(state), "reason": reason.strip(), "name": name}
    return out


_SHAPES = {"req_mem": re.compile(r"[0-9]+(\.[0-9]+)?[KMGTP]?[nc]?\Z"),
           "time_limit": re.compile(r"([0-9]+-)?[0-9]+(:[0-9]{2}){1,2}\Z"),
           "nodes": re.compile(r"[A-Za-z0-9._\[\],-]+\Z")}


def parse_sacct(text: str) -> dict[str, dict[str, str]]:
    """Latest allocation record per job id; of its step lines (``ID.0``) only whether one was killed
    OUT_OF_MEMORY (``oom``: "1"). The fields past ExitCode (:data:`SACCT_FIELDS`) are optional."""
    out: dict[str, dict[str, str]] = {}
    oom: set[str] = set()
    for line in (text or "").splitlines():
        parts = line.strip().split("|")
        if len(parts) < 4 or not parts[0]:
            continue
        if "." in parts[0]:
            if first_word(parts[2]) == "OUT_OF_MEMORY":
                oom.add(parts[0].split(".")[0])
            continue
        jid, name, state, exit_code = parts[:4]
        extra = dict(zip(("req_mem", "time_limit", "nodes"), (p.strip() for p in parts[4:7])))
        # a job whose own record has not reached the database yet reads "allocation", "16?", "": left out
        for key, shape in _SHAPES.items():
            if not shape.match(extra.get(key, "")):
                extra.pop(key, None)
        out[jid] = {"state": first_word(state), "raw_state": state.strip(), "name": name,
                    "exit_code": exit_code.strip(), **{k: v for k, v in extra.items() if v}}
    for jid in oom & set(out):
        out[jid]["oom"] = "1"
    return out


def parse_marker(text: str | None) -> dict[str, Any] | None:
    if not text or not text.strip():
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _tao_success(tao: TaoEnd, slurm_state: str | None, code: str | None) -> SlurmObservation:
    """TAO said its run finished (its "<Action> finished successfully." line): COMPLETE, whatever the
    wrapper did afterwards (an ``srun`` teardown error after the work was written). SLURM's own rule; the
    other way round (a clean exit after TAO's FAILURE) is the core's one rule (:func:`taobank.core.track.tao_last_word`)."""
    said = f": {tao.message}" if tao.message else ""
    note = "" if code in (None, "", "0:0") else f"; the wrapper exited {code} afterwards"
    return verdict(State.COMPLETE, f"TAO status.json: {tao.status}{said}{note}", slurm_state, exit_code=code)


def _tao_failure(tao: TaoEnd | None) -> str:
    """TAO's own words of a failed run, for a message ("" when it said none)."""
    if tao is None or tao.status != "FAILURE":
        return ""
    return f"; TAO's status.json ends in FAILURE" + (f" ({tao.message})" if tao.message else "")


def verdict(state: str, message: str, observed: str | None = None, *, err_class: str | None = None,
            retry: bool = False, needs_log: bool = False, exit_code: str | None = None,
            cut_short: str | None = None, moved: dict[str, Any] | None = None, pending_reason: str | None = None,
            convert_log: bool = False, prefetch_log: bool = False) -> SlurmObservation:
    """An :class:`Observation` from SLURM's words: ``exit_code`` as accounting writes it (``rc:signal``)."""
    rc, _, sig = (exit_code or "").partition(":")
    return SlurmObservation(states.canonical_state(state), message, err_class, observed=observed,
                            exit_code=_number(rc), signal=_number(sig), retry=retry, needs_log=needs_log,
                            cut_short=cut_short, moved=moved, pending_reason=pending_reason,
                            convert_log=convert_log, prefetch_log=prefetch_log)


def _number(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _exit_text(code: str | None) -> str:
    if not code:
        return ""
    rc, _, sig = code.partition(":")
    if sig and sig != "0":
        return f" (killed by signal {sig})"
    return f" (exit code {rc})"


def _marker_verdict(marker: Mapping[str, Any], where: str) -> SlurmObservation:
    rc = marker.get("exit_code")
    if rc == 0:
        return verdict(State.COMPLETE, f"finished; exit 0 ({where})", exit_code="0:0")
    if marker.get("timed_out"):
        return verdict(State.ERROR, f"stopped after timeout_hours before the wall time ({where}); raise timeout_hours/time_hours "
                       "or resume from the last checkpoint", err_class="ERR_PROGRAM", exit_code=f"{rc}:0",
                       cut_short="time limit")
    if marker.get("oom"):
        return _oom_verdict(None, f"{rc}:0", None, observed=None, needs_log=False)
    return verdict(State.ERROR, f"command exited with code {rc} ({where}); read main.err", err_class="ERR_PROGRAM",
                   exit_code=f"{rc}:0", needs_log=True)


def classify(squeue: Mapping[str, str] | None, sacct: Mapping[str, str] | None,
             marker: Mapping[str, Any] | None, *, log_tail: str | None = None,
             accounting: bool = True, tao: TaoEnd | None = None) -> SlurmObservation:
    """Decide the state of one SLURM job from what the batched queries saw.

    ``tao``: how TAO's ``status.json`` says the run ended (:func:`taobank.core.training.tao_end`), kept on the
    observation for the core's one rule (:func:`taobank.core.track.tao_last_word`: a clean exit after TAO's
    FAILURE is an ERROR); here only TAO's SUCCESS after a failed wrapper counts (COMPLETE).
    """
    v = _classify(squeue, sacct, marker, log_tail=log_tail, accounting=accounting, tao=tao)
    v.tao_end = tao
    return v


def _classify(squeue: Mapping[str, str] | None, sacct: Mapping[str, str] | None,
              marker: Mapping[str, Any] | None, *, log_tail: str | None, accounting: bool,
              tao: TaoEnd | None) -> SlurmObservation:
    succeeded = tao is not None and tao.status == "SUCCESS"
    if squeue and squeue.get("state") and squeue["state"] not in FAILED_STATES | {"COMPLETED", "CANCELLED", "TIMEOUT", "REVOKED"}:
        st, reason = squeue["state"], squeue.get("reason", "")
        if st in RUNNING_STATES:
            return verdict("RUNNING", f"{st.lower()} on {reason}" if st == "RUNNING" and reason and reason != "None" else st.lower(), st)
        if st in PAUSED_STATES:
            return verdict(State.RUNNING, f"paused ({st}): the job keeps its allocation; it resumes when released", st)
        if st == "PREEMPTED":
            return verdict(State.PENDING, "preempted; requeued under the same job id", st)
        if st in PENDING_STATES:
            why = explain_reason(reason)
            if st.startswith("REQUEUE"):
                why = f"requeued ({st}); {why}"
            return verdict(State.PENDING, why, st, pending_reason=reason)
        return verdict(State.UNKNOWN, f"unrecognised squeue state {st}", st)
    rec = sacct if sacct and sacct.get("state") else (squeue if squeue and squeue.get("state") else None)
    if rec is None:
        if marker is not None:
            if succeeded and tao is not None:
                return _tao_success(tao, None, f"{marker.get('exit_code')}:0")
            v = _marker_verdict(marker, "exit marker; no scheduler record")
            if v.state == State.ERROR:
                v.message += _tao_failure(tao)
            return v
        why = "accounting unavailable" if not accounting else "not in squeue or sacct"
        return verdict(State.UNKNOWN, f"{why} and no exit marker on the shared filesystem yet")
    st, code = rec["state"], rec.get("exit_code")
    if st in PENDING_STATES:
        return verdict(State.PENDING, f"{st.lower()} (accounting)", st)
    if st in RUNNING_STATES:
        return verdict(State.RUNNING, st.lower(), st)
    if st in PAUSED_STATES:
        return verdict(State.RUNNING, f"paused ({st})", st)
    if st == "COMPLETED":
        if succeeded and tao is not None:
            return _tao_success(tao, st, code)
        if marker is not None:
            v = _marker_verdict(marker, "exit marker")
            v.observed = st
            return v
        return verdict(State.COMPLETE, "COMPLETED (no exit marker found)", st, exit_code=code)
    if st == "TIMEOUT":
        limit = f" ({rec['time_limit']})" if rec.get("time_limit") else ""
        return verdict(State.ERROR, f"TIMEOUT: SLURM ended the job at its wall time{limit}; ask for more with "
                       "--time-hours (or keep --timeout-hours below it so outputs are written)", st,
                       err_class="ERR_PROGRAM", exit_code=code, cut_short="time limit")
    if st in CANCEL_STATES:
        if st == "PREEMPTED":
            return verdict(State.CANCELED, f"PREEMPTED: a higher-priority job took its node{_on(rec)} and SLURM did "
                           "not requeue it", st, exit_code=code, cut_short="preempted")
        who = rec.get("raw_state", st)
        return verdict(State.CANCELED, f"{who.lower()}" if who else st.lower(), st, exit_code=code)
    if st in FAILED_STATES:
        if st in INFRA_STATES:
            what = "failed under the job" if st == "NODE_FAIL" else "failed to boot for the job"
            return verdict(State.ERROR, f"{st}: a node{_on(rec)} {what} (the cluster's fault, not the program's)",
                           st, err_class="ERR_INFRA", retry=True, exit_code=code)
        if st == "OUT_OF_MEMORY" or rec.get("oom") or (marker and marker.get("oom")):
            return _oom_verdict(log_tail, code, rec.get("req_mem"), observed="OUT_OF_MEMORY",
                                needs_log=log_tail is None)
        if succeeded and tao is not None:
            return _tao_success(tao, st, code)  # TAO finished its work; the wrapper failed afterwards
        if log_tail is None:
            return verdict(State.ERROR, f"{st}{_exit_text(code)}", st, err_class="ERR_PROGRAM", exit_code=code, needs_log=True)
        from ...failures import infra_log_match

        pattern = infra_log_match(log_tail)
        if pattern:
            return verdict(State.ERROR, f"{st}{_exit_text(code)}; log matches infrastructure pattern {pattern}",
                           st, err_class="ERR_INFRA", retry=True, exit_code=code,
                           cut_short="preempted" if pattern == "preemption" else None)
        detail = ""
        if marker and marker.get("timed_out"):
            detail = "; stopped after timeout_hours before the wall time"
        for needle, hint in LOG_HINTS:
            if needle in log_tail:
                detail += f"; {hint}"
                break
        cut = "time limit" if marker and marker.get("timed_out") else None
        return verdict(State.ERROR, f"{st}{_exit_text(code)}{_tao_failure(tao)}{detail}; read main.err", st,
                       err_class="ERR_PROGRAM", exit_code=code, cut_short=cut)
    return verdict(State.UNKNOWN, f"unrecognised SLURM state {rec.get('raw_state') or st}", st)


def _on(rec: Mapping[str, str]) -> str:
    """`` (node1,node2)``: the job's nodes as sacct names them, or ""."""
    nodes = rec.get("nodes", "")
    return f" ({nodes})" if nodes and nodes not in ("None assigned", "(null)") else ""


def memory_text(req_mem: str | None) -> str:
    """sacct's ReqMem as a user reads it: ``100M``; an older sacct's ``4000Mc`` / ``16Gn`` -> per CPU / per node."""
    mem = (req_mem or "").strip()
    if mem[-1:] in ("c", "n") and mem[:-1][-1:].isalpha():
        return f"{mem[:-1]} per {'CPU' if mem[-1] == 'c' else 'node'}"
    return mem


def _oom_verdict(log_tail: str | None, code: str | None, req_mem: str | None, *, observed: str | None,
                 needs_log: bool) -> SlurmObservation:
    """OUT_OF_MEMORY (the job's state, one of its steps', or its log's): a program error, said with the
    request it outgrew and the flag that raises it; unless the log tail matches an infrastructure pattern."""
    from ...failures import infra_log_match

    pattern = infra_log_match(log_tail or "")
    if pattern:
        return verdict(State.ERROR, f"OUT_OF_MEMORY{_exit_text(code)}; log matches infrastructure pattern {pattern}",
                       observed, err_class="ERR_INFRA", retry=True, exit_code=code)
    asked = memory_text(req_mem)
    used = f"more than the {asked} of memory it asked for" if asked else "more memory than it asked for"
    return verdict(State.ERROR, f"OUT_OF_MEMORY: the job used {used}; ask for more with --memory (spec: memory), "
                   "or lower the batch size / workers", observed, err_class="ERR_PROGRAM", exit_code=code,
                   needs_log=needs_log)


def _last_lines(text: str, what: str, n: int = 3) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) or f"(the {what} log is empty)"


def _through_helper_job(v: SlurmObservation, job: Mapping[str, str] | None, job_id: str, *, label: str, waiting: str,
                        log_flag: Literal["convert_log", "prefetch_log"], log_tail: str | None, reason: Callable[[str], str]) -> SlurmObservation:
    """The training job's verdict, seen through a CPU-only job it depends on (``afterok``): waiting while that
    runs; when it ended without success the training job never started (SLURM cancels it,
    ``--kill-on-invalid-dep``, or leaves it PENDING with DependencyNeverSatisfied), so ERROR with ``reason``
    read from its log (``needs_log`` first, with ``log_flag`` saying which log)."""
    if job is None or not job.get("state"):
        return v
    state = job["state"]
    if v.state in (State.RUNNING, State.COMPLETE, State.ERROR) or state == "COMPLETED":
        return v
    if state in PENDING_STATES | RUNNING_STATES:
        if v.state == State.PENDING:
            return verdict(State.PENDING, f"waiting for {label} {job_id} ({state.lower()}{waiting})",
                           v.observed, moved=v.moved, pending_reason=v.pending_reason, convert_log=v.convert_log,
                           prefetch_log=v.prefetch_log)
        return v
    head = f"{label} {job_id} ended {state}{_exit_text(job.get('exit_code'))}"
    if log_tail is None:
        return verdict(State.ERROR, head, v.observed, err_class="ERR_PROGRAM", needs_log=True,
                       convert_log=log_flag == "convert_log", prefetch_log=log_flag == "prefetch_log")
    return verdict(State.ERROR, f"{head}: {reason(log_tail)}", v.observed, err_class="ERR_PROGRAM")


def with_conversion(v: SlurmObservation, conv: Mapping[str, str] | None, convert_id: str, *, log_tail: str | None = None) -> SlurmObservation:
    """The training job's verdict, seen through the image conversion job it depends on (the conversion log's
    last lines when it failed)."""
    def reason(log: str) -> str:
        hint = "; " + LOG_HINTS[0][1] if "Could not process JSON input" in log else ""
        return f"{_last_lines(log, 'conversion')}{hint}; the training job never started"

    return _through_helper_job(v, conv, convert_id, label="image conversion job", waiting="",
                               log_flag="convert_log", log_tail=log_tail, reason=reason)


def with_prefetch(v: SlurmObservation, pre: Mapping[str, str] | None, prefetch_id: str, *,
                  log_tail: str | None = None) -> SlurmObservation:
    """The training job's verdict, seen through the CPU-only prefetch job it depends on
    (:mod:`taobank.platforms.slurm.prefetch`): its own one-line reason when it failed (over the cap, a missing object,
    no access), else its log's last lines."""
    def reason(log: str) -> str:
        said = [ln.strip() for ln in log.splitlines() if ln.strip().startswith("tao: prefetch failed")]
        if said:
            return said[-1].removeprefix("tao: ")
        return f"{_last_lines(log, 'prefetch')}; the training job never started"

    return _through_helper_job(v, pre, prefetch_id, label="prefetch job", waiting=", CPU only",
                               log_flag="prefetch_log", log_tail=log_tail, reason=reason)


_HOP_FROM = re.compile(r"[0-9]+(_[0-9]+)?\Z")


def follow_retries(text: str | None, jid: str) -> dict[str, Any] | None:
    """The last hop from ``jid`` in a job folder's ``meta/retries.jsonl`` (the job resubmitted itself), else None."""
    hops: dict[str, dict[str, Any]] = {}
    for line in (text or "").splitlines():
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        # "from" may be a sweep trial's array task (<array id>_<task>); a resubmitted job is a plain id
        if isinstance(entry, dict) and _HOP_FROM.match(str(entry.get("from", ""))) and str(entry.get("next", "")).isdigit():
            hops[str(entry["from"])] = entry
    cur, last, seen = str(jid), None, set()
    while cur in hops and cur not in seen:
        seen.add(cur)
        last = hops[cur]
        cur = str(last["next"])
    if last is None:
        return None
    return {"next": cur, "attempt": int(last.get("attempt") or 0), "failed_on": str(last.get("failed_on") or ""),
            "excluded": str(last.get("excluded") or ""), "reason": str(last.get("reason") or "infra"),
            "run_seconds": int(last.get("run_seconds") or 0) if str(last.get("run_seconds") or "0").isdigit() else 0}
