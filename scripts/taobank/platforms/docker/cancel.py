"""cancel on Docker: ``docker stop -t GRACE`` (SIGTERM, the grace to save a checkpoint, then SIGKILL), then a
``docker kill`` if it still runs; the record says CANCELED, or how the job really ended when it ended first.
A container never started (a held sweep trial) is removed. :func:`cancel_many` does it for many in a few calls.
Only stops and says what happened (:class:`taobank.contract.Stop`); the core marks the records."""
from __future__ import annotations

from ... import records
from ...core import track
from ...contract import Observation, Stop
from ...errors import TaoError
from ...states import State
from . import engine as eng
from . import logs, observe
from ...records import Record

GONE = "canceled: its container was already gone (removed outside the bank); nothing to stop"


def stop(recs: list[Record]) -> list[Stop]:
    """One job alone (:func:`cancel`), several in a fixed number of engine calls (:func:`cancel_many`)."""
    return [cancel(recs[0])] if len(recs) == 1 else cancel_many(recs)


def _ended(rec: Record, seen: Observation) -> Stop:
    """It ended before the cancel: say how (the engine's facts and progress as status would show them)."""
    v = track.tao_last_word(observe.said(rec, seen))  # TAO's FAILURE with exit 0 ended it in error, as status says
    return Stop(rec.id, "ended", v.message, state=v.state, err_class=v.err_class,
                backend={k: x for k, x in v.backend.items() if x is not None}, view=v.view)


def cancel(rec: Record) -> Stop:
    e = eng.Engine.of(rec)
    facts = eng.DockerFacts.of(rec)
    name = facts.container
    before = observe.inspect(e, [name]).get(name)
    if before is None:
        return Stop(rec.id, "gone", GONE)
    seen = observe.classify(before, memory=facts.memory)
    if seen.state in (State.COMPLETE, State.ERROR):  # it ended before the cancel: say how
        return _ended(rec, seen)
    if str(before.get("Status") or "").lower() == "created":  # never started (a held sweep trial): remove it
        e.run(["rm", "--force", name], what=f"{e.name} rm")
        return Stop(rec.id, "stopped", "canceled before it started: its container was removed",
                    backend={"container_state": "removed"})
    grace = _grace(facts)
    e.run(["stop", "--time", str(grace), name], check=False, timeout=grace + 60, what=f"{e.name} stop")
    after = observe.inspect(e, [name]).get(name) or {}
    how = f"stopped (SIGTERM, then SIGKILL after {grace}s)"
    if after.get("Running"):
        e.run(["kill", name], what=f"{e.name} kill")
        how = f"killed (still running {grace}s after SIGTERM)"
    code = after.get("ExitCode")
    logs.save(rec, e)
    return Stop(rec.id, "stopped", f"canceled: container {how}",
                backend={"container_state": "exited", **({"exit_code": code} if isinstance(code, int) else {})})


def remove_finished(rec: Record) -> str | None:
    """A finished job's container, still there (a canceled one, or one whose end no status saw): its logs saved,
    then removed (``rm`` without --force: never a running one); a note, or None when it was gone already."""
    e = eng.Engine.of(rec)
    name = eng.container_of(rec)
    seen = observe.inspect(e, [name]).get(name)
    if seen is None:
        return None
    if seen.get("Running"):
        return f"its container {name} still runs: not removed (cancel it first)"
    if not (records.artifact_dir(rec) / logs.SAVED).is_file():
        logs.save(rec, e)
    res = e.run(["rm", "--", name], check=False, what=f"{e.name} rm")
    return f"removed its container {name}" if res.ok else f"could not remove its container {name}: {e.name} rm {name}"


def cancel_many(recs: list[Record]) -> list[Stop]:
    """Cancel several jobs (a sweep's trials) per engine address in a fixed number of engine calls: ONE
    ``inspect`` of all, ONE ``stop`` of the running ones (in parallel: the CLI stops them at once), ONE ``kill``
    of any still running after the grace, ONE ``rm`` of the held ones (created, never started), and the saved
    logs of each one that ran (a call each, at most --max-concurrent of a sweep). A job not stopped is its
    ``Stop.error``."""
    out = [Stop(rec.id, "never_launched", "canceled before its container was made")  # nothing on the engine
           for rec in recs if not rec.backend_ref]
    for e, group in eng.Engine.grouped([rec for rec in recs if rec.backend_ref]):
        try:
            out += _cancel_group(e, group)
        except TaoError as exc:
            out += [Stop(r.id, error=str(exc)) for r in group]
    return out


def _cancel_group(e: eng.Engine, group: list[Record]) -> list[Stop]:
    facts = {r.id: eng.DockerFacts.of(r) for r in group}
    names = {r.id: facts[r.id].container for r in group}
    seen = observe.inspect(e, list(names.values()))
    out: list[Stop] = []
    running: list[Record] = []
    held: list[Record] = []
    for rec in group:
        st = seen.get(names[rec.id])
        if st is None:
            out.append(Stop(rec.id, "gone", GONE))
            continue
        v = observe.classify(st, memory=facts[rec.id].memory)
        if v.state in (State.COMPLETE, State.ERROR):  # it ended before the cancel: say how
            out.append(_ended(rec, v))
        elif str(st.get("Status") or "").lower() == "created":
            held.append(rec)
        else:
            running.append(rec)
    if held:  # never started: removed, so nothing can start it later
        res = e.run(["rm", "--force", *(names[r.id] for r in held)], check=False, timeout=300, what=f"{e.name} rm")
        if not res.ok:
            out += [Stop(r.id, error=eng.explain(e.name, res.stderr, f"{e.name} rm", res.returncode)) for r in held]
            held = []
        for rec in held:
            out.append(Stop(rec.id, "stopped", "canceled before it started (a held sweep trial): its container "
                            "was removed", backend={"container_state": "removed"}))
    if running:
        grace = max(_grace(facts[r.id]) for r in running)
        e.run(["stop", "--time", str(grace), *(names[r.id] for r in running)], check=False,
              timeout=grace + 120, what=f"{e.name} stop")
        after = observe.inspect(e, [names[r.id] for r in running])
        still = [r for r in running if (after.get(names[r.id]) or {}).get("Running")]
        if still:
            e.run(["kill", *(names[r.id] for r in still)], check=False, what=f"{e.name} kill")
        for rec in running:
            code = (after.get(names[rec.id]) or {}).get("ExitCode")
            how = (f"killed (still running {grace}s after SIGTERM)" if rec in still
                   else f"stopped (SIGTERM, then SIGKILL after {grace}s)")
            logs.save(rec, e)
            out.append(Stop(rec.id, "stopped", f"canceled: container {how}",
                            backend={"container_state": "exited",
                                     **({"exit_code": code} if isinstance(code, int) else {})}))
    return out


def _grace(facts: eng.DockerFacts) -> int:
    """Seconds between SIGTERM and SIGKILL: the job's own, else the pinned default."""
    return int(eng.default("stop_grace_seconds")) if facts.stop_grace_seconds is None else facts.stop_grace_seconds
