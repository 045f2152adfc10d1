"""The job table every listing prints (like ``squeue`` / ``sky jobs queue``)."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from . import records, states

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


def duration(rec: Mapping[str, Any], now: datetime) -> str:
    """How long the job ran: from when it was first seen RUNNING to its end (now while it runs).

    Transitions are what the polls saw, so a job that started and ended between two polls was never
    seen RUNNING: it counts from its submission (an upper bound), never 0s. A job not launched yet, or
    still waiting for its first start, shows "-".
    """
    if not rec.get("backend_ref"):
        return "-"
    started, ended = (rec.get("started_at"), rec.get("ended_at")) if "started_at" in rec else records.run_times(rec)
    terminal = rec.get("state") in states.TERMINAL
    start = _parse(started) or (_parse(rec.get("created_at")) if terminal else None)
    end = _parse(ended) if terminal else now
    return human(end - start) if start and end else "-"


def row(rec: Mapping[str, Any], now: datetime | None = None) -> list[str]:
    """One table row of a record or a JobView dict."""
    now = now or datetime.now(timezone.utc)
    created = _parse(rec.get("created_at"))
    duration_text = duration(rec, now)
    msg = " ".join(str(rec.get("message") or "").split())
    progress = rec.get("progress") if isinstance(rec.get("progress"), dict) else None
    if progress and progress.get("line"):  # how far a running training is, before the backend's words
        msg = f"[{progress['line']}] {msg}".rstrip()
    if len(msg) > MESSAGE_WIDTH:
        msg = msg[: MESSAGE_WIDTH - 3] + "..."
    state = rec.get("state", "?") + (f" ({rec['err_class']})" if rec.get("err_class") else "")
    cells = [rec.get("id", "?"), rec.get("description") or "-",
             f"{rec.get('network_arch', '?')}/{rec.get('action', '?')}", rec.get("platform", "?"),
             rec.get("backend_ref") or "-", _ago(created, now), duration_text, str(rec.get("attempt") or 1),
             # the job it builds on: its parent (submit --parent), or the job it continues (continue ID)
             rec.get("parent") or rec.get("continues") or "-", state, msg or "-"]
    return [_cell(c) for c in cells]


def _cell(value: object) -> str:
    """One table cell on one line: whitespace runs (newlines included) become one space, other control
    characters are shown escaped, so no field can split or forge a row."""
    from .text import one_line

    return one_line(" ".join(str(value).split())) or "-"


def render(recs: Iterable[Mapping[str, Any]], *, headers: bool = True) -> str:
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
