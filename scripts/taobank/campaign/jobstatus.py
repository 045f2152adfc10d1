"""status as the campaign layer reports it: the core's refresh, then held sweep trials released as slots free
and training progress read, so the core's status stays observe-and-mark only (it imports no campaign feature).

The command line calls these (``status``, ``watch``, ``metrics``); :mod:`taobank.core.platform` keeps the core verbs.
"""
from __future__ import annotations

from typing import AbstractSet, Any, Mapping, Sequence

from ..core import platform as core
from .. import records, states
from ..core import sweep_slots, training
from ..errors import TaoError
from ..core.platform import JobView
from ..records import Record
from ..records.store import artifact_dirs, get_each

#: What ``status`` says of a running job whose progress it did not read (one more call per job).
PROGRESS_HINT = "progress: status of this job alone shows its epoch, ETA and KPIs"


def status(platform: str | None, ids: list[str] | None = None, *, retry: bool = True,
           progress: bool = True, problems: list[str] | None = None, recs: list[Record] | None = None,
           every_trial: bool = False) -> list[JobView]:
    """Refresh the chosen records with one query per platform (:func:`taobank.core.platform.refresh`); held sweep
    trials are released as slots free (:func:`taobank.core.sweep_slots.release`). ``progress``: read the progress of a
    lone running job the query could not read (sweeps read theirs in one batch instead). ``problems``: where
    the damaged records skipped among every active one are described (one line each). ``recs``: the records
    this command read already (a sweep's trials, read once), instead of ``ids``; ``every_trial``: they are every
    trial of their sweeps (:func:`taobank.core.sweep_slots.release` reads again only a sweep with a held trial)."""
    if recs is None:
        recs = core.select(platform, ids, "status", problems=problems)
    out = core.refresh(recs, retry=retry)
    released: list[JobView] = []
    for name, group in core.by_platform(recs).items():
        running = [r for r in group if not r.terminal]
        if any(r.sweep for r in running):
            adapter = core.get(name)
            freed = sweep_slots.release(adapter, running, every_trial=every_trial)
            released += adapter.views(_records(freed)) if freed else []
    views = {v.id: v for v in out}
    for view in released:
        views[view.id] = view
    shown = {v.id for v in out}
    out = [views[v.id] for v in out] + [v for i, v in views.items() if i not in shown]
    if progress:
        active = {r.id for r in recs if not r.terminal}
        _add_progress(out, {r.id: r for r in recs})
        keep_progress(out, **ended_now(out, active), held={r.id: r for r in recs})
    return out


