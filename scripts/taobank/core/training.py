"""How a training goes, whatever the platform: its progress for ``status`` and its KPI series for ``metrics``.

A platform only reads the job's status files (:meth:`Platform.read_status_files`,
``{relative path: text}``); choosing the file, parsing it and shaping what a
user sees happens here, once. TAO writes ``<results>/status.json`` or one per
action (``<results>/train/status.json``).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .. import progress as tao
from ..contract import TaoEnd
from ..errors import TaoError


def chosen_log(files: Mapping[str, str], action: str | None, chosen: str | None = "") -> tuple[str, tao.StatusLog] | None:
    """(the status file to report, parsed), by :func:`taobank.progress.pick` (``chosen``: picked already);
    None when there is none."""
    chosen = tao.pick(dict(files), action) if chosen == "" else chosen
    return None if chosen is None else (chosen, tao.parse(files[chosen]))


def progress_and_end(files: Mapping[str, str], action: str | None) -> tuple[dict[str, Any] | None, TaoEnd | None]:
    """(:func:`progress_of`, :func:`tao_end`) of the same status files, the file to report picked once."""
    chosen = tao.pick(dict(files), action)
    return progress_of(files, action, chosen), tao_end(files, action, chosen)


def progress_and_end_many(files: Sequence[Mapping[str, str]], actions: Sequence[str | None]
                          ) -> list[tuple[dict[str, Any] | None, TaoEnd | None]]:
    """:func:`progress_and_end` of several jobs' status files (a sweep's trials), each file to report picked
    first for all."""
    chosen = [tao.pick(dict(f), a) for f, a in zip(files, actions)]
    return [(progress_of(f, a, c), tao_end(f, a, c)) for f, a, c in zip(files, actions, chosen)]


def progress_of(files: Mapping[str, str], action: str | None, chosen: str | None = "") -> dict[str, Any] | None:
    """The progress the status files show (``line`` is its one-line form), or None when there is none
    (``chosen``: the file :func:`taobank.progress.pick` picked already)."""
    found = chosen_log(files, action, chosen)
    if found is None:
        return None
    chosen, log = found
    now = tao.progress(log)
    line = now.line()
    if not line:
        return None
    return {**now.to_dict(), "line": line, "file": chosen, "skipped_lines": log.skipped}


def tao_end(files: Mapping[str, str], action: str | None, chosen: str | None = "") -> TaoEnd | None:
    """How the latest run in the job's status file ended, None while it has not said; what
    :attr:`taobank.contract.Observation.tao_end` holds (``chosen``: the file picked already)."""
    chosen = tao.pick(dict(files), action) if chosen == "" else chosen
    ended = tao.statusfile.text_outcome(files[chosen]) if chosen else None
    return TaoEnd(ended["status"], ended["message"]) if ended else None


def metrics_of(files: Mapping[str, str], action: str | None, job_id: str, *,
               ended: str | None = None) -> tuple[list[dict], tao.StatusLog, str]:
    """(the KPI series by epoch, the parsed log, the file it came from); one line when there is nothing to show,
    which never says "yet" of a job that has ``ended`` (its final state): nothing more will come."""
    found = chosen_log(files, action)
    if found is None:
        if ended:
            raise TaoError(f"job {job_id} ({ended}) left no TAO status file (status.json, or <action>/status.json) in "
                           "its results folder: its program wrote none (a generic command, or a trainer without "
                           "TAO's status logger), so there are no metrics; its logs: tao_jobs.py logs " + job_id)
        raise TaoError(f"job {job_id} has no TAO status file (status.json) in its results folder yet: it writes one "
                       "once training starts (a generic command writes none)")
    chosen, log = found
    rows = tao.series(log)
    if not rows:
        if ended:
            raise TaoError(f"job {job_id} ({ended}) ended with no epoch or KPI in its {chosen} ({log.lines} line(s), "
                           f"{log.skipped} unreadable): it stopped before its first epoch ended")
        raise TaoError(f"job {job_id}'s {chosen} holds no epoch or KPI yet ({log.lines} line(s), {log.skipped} "
                       "unreadable): try again once an epoch has ended")
    return rows, log, chosen


__all__ = ["chosen_log", "progress_of", "progress_and_end", "progress_and_end_many", "tao_end", "metrics_of"]
