"""Sweep concurrency for platforms whose trials are created held: which held trials may run now.

Its own module (records and states only) so the core's status can release trials without importing
the sweep verbs (:mod:`taobank.campaign.sweeps`), which import the core.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from .. import records
from ..records import Record
from ..errors import TaoError
from ..records.store import get_each
from ..records.writes import Marking, mark_many
from ..states import State


def release(adapter: Any, recs: list[Record], *, every_trial: bool = False) -> list[str]:
    """Free slots of each sweep among ``recs`` given to its held trials, oldest trial first (one adapter call per
    sweep). Each sweep's records are read, started and marked under that sweep's lock (:func:`_sweep_lock`): two
    processes releasing at once (status, watch, the supervisor) never start one trial twice.

    A trial counts against ``max_concurrent`` while it is active and released. A trial bound to a slot
    (``backend["slot"]``: the GPUs a Docker trial was made with) waits until no running trial holds it.

    ``every_trial``: ``recs`` are every active trial of their sweeps as this command read them (a sweep's
    status): a sweep none of them is held in has nothing to release and is not read again (a trial is made
    held or not, and once released is never held again)."""
    recs = [r if isinstance(r, Record) else Record.of(r) for r in recs]
    held = {r.sweep for r in recs if r.sweep and (r.backend or {}).get("held")}
    # a record that says held is released on any platform: a sweep made by an older bank (Kubernetes 0.3.x held
    # per-trial Jobs suspended) still runs to its end after an upgrade
    if not getattr(adapter, "holds_trials", False) and not held:
        return []
    out: list[str] = []
    for sid in sorted({r.sweep for r in recs if r.sweep and (r.sweep in held or not every_trial)}):
        with _sweep_lock(sid):
            # read under the lock: a releaser that read before another one started a trial would start it again
            chosen = _choose(records.find(platform=adapter.name, sweep=sid))
            if chosen:
                adapter.release_trials(chosen)
                # each one's state as it is now (one read): a status that takes no sweep lock may have seen it start
                marks: list[Marking] = []
                unread: TaoError | None = None
                for r, cur in zip(chosen, get_each([r.id for r in chosen])):
                    if not isinstance(cur, Record):
                        unread = cur  # the ones before it are marked, as one by one
                        break
                    marks.append(Marking(r.id, cur.state, backend={"held": False},
                                         message="released (a sweep slot is free)"))
                if marks:
                    mark_many(marks)  # one batch
                if unread is not None:
                    raise unread
        out += [r.id for r in chosen]
    return out


def _choose(trials: list[Record]) -> list[Record]:
    """The held trials of one sweep that may start now, oldest first."""
    if not trials:
        return []
    trials.sort(key=lambda r: int(r.trial or 0))
    active = [r for r in trials if r.active]
    # a held trial already seen running was started (by a releaser that stopped before its mark): never again
    held = [r for r in active if r.backend.get("held") and r.state == State.PENDING]
    k = int(trials[0].backend.get("max_concurrent") or len(trials))
    free = k - (len(active) - len(held))
    busy = {_slot(r) for r in active if r not in held} - {None}
    chosen: list[Record] = []
    for r in held:
        if free <= 0:
            break
        if _slot(r) in busy:
            continue
        chosen.append(r)
        free -= 1
        if _slot(r) is not None:
            busy.add(_slot(r))
    return chosen


#: The lock file of one sweep's releases, in the state folder beside the records' own locks.
LOCK_SUFFIX = ".release.lock"


def _sweep_lock(sweep_id: str) -> AbstractContextManager[None]:
    """Held while one process reads, starts and marks the held trials of ``sweep_id``: releases are one at a
    time across every process on this machine (status, watch, the supervisor)."""
    return records.state_lock(f"{sweep_id}{LOCK_SUFFIX}")


def _slot(rec: Record) -> Any:
    return rec.backend.get("slot")