def ended_now(views: list[JobView], active: AbstractSet[str], known: dict[str, tuple[dict, bool]] | None = None,
              adapters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """:func:`keep_progress`'s arguments for the views that ended in this status (were ``active`` before it), or
    ended before without a final progress known (marked by another poller: a sweep's supervisor, a watch, an MCP
    status; else a finished job kept the epoch last seen running): read once now where the platform's
    observation does not read status files (or did not see the job end), final as read where it does.
    ``known``: the progress remembered of each view, read here once (:func:`remembered_all`) and kept for
    :func:`keep_progress` (given back under ``known``). ``adapters``: those the caller holds, by platform name."""
    known = remembered_all(views) if known is None else known
    ended = [v for v in views if v.state in states.TERMINAL and (v.id in active or not known[v.id][1])]
    held = adapters or {}
    adapters = {p: held.get(p) or core.get(p) for p in {v.platform for v in ended if v.id in active}}
    read = [v for v in ended if v.id not in active or not adapters[v.platform].progress_in_sweep]
    return {"read": read, "read_already": {v.id for v in ended if v not in read}, "known": known}


#: The last progress status saw of a job, next to its record: a finished job keeps its final ``[epoch ...]`` and
#: KPIs (status lines, sweep tables) without another cluster call. A cache only: the record never holds progress.
PROGRESS_FILE = "progress.json"


def keep_progress(views: list[JobView], *, read: Sequence[JobView] = (), read_already: AbstractSet[str] = frozenset(),
                  known: dict[str, tuple[dict, bool]] | None = None, held: Mapping[str, Record] | None = None) -> None:
    """The one rule for the progress a view shows, on every platform: what status read now (remembered, as the
    final one once the job has ended), else the remembered one. ``read``: views to read first when they have
    none, in one batched read per platform (running trials first: a Kubernetes pod reads its siblings' folders
    on the shared volume), each a final one once read after its end. ``read_already``: ended jobs whose status
    files this status read already: final as they are, even with no progress (never read again). ``known``:
    what :func:`remembered_all` read of these views (each remembered file read once per status). ``held``: the
    records this status read already, by id (their folders are found without reading them again)."""
    known = remembered_all(views) if known is None else known
    ended_empty: list[tuple[str, dict, bool]] = [(v.id, {}, True) for v in views if v.id in read_already and not v.progress]
    unread = [v for v in read if not v.progress]
    for name, group in core.by_platform(_records([v.id for v in unread])).items() if unread else ():
        group.sort(key=lambda r: r.state != states.State.RUNNING)
        try:
            files = core.get(name).read_status_many(group)
        except TaoError:
            continue
        for v in unread:
            if v.id in files:
                v.progress = training.progress_of(files[v.id], v.action or None)
                if not v.progress and v.state in states.TERMINAL:
                    ended_empty.append((v.id, {}, True))  # read after its end, nothing there: not read again
    _remember_all(ended_empty + [(v.id, v.progress, v.state in states.TERMINAL) for v in views if v.progress], known,
                  held or {})
    for v in views:
        if v.progress:
            continue
        seen, final = known.get(v.id) or remembered(v.id)
        if seen and v.state in states.TERMINAL and not final and seen.get("line"):
            # its end could not be read: what status saw while it ran, said so (never shown as where it ended)
            seen = {**seen, "line": f"{seen['line']} (last seen running)", "last_seen_running": True}
        v.progress = seen or None


def _records(ids: list[str]) -> list[Record]:
    """The records of ``ids`` read now, in one read (:func:`taobank.records.get` of each)."""
    out = []
    for rec in get_each(ids):
        if not isinstance(rec, Record):
            raise rec
        out.append(rec)
    return out


def remembered_all(views: Sequence[JobView]) -> dict[str, tuple[dict, bool]]:
    """:func:`remembered` of every view, by job id: the state folder found once, every file read in one call."""
    from .. import fsio

    base = records.state_dir()
    got = fsio.read_json_each([base / f"{v.id}.d" / PROGRESS_FILE for v in views], "progress",
                              follow_links=False, missing_ok=True)
    return {v.id: _remembered_in(read) for v, (_, read) in zip(views, got)}


def remembered(job_id: str, base: Any = None) -> tuple[dict, bool]:
    """(the progress last seen of ``job_id``, whether it is final: read after its end); ({}, False) when none.
    ``base``: the state folder, when the caller found it already."""
    from .. import fsio

    try:
        path = (base or records.state_dir()) / f"{job_id}.d" / PROGRESS_FILE  # read without making the folder
        got: Any = fsio.read_json(path, "progress", f"progress {path}", follow_links=False, missing_ok=True)
    except (TaoError, OSError) as exc:
        got = exc
    return _remembered_in(got)


def _remembered_in(got: Any) -> tuple[dict, bool]:
    """What a read of a remembered progress file gave (:func:`taobank.fsio.read_json`, or its error) as
    (progress, final); ({}, False) for none, or for a file that cannot be read or is not one the bank wrote."""
    if not isinstance(got, tuple):
        return {}, False
    raw, data, unparsed = got
    if raw is None or unparsed is not None or not isinstance(data, dict) or not isinstance(data.get("progress"), dict):
        return {}, False
    return data["progress"], data.get("final") is True


def _remember(job_id: str, progress: dict, *, final: bool, known: dict[str, tuple[dict, bool]] | None = None) -> None:
    """Keep ``progress`` beside the record unless a final one is kept there (``known``: as this status read it,
    updated here on each write; None: read now)."""
    _remember_all([(job_id, progress, final)], {} if known is None else known)


def _folder(job_id: str) -> Any:
    """The artifact folder of ``job_id`` (None when it cannot be made)."""
    try:
        return records.artifact_dir(job_id)
    except (OSError, TaoError):
        return None


def _remember_all(kept: list[tuple[str, dict, bool]], known: dict[str, tuple[dict, bool]],
                  held: Mapping[str, Record] | None = None) -> None:
    """:func:`_remember` of each ``(job id, progress, final)`` (in one step for all: their folders, then the
    files); ``known`` is updated on each write."""
    import json

    from .. import fsio

    todo = [(jid, p, f) for jid, p, f in kept if not (known.get(jid) or remembered(jid))[1]]  # a final one stays
    folders: list[Any] = []
    while len(folders) < len(todo):  # their folders in one pass (one that is refused: None, the pass goes on after it)
        rest = [jid for jid, _, _ in todo[len(folders):]]
        try:
            got: list[Any] = artifact_dirs([(held or {}).get(jid) or jid for jid in rest])
        except OSError:  # the folder of one could not be made: each alone
            got = [_folder(jid) for jid in rest]
        for f in got:
            folders.append(None if isinstance(f, TaoError) else f)
        if not got:
            folders.append(None)
    for (jid, progress, final), folder in zip(todo, folders):
        if folder is None:
            continue
        try:
            fsio.write_private(folder / PROGRESS_FILE, json.dumps({"progress": progress, "final": final},
                                                                   sort_keys=True) + "\n")
        except (OSError, TaoError):
            continue
        known[jid] = (progress, final)


def watch(platform: str | None, ids: list[str] | None, **kwargs: Any) -> list[JobView]:
    """:func:`taobank.core.platform.watch` polling with :func:`status` (held trials released, progress lines)."""
    return core.watch(platform, ids, poll=status, **kwargs)


def _add_progress(views: list[JobView], recs: Mapping[str, Record]) -> None:
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
    files = core.get(rec.platform).read_status_files(rec, live=False)
    return training.metrics_of(files, rec.action or None, job_id, ended=rec.state if rec.terminal else None)


__all__ = ["PROGRESS_HINT", "PROGRESS_FILE", "status", "watch", "metrics", "keep_progress", "remembered", "remembered_all"]
