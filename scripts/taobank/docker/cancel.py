"""cancel on Docker: ``docker stop -t GRACE`` (SIGTERM, the grace to save a checkpoint, then SIGKILL), then a
``docker kill`` if it still runs; the record says CANCELED, or how the job really ended when it ended first.
A container never started (a held sweep trial) is removed. :func:`cancel_many` does it for many in a few calls."""
from __future__ import annotations

from .. import records
from ..errors import TaoError
from ..states import State
from . import engine as eng
from . import facts, logs, observe


def cancel(rec: dict) -> dict:
    e = eng.Engine.of(rec)
    name = facts.container_of(rec)
    before = observe.inspect(e, [name]).get(name)
    if before is None:
        return records.mark(rec["id"], State.CANCELED, message="canceled: its container was already gone "
                            "(removed outside the bank); nothing to stop")
    seen = observe.classify(before, memory=(rec.get("backend") or {}).get("memory"))
    if seen.state in (State.COMPLETE, State.ERROR):  # it ended before the cancel: say how
        return observe.mark(rec, seen)
    if str(before.get("Status") or "").lower() == "created":  # never started (a held sweep trial): remove it
        e.run(["rm", "--force", name], what=f"{e.name} rm")
        return records.mark(rec["id"], State.CANCELED, message="canceled before it started: its container was "
                            "removed", backend={"container_state": "removed"})
    grace = int((rec.get("backend") or {}).get("stop_grace_seconds") or facts.default("stop_grace_seconds"))
    e.run(["stop", "--time", str(grace), name], check=False, timeout=grace + 60, what=f"{e.name} stop")
    after = observe.inspect(e, [name]).get(name) or {}
    how = f"stopped (SIGTERM, then SIGKILL after {grace}s)"
    if after.get("Running"):
        e.run(["kill", name], what=f"{e.name} kill")
        how = f"killed (still running {grace}s after SIGTERM)"
    code = after.get("ExitCode")
    logs.save(rec, e)
    return records.mark(rec["id"], State.CANCELED, message=f"canceled: container {how}",
                        backend={"container_state": "exited", **({"exit_code": code} if isinstance(code, int) else {})})


def cancel_many(recs: list[dict]) -> tuple[list[dict], list[str]]:
    """Cancel several jobs (a sweep's trials) per engine address in a fixed number of engine calls: ONE
    ``inspect`` of all, ONE ``stop`` of the running ones (in parallel: the CLI stops them at once), ONE ``kill``
    of any still running after the grace, ONE ``rm`` of the held ones (created, never started), and the saved
    logs of each one that ran (a call each, at most --max-concurrent of a sweep). (records, one-line errors)"""
    groups: dict[tuple[str, str], list[dict]] = {}
    out: list[dict] = []
    for rec in recs:
        if not rec.get("backend_ref"):  # never launched: nothing on the engine
            out.append(records.mark(rec["id"], State.CANCELED, message="canceled before its container was made"))
            continue
        e = eng.Engine.of(rec)
        groups.setdefault((e.name, e.host or ""), []).append(rec)
    errors: list[str] = []
    for (name, host), group in groups.items():
        e = eng.Engine(name, host or None)
        try:
            done, failed = _cancel_group(e, group)
        except TaoError as exc:
            errors += [f"{r['id']}: {exc}" for r in group]
            continue
        out += done
        errors += failed
    return out, errors


def _cancel_group(e: eng.Engine, group: list[dict]) -> tuple[list[dict], list[str]]:
    names = {r["id"]: facts.container_of(r) for r in group}
    seen = observe.inspect(e, list(names.values()))
    out: list[dict] = []
    running: list[dict] = []
    held: list[dict] = []
    for rec in group:
        st = seen.get(names[rec["id"]])
        if st is None:
            out.append(records.mark(rec["id"], State.CANCELED, message="canceled: its container was already gone "
                                    "(removed outside the bank); nothing to stop"))
            continue
        v = observe.classify(st, memory=(rec.get("backend") or {}).get("memory"))
        if v.state in (State.COMPLETE, State.ERROR):  # it ended before the cancel: say how
            out.append(observe.mark(rec, v))
        elif str(st.get("Status") or "").lower() == "created":
            held.append(rec)
        else:
            running.append(rec)
    errors: list[str] = []
    if held:  # never started: removed, so nothing can start it later
        res = e.run(["rm", "--force", *(names[r["id"]] for r in held)], check=False, timeout=300, what=f"{e.name} rm")
        if not res.ok:
            errors += [f"{r['id']}: {eng.explain(e.name, res.stderr, f'{e.name} rm', res.returncode)}" for r in held]
            held = []
        for rec in held:
            out.append(records.mark(rec["id"], State.CANCELED, message="canceled before it started (a held sweep "
                                    "trial): its container was removed", backend={"container_state": "removed"}))
    if running:
        grace = max(int((r.get("backend") or {}).get("stop_grace_seconds") or facts.default("stop_grace_seconds"))
                    for r in running)
        e.run(["stop", "--time", str(grace), *(names[r["id"]] for r in running)], check=False,
              timeout=grace + 120, what=f"{e.name} stop")
        after = observe.inspect(e, [names[r["id"]] for r in running])
        still = [r for r in running if (after.get(names[r["id"]]) or {}).get("Running")]
        if still:
            e.run(["kill", *(names[r["id"]] for r in still)], check=False, what=f"{e.name} kill")
        for rec in running:
            code = (after.get(names[rec["id"]]) or {}).get("ExitCode")
            how = (f"killed (still running {grace}s after SIGTERM)" if rec in still
                   else f"stopped (SIGTERM, then SIGKILL after {grace}s)")
            logs.save(rec, e)
            out.append(records.mark(rec["id"], State.CANCELED, message=f"canceled: container {how}",
                                    backend={"container_state": "exited",
                                             **({"exit_code": code} if isinstance(code, int) else {})}))
    return out, errors
