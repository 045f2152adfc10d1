"""TAO's ``status.json`` read into typed events: the one parser of a training's progress.

TAO's StatusLogger appends one ``json.dumps`` object a line (JSON Lines). The
file is written by the training container and read while it is appended to,
so every line is untrusted: a torn last line, a line that is not JSON or not
an object, or a line over :data:`MAX_LINE` characters is skipped and counted,
never an error. Each kept line becomes an :class:`Event` whose fields are
checked and cleaned once here (numbers in range, text printable and capped),
so nothing downstream meets a raw value.

Runs: a ``STARTED`` line that follows progress (an epoch, a step or a KPI) or
the end of a run begins a new run (TAO truncates or reuses the file when training restarts).
:func:`progress` reads only the latest run; :mod:`taobank.progress.series`
keeps earlier runs' epochs below the point where the latest run took over.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import TaoError
from ..fsio import json_value
from ..states import State

#: The first line of a status file a reader cut to its end: ``#cut <size of the whole file>``.
CUT = "#cut "
#: Longest line read as JSON (characters); a longer one is skipped and counted.
MAX_LINE = 1024 * 1024
#: Distinct KPI names kept per file (a table of thousands of columns helps nobody).
MAX_KPIS = 64
#: Longest KPI name kept.
MAX_KPI_NAME = 128
#: Longest message kept (the rest becomes "...").
MAX_MESSAGE = 300
#: Largest epoch/step count believed (beyond it the value is treated as absent).
MAX_COUNT = 10**15

_TIMEDELTA = re.compile(r"(?:(-?\d{1,9}) days?, )?(\d{1,2}):([0-5]\d):([0-5]\d)(?:\.(\d{1,6}))?")
_STAMP = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4}) (\d{1,2}):(\d{1,2}):(\d{1,2})")
_STATUS = re.compile(r"[A-Za-z_]{1,32}")
#: How TAO says a run succeeded: a RUNNING line (its status word is never SUCCESS for a training). TAO PyTorch's
#: workflow decorator writes f"{mode.capitalize()} finished successfully." ("Train finished successfully.");
#: nvidia-tao-core's monitor_status writes f"{name} {mode} completed successfully" ("DINO train completed
#: successfully").
_FINISHED = re.compile(r"[A-Z][a-z_]{1,40} finished successfully\."
                       r"|[A-Za-z][\w.-]{0,63} [a-z][a-z_]{0,39} completed successfully")
#: Status words that end a run, as TAO or an older writer says them.
SUCCESS_WORDS = frozenset({"SUCCESS", "COMPLETE", "COMPLETED", "DONE"})
FAILURE_WORDS = frozenset({"FAILURE", "FAILED", "ERROR"})
#: The word a search trial's runner (:mod:`taobank.campaign.search.trial`) appends once TAO has stopped, when the study's
#: pruner stopped the run early: an end of its own, neither success nor failure.
PRUNED: str = State.PRUNED.value

Number = int | float


@dataclass
class Fields:
    """What a status line says of a training; absent or unusable values are None."""

    status: str | None = None
    message: str | None = None
    epoch: int | None = None
    max_epoch: int | None = None
    step: int | None = None
    max_step: int | None = None
    #: seconds
    eta: float | None = None
    #: seconds
    time_per_epoch: float | None = None
    #: KPI name -> value, in the order first written
    kpis: dict[str, Number] = field(default_factory=dict)


#: The fields of :class:`Fields` that a later line overrides only when it writes them.
_CARRIED = ("epoch", "max_epoch", "step", "max_step", "eta", "time_per_epoch")


@dataclass
class Event(Fields):
    """One status line, cleaned."""

    #: ``date`` and ``time`` as TAO wrote them ("3/7/2025 9:5:3"; local clock, no zone)
    stamp: str | None = None

    @property
    def has_progress(self) -> bool:
        return self.epoch is not None or self.step is not None or bool(self.kpis)

    @property
    def outcome(self) -> str | None:
        """"SUCCESS", "FAILURE" or "PRUNED" when this line ends its run (TAO's success is a RUNNING line saying
        so; PRUNED is the search runner's word after it stopped TAO)."""
        if self.status == PRUNED:
            return PRUNED
        if self.status in SUCCESS_WORDS or (self.status == "RUNNING" and _FINISHED.fullmatch(self.message or "")):
            return "SUCCESS"
        return "FAILURE" if self.status in FAILURE_WORDS else None


@dataclass
class StatusLog:
    """A parsed status file: every kept event, split into runs, and how many lines were skipped."""

    events: list[Event]
    #: index in ``events`` where each run begins (the first is always 0)
    run_starts: list[int]
    #: non-blank lines read; ``len(events) + skipped == lines``
    lines: int
    #: non-blank lines that were not a usable JSON object (torn, garbage, too long)
    skipped: int
    #: the whole file's size when only its end was read (a ``#cut <size>`` first line), else None
    cut_size: int | None = None

    @property
    def runs(self) -> list[list[Event]]:
        ends = self.run_starts[1:] + [len(self.events)]
        return [self.events[a:b] for a, b in zip(self.run_starts, ends)]

    @property
    def latest(self) -> list[Event]:
        """The events of the latest run (all of them when the file never restarted)."""
        return self.events[self.run_starts[-1]:]


def parse_timedelta(text: Any) -> float | None:
    """Seconds in ``str(timedelta)`` text ("0:01:23.456000", "1 day, 2:03:04"); None when it is not one."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    m = _TIMEDELTA.fullmatch(text.strip())
    if not m:
        return None
    days, hours, minutes, seconds, frac = m.groups()
    return (int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + int(seconds)
            + (int(frac.ljust(6, "0")) / 1e6 if frac else 0.0))


def format_seconds(seconds: float) -> str:
    """``H:MM:SS`` (hours unbounded), rounded to the second: how the progress line shows a duration."""
    total = max(0, int(round(seconds)))
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def stamp_key(stamp: str | None) -> tuple[int, ...] | None:
    """A sortable (year, month, day, hour, minute, second) of an event's stamp; None when unreadable."""
    m = _STAMP.fullmatch(stamp or "")
    if not m:
        return None
    month, day, year, hour, minute, second = (int(g) for g in m.groups())
    return (year, month, day, hour, minute, second)


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def json_number(value: Any) -> Any:
    """``value`` fit for strict JSON: a NaN or infinite KPI (a diverged loss) becomes "nan"/"inf"/"-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


# ---------------------------------------------------------------- cleaning one field
def _printable(text: str) -> str:
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def _text(value: Any, cap: int) -> str | None:
    if not isinstance(value, str):
        return None
    text = _printable(value[: cap * 4])
    if not text:
        return None
    return text if len(text) <= cap else text[: cap - 3] + "..."


def _count(value: Any) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None


def _seconds(value: Any) -> float | None:
    seconds = float(value) if is_finite_number(value) and abs(value) <= 1e12 else parse_timedelta(value)
    return seconds if seconds is not None and seconds >= 0 else None


def _kpi_value(value: Any) -> Number | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) <= MAX_COUNT else None
    if isinstance(value, float):
        return value
    if isinstance(value, str) and len(value) <= 64:
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _kpis(value: Any, known: set[str]) -> dict[str, Number]:
    out: dict[str, Number] = {}
    if not isinstance(value, dict):
        return out
    for raw_name, raw in value.items():
        name = raw_name.strip() if isinstance(raw_name, str) else ""
        if not name or len(name) > MAX_KPI_NAME or not name.isprintable():
            continue
        if name not in known and len(known) >= MAX_KPIS:
            continue
        number = _kpi_value(raw)
        if number is not None:
            known.add(name)
            out[name] = number
    return out


def _status(value: Any) -> str | None:
    return value.upper() if isinstance(value, str) and _STATUS.fullmatch(value) else None


def _event(obj: dict, known: set[str]) -> Event:
    date, time = obj.get("date"), obj.get("time")
    stamp = _text(f"{date} {time}", 64) if isinstance(date, str) and isinstance(time, str) else None
    return Event(
        status=_status(obj.get("status")), message=_text(obj.get("message"), MAX_MESSAGE),
        epoch=_count(obj.get("epoch")), max_epoch=_count(obj.get("max_epoch")),
        step=_count(obj.get("step")), max_step=_count(obj.get("max_step")),
        eta=_seconds(obj.get("eta")), time_per_epoch=_seconds(obj.get("time_per_epoch")),
        kpis=_kpis(obj.get("kpi"), known), stamp=stamp)


def _object(line: str) -> dict | None:
    if len(line) > MAX_LINE or not line.startswith("{"):
        return None
    try:
        value = json_value(line, "status line")
    except TaoError:
        return None
    return value if isinstance(value, dict) else None


# ---------------------------------------------------------------- API
def parse(text: str | bytes | None) -> StatusLog:
    """Every line of a status file read as an event; what cannot be read is counted in ``skipped``.

    Work is linear in the text's length; nothing here raises on any input
    (bytes are decoded as UTF-8, undecodable bytes replaced).
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    events: list[Event] = []
    starts = [0]
    lines = skipped = 0
    known: set[str] = set()
    progressed = False  # the current run has progress: a STARTED now begins a new run
    cut_size = None
    for raw in (text if isinstance(text, str) else "").split("\n"):
        line = raw.strip()
        if not line:
            continue
        if lines == 0 and cut_size is None and line.startswith(CUT) and line[len(CUT):].isdigit():
            cut_size = int(line[len(CUT):])  # the reader kept only the file's end
            continue
        lines += 1
        obj = _object(line)
        if obj is None:
            skipped += 1
            continue
        event = _event(obj, known)
        if event.status == "STARTED" and progressed:
            starts.append(len(events))
            progressed = False
        progressed = progressed or event.has_progress or event.outcome is not None
        events.append(event)
    return StatusLog(events=events, run_starts=starts, lines=lines, skipped=skipped, cut_size=cut_size)


@dataclass
class Progress(Fields):
    """Where the latest run stands: each field is the last value written in that run (None: never written);
    ``kpis`` holds the latest value of each KPI."""

    #: ``date time`` of the last line, as TAO wrote it (local clock of the trainer, no zone)
    last_update: str | None = None

    #: KPIs shown on :meth:`line` before "(+N more)"
    LINE_KPIS = 8

    def to_dict(self) -> dict[str, Any]:
        """The fields as strict JSON values (a NaN KPI becomes "nan")."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["kpis"] = {k: json_number(v) for k, v in self.kpis.items()}
        return out

    def line(self) -> str:
        """One compact line: ``epoch 3/10 eta 0:12:30 train_loss=0.412 mAP=0.31`` ("" when nothing is known).

        Epochs are shown from 1 (TAO writes 0-based ``epoch`` and ``max_epoch``, the last index).
        The status leads only when it is not RUNNING (``SUCCESS epoch 10/10 ...``; TAO's
        "Train finished successfully." or "DINO train completed successfully" line reads as SUCCESS);
        the step form (``step 120/1000``) stands in when no epoch was written.
        """
        parts: list[str] = []
        if self.status and self.status != "RUNNING":
            parts.append(self.status)
        if self.epoch is not None:  # TAO counts epochs from 0 (max_epoch is the last index): people from 1
            parts.append(f"epoch {epoch_text(self.epoch, self.max_epoch)}")
        elif self.step is not None:
            parts.append(f"step {self.step}" + (f"/{self.max_step}" if self.max_step is not None else ""))
        if self.eta is not None and self.status in (None, "RUNNING", "STARTED"):
            parts.append(f"eta {format_seconds(self.eta)}")
        shown = list(self.kpis.items())[: self.LINE_KPIS]
        parts += [f"{name}={format_number(value)}" for name, value in shown]
        if len(self.kpis) > len(shown):
            parts.append(f"(+{len(self.kpis) - len(shown)} more)")
        return " ".join(parts)


def outcome(log: StatusLog) -> tuple[str, str | None] | None:
    """How the latest run ended: ("SUCCESS" | "FAILURE" | "PRUNED", its message), or None while it has not."""
    for event in reversed(log.latest):
        if event.outcome is not None:
            return event.outcome, event.message
    return None


def text_outcome(text: str | None) -> dict[str, Any] | None:
    """How the latest run in TAO's ``status.json`` ended (``{"status": "SUCCESS"|"FAILURE"|"PRUNED", "message"}``),
    else None. Retries share the results folder, so an earlier attempt's end says nothing about this one;
    TAO's success is its "Train finished successfully." (or monitor_status's "... completed successfully")
    line. A whole-file JSON object or list (an older writer) is read as its lines."""
    if not text or not text.strip():
        return None
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, (dict, list)):
        items = whole if isinstance(whole, list) else [whole]
        text = "\n".join(json.dumps(i) for i in items if isinstance(i, dict))
    ended = outcome(parse(text))
    return None if ended is None else {"status": ended[0], "message": (ended[1] or "")[:300]}


def epoch_text(epoch: int, max_epoch: int | None) -> str:
    """An epoch as people count it: TAO's 0-based ``epoch`` of ``max_epoch`` (the last index) -> ``3/10``."""
    return f"{epoch + 1}" + (f"/{max_epoch + 1}" if max_epoch is not None else "")


def format_number(value: Number, digits: int = 4) -> str:
    """A KPI for people: integers whole, floats to ``digits`` significant digits (0.412, 1.235e+04, nan)."""
    return str(value) if isinstance(value, int) else format(value, f".{digits}g")


def progress(log: StatusLog) -> Progress:
    """The latest run folded into one :class:`Progress` (status and message from its last status line)."""
    out = Progress()
    ended = False
    for event in log.latest:
        if event.outcome is not None:
            out.status, out.message, ended = event.outcome, event.message, True
        elif event.status is not None and not ended:  # a note after the end (an upload) keeps the verdict
            out.status, out.message = event.status, event.message
        for name in _CARRIED:
            value = getattr(event, name)
            if value is not None:
                setattr(out, name, value)
        out.kpis.update(event.kpis)
        out.last_update = event.stamp or out.last_update
    return out
