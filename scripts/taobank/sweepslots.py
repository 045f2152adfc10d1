"""Sweep concurrency for platforms whose trials are created held: which held trials may run now.

Its own module (records and states only) so the core's status can release trials without importing
the sweep verbs (:mod:`taobank.sweeps`), which import the core.
"""
from __future__ import annotations

from typing import Any

from . import records
from .records import Record


def release(adapter: Any, recs: list[Record]) -> list[str]:
    """Free slots of each sweep among ``recs`` given to its held trials, oldest trial first (one adapter call).

    A trial counts against ``max_concurrent`` while it is active and released. A trial bound to a slot
    (``backend["slot"]``: the GPUs a Docker trial was made with) waits until no running trial holds it."""
    # a record that says held is released on any platform: a sweep made by an older bank (Kubernetes 0.3.x held
    # per-trial Jobs suspended) still runs to its end after an upgrade
    if not getattr(adapter, "holds_trials", False) and not any((Record.of(r).backend or {}).get("held") for r in recs):
        return []
    sweeps = {r.sweep for r in map(Record.of, recs) if r.sweep}
    chosen: list[Record] = []
    for sid in sorted(sweeps):
        trials = records.find(platform=adapter.name, sweep=sid)
        trials.sort(key=lambda r: int(r.trial or 0))
        active = [r for r in trials if r.active]
        held = [r for r in active if r.backend.get("held")]
        k = int(trials[0].backend.get("max_concurrent") or len(trials))
        free = k - (len(active) - len(held))
        busy = {_slot(r) for r in active if r not in held} - {None}
        for r in held:
            if free <= 0:
                break
            if _slot(r) in busy:
                continue
            chosen.append(r)
            free -= 1
            if _slot(r) is not None:
                busy.add(_slot(r))
    if not chosen:
        return []
    adapter.release_trials(chosen)
    for r in chosen:
        records.mark(r.id, r.state, backend={"held": False}, message="released (a sweep slot is free)")
    return [r.id for r in chosen]


def _slot(rec: Record) -> Any:
    return rec.backend.get("slot")
