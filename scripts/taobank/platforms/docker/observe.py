"""status on Docker: ONE ``docker inspect`` for every job's container, mapped to the bank's states,
plus TAO's status files read from the local results folders (progress in the same sweep).

A container that is gone (``docker rm`` outside the bank) makes its job UNKNOWN with a one-line
reason: its end cannot be known, so it is never taken for COMPLETE.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from ... import failures, records, states, training
from ...contract import Observation
from ...errors import TaoError
from ...progress.remote import read_argv, split_files
from ...run import run
from ...states import State
from . import engine as eng
from . import logs
from ...records import Record

_SIGNALS = {130: "SIGINT", 134: "SIGABRT", 137: "SIGKILL", 139: "SIGSEGV", 143: "SIGTERM"}


def classify(state: Mapping[str, Any] | None, *, memory: str | None = None, log_tail: str = "") -> Observation:
    """One container's ``.State`` (None: the container is gone) as an Observation."""
    if state is None:
        return Observation(State.UNKNOWN, "the container is gone (removed outside the bank, e.g. docker rm): how "
                           "the job ended is not known; its results folder may still hold its output",
                           reason="ContainerGone", observed="gone")
    status = str(state.get("Status") or "").lower()
    code = state.get("ExitCode")
    code = code if isinstance(code, int) else None
    if status == "created":
        return Observation(State.PENDING, "container created, not started yet", observed=status)
    if status in ("running", "restarting"):
        return Observation(State.RUNNING, "", observed=status)
    if status == "paused":
        return Observation(State.RUNNING, "container paused (docker unpause to go on)", observed=status)
    if status == "removing":
        return Observation(State.UNKNOWN, "the container is being removed", observed=status)
    # exited or dead
    if state.get("OOMKilled"):
        limit = f" of {memory}" if memory else ""
        return Observation(State.ERROR, f"killed by the kernel: out of memory (the container's memory limit{limit}); "
                           "raise memory, or lower the batch size / loader workers", err_class="ERR_PROGRAM",
                           reason="OOMKilled", observed=status, exit_code=code)
    if state.get("Error"):
        return Observation(State.ERROR, f"the engine could not run the container: {state['Error']}",
                           err_class="ERR_INFRA", reason="EngineError", observed=status, exit_code=code)
    if code == 0 and status == "exited":
        return Observation(State.COMPLETE, "exit code 0", observed=status, exit_code=0)
    sig = _SIGNALS.get(code or 0)
    why = f"exit code {code}" + (f" ({sig})" if sig else "")
    infra = failures.infra_log_match(log_tail) if log_tail else None  # no log read yet: nothing to match
    if infra:
        return Observation(State.ERROR, f"{why}: {failures.why(infra)}", err_class="ERR_INFRA", reason=infra,
                           observed=status, exit_code=code)
    return Observation(State.ERROR, f"{why}: see tao_docker.py logs", err_class="ERR_PROGRAM",
                       reason="NonZeroExit", observed=status, exit_code=code, needs_log=True)


def inspect(e: eng.Engine, names: list[str]) -> dict[str, dict]:
    """``<engine> container inspect NAME...`` once: name -> its .State (absent when gone)."""
    res = e.run(["container", "inspect", *names], check=False, what=f"{e.name} inspect")
    text = res.stdout.strip()
    if not text:
        if res.ok or "no such" in (res.stderr or "").lower():
            return {}
        raise TaoError(eng.explain(e.name, res.stderr, f"{e.name} inspect", res.returncode))
    try:
        rows = json.loads(text)
    except ValueError:
        raise TaoError(f"{e.name} inspect printed something that is not JSON: check the engine ({e.name} info)") from None
    out: dict[str, dict] = {}
    for row in rows if isinstance(rows, list) else []:
        name = str(row.get("Name") or "").lstrip("/")
        if name and isinstance(row.get("State"), dict):
            out[name] = {**row["State"], "Id": row.get("Id")}
    return out


def status_files(rec: Record) -> dict[str, str]:
    """TAO's status files of the job's local results folder (the same reader script as the other platforms)."""
    folder = rec.backend.get("results_dir") or rec.results_dir
    if not folder or folder == records.NO_RESULTS_DIR:
        return {}
    res = run(read_argv(folder), check=False, timeout=30, what="reading status files")
    return split_files(res.stdout) if res.ok else {}


def observe(recs: list[Record], context: dict) -> list[Observation]:
    """What the engines say of ``recs``, one inspect per engine address (progress read for the jobs that ran);
    the engine of each finished container is kept in ``context`` for :func:`ended`."""
    out = []
    for e, group in eng.Engine.grouped([r for r in recs if r.state not in states.TERMINAL and r.backend_ref]):
        containers = [eng.container_of(r) for r in group]
        seen = inspect(e, containers)
        for r, name in zip(group, containers):
            st = seen.get(name)
            v = classify(st, memory=r.backend.get("memory"))
            if v.needs_log:
                tail = e.run(["logs", "--tail", "200", name], check=False, what=f"{e.name} logs")
                v = classify(st, memory=r.backend.get("memory"),
                             log_tail=(tail.stdout or "") + (tail.stderr or ""))
            said(r, v, _times(st) if v.state in (State.COMPLETE, State.ERROR) else {})
            if v.state in (State.COMPLETE, State.ERROR) and st is not None:
                context.setdefault("engines", {})[r.id] = e
            out.append(v)
    return out


def ended(recs: list[Record], context: dict) -> dict[str, str]:
    """The jobs that ended: their logs saved (they outlive the container), and their containers removed with
    ONE ``rm`` per engine (a container's saved configuration holds its secrets)."""
    engines: dict[str, eng.Engine] = context.get("engines", {})
    finished: dict[tuple[str, str], tuple[eng.Engine, list[str]]] = {}
    for r in recs:
        e = engines.get(r.id)
        if e is None:
            continue
        logs.save(r, e)  # once, at the end
        finished.setdefault((e.name, e.host or ""), (e, []))[1].append(eng.container_of(r))
    for e, names in finished.values():
        e.run(["rm", "--", *names], check=False, what=f"{e.name} rm")
    return {}


def _times(st: Mapping[str, Any] | None) -> dict:
    """When the container ran, as the engine says (kept on the record: the container is removed with its job)."""
    out = {}
    for key, field in (("StartedAt", "started_at"), ("FinishedAt", "finished_at")):
        v = (st or {}).get(key)
        if isinstance(v, str) and 0 < len(v) <= 64 and v.replace(":", "").replace("-", "").replace(".", "") \
                .replace("T", "").replace("Z", "").replace("+", "").isdigit():
            out[field] = v
    return out


def said(rec: Record, v: Observation, extra: Mapping[str, Any] | None = None) -> Observation:
    """The observation as the core applies it: the engine's facts for the record (``extra``: a finished
    container's start and end), and the progress of a job that ran (shown, never stored)."""
    v.job_id = rec.id
    v.backend = {"container_state": v.observed, "exit_code": v.exit_code, "reason": v.reason, **(extra or {})}
    if v.state in (State.RUNNING, State.COMPLETE, State.ERROR):
        seen, v.tao_end = training.progress_and_end(status_files(rec), rec.action)
        if seen:
            v.view.progress = seen
    return v
