"""status on Docker: ONE ``docker inspect`` for every job's container, mapped to the bank's states,
plus TAO's status files read from the local results folders (progress in the same sweep).

A container that is gone (``docker rm`` outside the bank) makes its job UNKNOWN with a one-line
reason: its end cannot be known, so it is never taken for COMPLETE.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from .. import failures, records, states, training
from ..contract import Observation
from ..errors import TaoError
from ..progress.remote import read_argv, split_files
from ..run import run
from ..states import State
from . import engine as eng
from . import facts, logs

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
    infra = failures.infra_log_match(log_tail)
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


def status_files(rec: Mapping[str, Any]) -> dict[str, str]:
    """TAO's status files of the job's local results folder (the same reader script as the other platforms)."""
    folder = (rec.get("backend") or {}).get("results_dir") or rec.get("results_dir")
    if not folder or folder == records.NO_RESULTS_DIR:
        return {}
    res = run(read_argv(folder), check=False, timeout=30, what="reading status files")
    return split_files(res.stdout) if res.ok else {}


def refresh(recs: list[dict]) -> list[dict]:
    """Observe ``recs`` with one inspect per engine address and mark them; returns the records (with progress)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in recs:
        if r["state"] in states.TERMINAL or not r.get("backend_ref"):
            continue
        e = eng.Engine.of(r)
        groups.setdefault((e.name, e.host or ""), []).append(r)
    out = {r["id"]: r for r in recs}
    for (name, host), group in groups.items():
        e = eng.Engine(name, host or None)
        seen = inspect(e, [facts.container_of(r) for r in group])
        finished = []
        for r in group:
            st = seen.get(facts.container_of(r))
            v = classify(st, memory=(r.get("backend") or {}).get("memory"))
            if v.needs_log:
                tail = e.run(["logs", "--tail", "200", facts.container_of(r)], check=False, what=f"{name} logs")
                v = classify(st, memory=(r.get("backend") or {}).get("memory"),
                             log_tail=(tail.stdout or "") + (tail.stderr or ""))
            out[r["id"]] = mark(r, v, _times(st) if v.state in (State.COMPLETE, State.ERROR) else {})
            if v.state in (State.COMPLETE, State.ERROR) and st is not None:
                logs.save(r, e)  # once, at the end: the logs outlive the container
                finished.append(facts.container_of(r))
        if finished:  # removed with their jobs, in one call: a container's saved configuration holds its secrets
            e.run(["rm", "--", *finished], check=False, what=f"{name} rm")
    return list(out.values())


def _times(st: Mapping[str, Any] | None) -> dict:
    """When the container ran, as the engine says (kept on the record: the container is removed with its job)."""
    out = {}
    for key, field in (("StartedAt", "started_at"), ("FinishedAt", "finished_at")):
        v = (st or {}).get(key)
        if isinstance(v, str) and 0 < len(v) <= 64 and v.replace(":", "").replace("-", "").replace(".", "") \
                .replace("T", "").replace("Z", "").replace("+", "").isdigit():
            out[field] = v
    return out


def mark(rec: dict, v: Observation, extra: Mapping[str, Any] | None = None) -> dict:
    """Write the observation to the record (the transition table decides; progress is shown, never stored);
    ``extra``: more engine facts for the record (a finished container's start and end)."""
    new = v.state
    if rec["state"] == State.UNKNOWN and new == State.PENDING:
        new = State.UNKNOWN  # the table has no UNKNOWN -> PENDING
    meta = {"container_state": v.observed, "exit_code": v.exit_code, "reason": v.reason, **(extra or {})}
    marked = records.mark(rec["id"], new, source="poller", message=v.message or None,
                          err_class=v.err_class if new == State.ERROR else None,
                          backend={k: x for k, x in meta.items() if x is not None})
    if new in (State.RUNNING, State.COMPLETE, State.ERROR):
        seen = training.progress_of(status_files(marked), marked.get("action"))
        if seen:
            marked = {**marked, "progress": seen}
    return marked
