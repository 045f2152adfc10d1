"""cancel on Docker: ``docker stop -t GRACE`` (SIGTERM, the grace to save a checkpoint, then SIGKILL), then a
``docker kill`` if it still runs; the record says CANCELED, or how the job really ended when it ended first."""
from __future__ import annotations

from .. import records
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
