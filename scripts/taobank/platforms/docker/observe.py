"""status on Docker: ONE ``docker inspect`` for every job's container, mapped to the bank's states,
plus TAO's status files read from the local results folders (progress in the same sweep).

A container that is gone (``docker rm`` outside the bank) makes its job UNKNOWN with a one-line
reason: its end cannot be known, so it is never taken for COMPLETE.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from ... import records, states
from ...core import training
from ...contract import Observation
from ...errors import TaoError
from ...progress.remote import read_many_argv, split_many
from ...run import run
from ...states import State
from . import engine as eng
from . import logs
from ...records import Record

_SIGNALS = {130: "SIGINT", 134: "SIGABRT", 137: "SIGKILL", 139: "SIGSEGV", 143: "SIGTERM"}


#: :func:`classify`'s ``infra`` when the log tail is still to be matched
_UNMATCHED: Any = object()


#: Lines of each stream a failure's infrastructure patterns are matched on (the end of the saved tail).
MATCHED_TAIL = 200


def _last(text: str | None, n: int) -> str:
    """The last ``n`` lines of ``text`` (as ``docker logs --tail n`` gives them)."""
    lines = (text or "").split("\n")  # line feeds only: a progress bar's carriage returns stay in their line
    if lines and lines[-1] == "":
        lines.pop()
    return "".join(line + "\n" for line in lines[-n:])


def classify(state: Mapping[str, Any] | None, *, memory: str | None = None, log_tail: str = "",
             infra: str | None = _UNMATCHED) -> Observation:
    """One container's ``.State`` (None: the container is gone) as an Observation. ``infra``: the
    infrastructure pattern ``log_tail`` matches (:func:`taobank.failures.infra_log_match`), when matched already."""
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
    from ... import failures  # (imported where a failure is read)

    if infra is _UNMATCHED:
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


def observe(recs: list[Record], context: dict) -> list[Observation]:
    """What the engines say of ``recs``, one inspect per engine address, in one pass per step for all of them:
    classified, the log tail of each failure read (one ``logs`` per failed container) and matched, then the
    status files of every job that ran read in ONE command (progress); the engine of each finished container is
    kept in ``context`` for :func:`ended`."""
    out = []
    for e, group in eng.Engine.grouped([r for r in recs if r.state not in states.TERMINAL and r.backend_ref]):
        facts = [eng.DockerFacts.of(r) for r in group]
        containers = [f.container for f in facts]
        seen = inspect(e, containers)
        found = [seen.get(name) for name in containers]
        views = [classify(st, memory=f.memory) for f, st in zip(facts, found)]
        failed = [i for i, v in enumerate(views) if v.needs_log]
        # the tail kept beside the record once the job ends (logs.save_many): read once, matched on its end
        tails = [e.run(["logs", "--tail", str(logs.SAVED_TAIL), containers[i]], check=False, what=f"{e.name} logs")
                 for i in failed]
        context.setdefault("logs", {}).update((group[i].id, t) for i, t in zip(failed, tails))
        from ... import failures  # (imported where a failure is read)

        infra = [failures.infra_log_match(t) for t in [_last(r.stdout, MATCHED_TAIL) + _last(r.stderr, MATCHED_TAIL)
                                                       for r in tails]]
        for i, tail, match in zip(failed, tails, infra):
            views[i] = classify(found[i], memory=facts[i].memory,
                                log_tail=(tail.stdout or "") + (tail.stderr or ""), infra=match)
        ended = [v.state in (State.COMPLETE, State.ERROR) for v in views]
        for r, v, st, done in zip(group, views, found, ended):
            said(r, v, _times(st) if done else {}, files=None)
            if done and st is not None:
                context.setdefault("engines", {})[r.id] = e
        with_progress(group, views, facts)
        out += views
    return out


def ended(recs: list[Record], context: dict) -> dict[str, str]:
    """The jobs that ended: their logs saved (they outlive the container), and their containers removed with
    ONE ``rm`` per engine (a container's saved configuration holds its secrets)."""
    engines: dict[str, eng.Engine] = context.get("engines", {})
    finished: dict[tuple[str, str], tuple[eng.Engine, list[str]]] = {}
    done = [(r, engines[r.id]) for r in recs if r.id in engines]
    logs.save_many(done, context.get("logs"))  # once, at the end (the failures' tails read already)
    for (r, e), name in zip(done, [eng.container_of(r) for r, _ in done]):
        finished.setdefault((e.name, e.host or ""), (e, []))[1].append(name)
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


def said(rec: Record, v: Observation, extra: Mapping[str, Any] | None = None, *,
         files: Any = ()) -> Observation:
    """The observation as the core applies it: the engine's facts for the record (``extra``: a finished
    container's start and end), and the progress of a job that ran (shown, never stored; ``files=None``: the
    caller reads it, :func:`with_progress`)."""
    v.job_id = rec.id
    v.backend = {"container_state": v.observed, "exit_code": v.exit_code, "reason": v.reason, **(extra or {})}
    if files is not None:
        with_progress([rec], [v])
    return v


def with_progress(recs: list[Record], views: list[Observation], facts: list[eng.DockerFacts] | None = None) -> None:
    """The progress and TAO's last word of each job that ran (``views``: their observations, in order; ``facts``:
    their records' facts, when read already): every local results folder's status files read in ONE command, then
    each picked and parsed."""
    facts = facts if facts is not None else [eng.DockerFacts.of(r) for r in recs]
    ran = [(r, v, f) for r, v, f in zip(recs, views, facts) if v.state in (State.RUNNING, State.COMPLETE, State.ERROR)]
    if not ran:
        return
    folders = [f.folder for _, _, f in ran]
    kept = [i for i, f in enumerate(folders) if f and f != records.NO_RESULTS_DIR]
    files: list[dict[str, str]] = [{} for _ in ran]
    if kept:
        res = run(read_many_argv([folders[i] for i in kept]), check=False, timeout=30, what="reading status files")
        for i, got in zip(kept, split_many(res.stdout, len(kept)) if res.ok else []):
            files[i] = got
    for (_, v, _), (seen, end) in zip(ran, training.progress_and_end_many(files, [r.action for r, _, _ in ran])):
        v.tao_end = end
        if seen:
            v.view.progress = seen
