"""The job table every listing prints (like ``squeue`` / ``sky jobs queue``)."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from .. import states
from ..core.platform import JobView
from ..records import Record

COLUMNS = ("ID", "NAME", "ARCH/ACTION", "PLATFORM", "BACKEND", "SUBMITTED", "DURATION", "ATTEMPT", "PARENT", "STATE",
           "MESSAGE")
MESSAGE_WIDTH = 60


def _parse(ts: str | None) -> datetime | None:
    """A record time (with or without a fraction of a second); None when absent or not a real time."""
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(str(ts), fmt).replace(tzinfo=timezone.utc) if ts else None
        except ValueError:
            continue
    return None


def _ago(then: datetime | None, now: datetime) -> str:
    if then is None:
        return "-"
    return human(now - then) + " ago"


def human(delta: Any) -> str:
    """``timedelta`` -> ``42s``, ``5m``, ``3h12m``, ``2d4h``."""
    secs = max(0, int(delta.total_seconds()))
    if secs < 60:
        return f"{secs}s"
    mins, _ = divmod(secs, 60)
    if mins < 60:
        return f"{mins}m"
    hours, mins = divmod(mins, 60)
    if hours < 24:
        return f"{hours}h{mins:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def duration(job: JobView, now: datetime) -> str:
    """How long the job ran: from when it was first seen RUNNING to its end (now while it runs).

    Transitions are what the polls saw, so a job that started and ended between two polls was never
    seen RUNNING: it counts from its submission (an upper bound), never 0s. A job not launched yet, or
    still waiting for its first start, shows "-".
    """
    if not job.backend_ref:
        return "-"
    terminal = job.state in states.TERMINAL
    start = _parse(job.started_at) or (_parse(job.created_at) if terminal else None)
    end = _parse(job.ended_at) if terminal else now
    return human(end - start) if start and end else "-"


def row(job: JobView | Record | Mapping[str, Any], now: datetime | None = None) -> list[str]:
    """One table row of a job: its view, or its record (as stored, or typed)."""
    job = job if isinstance(job, JobView) else JobView.from_record(job)
    now = now or datetime.now(timezone.utc)
    created = _parse(job.created_at)
    duration_text = duration(job, now)
    msg = " ".join(str(job.message or "").split())
    progress = job.progress if isinstance(job.progress, dict) else None
    if progress and progress.get("line"):  # how far a running training is, before the backend's words
        msg = f"[{progress['line']}] {msg}".rstrip()
    if len(msg) > MESSAGE_WIDTH:
        msg = msg[: MESSAGE_WIDTH - 3] + "..."
    state = job.state + (f" ({job.err_class})" if job.err_class else "")
    cells = [job.id, job.description or "-", f"{job.network_arch}/{job.action}", job.platform,
             job.backend_ref or "-", _ago(created, now), duration_text, str(job.attempt or 1),
             # the job it builds on: its parent (submit --parent), or the job it continues (continue ID)
             job.parent or job.continues or "-", state, msg or "-"]
    return [_cell(c) for c in cells]


def _cell(value: object) -> str:
    """One table cell on one line: whitespace runs (newlines included) become one space, other control
    characters are shown escaped, so no field can split or forge a row."""
    from ..text import one_line

    return one_line(" ".join(str(value).split())) or "-"


def render(recs: Iterable[JobView | Record | Mapping[str, Any]], *, headers: bool = True) -> str:
    """Aligned columns; the last column (MESSAGE) is not padded."""
    rows = [row(r) for r in recs]
    if headers:
        rows.insert(0, list(COLUMNS))
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    lines = []
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r, widths)] + [r[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"
