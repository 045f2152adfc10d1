"""status as the campaign layer reports it: the core's refresh, then held sweep trials released as slots free
and training progress read, so the core's status stays observe-and-mark only (it imports no campaign feature).

The command line calls these (``status``, ``watch``, ``metrics``); :mod:`taobank.platform` keeps the core verbs.
"""
from __future__ import annotations

from typing import Any, Mapping

from . import platform as core
from . import records, states, sweepslots, training
from .errors import TaoError
from .platform import JobView

#: What ``status`` says of a running job whose progress it did not read (one more call per job).
PROGRESS_HINT = "progress: status of this job alone shows its epoch, ETA and KPIs"


def status(platform: str | None, ids: list[str] | None = None, *, retry: bool = True,
           progress: bool = True) -> list[JobView]:
    """Refresh the chosen records with one query per platform (:func:`taobank.platform.refresh`); held sweep
    trials are released as slots free (:func:`taobank.sweepslots.release`). ``progress``: read the progress of a
    lone running job the query could not read (sweeps read theirs in one batch instead)."""
    recs = core.select(platform, ids, "status")
    out = core.refresh(recs, retry=retry)
    views = {v.id: v for v in out}
    for name, group in core.by_platform(recs).items():
        active = [r for r in group if r["state"] not in states.TERMINAL]
        if any(r.get("sweep") for r in active):
            adapter = core.get(name)
            for jid in sweepslots.release(adapter, active):
                views[jid] = adapter.view(records.load(jid))
    shown = {v.id for v in out}
    out = [views[v.id] for v in out] + [v for i, v in views.items() if i not in shown]
    if progress:
        _add_progress(out, {r["id"]: r for r in recs})
    return out


def watch(platform: str | None, ids: list[str] | None, **kwargs: Any) -> list[JobView]:
    """:func:`taobank.platform.watch` polling with :func:`status` (held trials released, progress lines)."""
    return core.watch(platform, ids, poll=status, **kwargs)


def _add_progress(views: list[JobView], recs: Mapping[str, dict]) -> None:
    """Progress for the one running job of a platform that cannot read it in its sweep (at most one more call);
    the other running jobs get a hint. A failed read never fails the status."""
    for name, group in core.by_platform([recs[v.id] for v in views if v.id in recs]).items():
        adapter = core.get(name)
        if adapter.progress_in_sweep:
            continue
        running = [v for v in views if v.platform == name and v.state == states.State.RUNNING and not v.progress]
        if len(running) != 1:
            for v in running:
                v.extra["progress_hint"] = PROGRESS_HINT
            continue
        view = running[0]
        try:
            files = adapter.read_status_files(recs[view.id], live=True)
            view.progress = training.progress_of(files, view.action or None)
        except TaoError as exc:
            view.extra["progress_error"] = str(exc)


def metrics(platform: str | None, job_id: str) -> tuple[list[dict], Any, str]:
    """The KPI series of a job by epoch (also after it ended): (rows, the parsed log, the file read)."""
    rec = core.load_for(job_id, platform, "metrics")
    files = core.get(rec["platform"]).read_status_files(rec, live=False)
    return training.metrics_of(files, rec.get("action") or None, job_id)


__all__ = ["PROGRESS_HINT", "status", "watch", "metrics"]
