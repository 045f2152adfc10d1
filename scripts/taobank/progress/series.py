"""The KPI history of a training, one row per epoch, and its renderings (text table, JSON, CSV) and best().

A row is ``{"epoch": 3, "train_loss": 0.41, "val_loss": None, ...}``: the key
column first ("step" when the file never wrote an epoch), then every KPI in
the order first written; ``epoch`` is TAO's own 0-based index, the number in
its checkpoint names.

Which epoch a KPI belongs to follows TAO's real order. At the end of an epoch
TAO validates and writes the validation KPIs on a line with no epoch, then the
epoch's line, then the training loss on another line with no epoch; and every
line repeats the last KPI dict written (TAO replaces the dict, then writes).
So only a *fresh* dict (one that differs from the line before's) is a
measurement, and of the fresh dicts between the epoch lines of epochs A and B:

* the one B's line repeats belongs to B (the validation of B), unless it is
  the only fresh dict there and its KPIs are those TAO writes after an epoch
  line (a training loss carried onto B's line by an epoch without validation);
* every other one belongs to A (written after A's line);
* those before the first epoch line belong to the first epoch.

An epoch's row holds only what was measured in it ("-" in the table where
nothing was). Without any epoch line, a line without a step belongs to the
step last written before it, and KPI values carry forward.

Restarts: each run's rows are taken in file order, and a run replaces every
earlier row from its own first epoch on; so the rows before a resumed run's
first epoch are kept, and the latest run's view of an epoch wins. KPI values
do not carry across runs.
"""
from __future__ import annotations

import csv
import difflib
import io
import math
from typing import Any, Sequence

from ..errors import TaoError, UsageError
from .statusfile import Event, Number, StatusLog, format_number, is_finite_number, json_number

Row = dict[str, Any]


def _key_column(log: StatusLog) -> str | None:
    if any(e.epoch is not None for e in log.events):
        return "epoch"
    if any(e.step is not None for e in log.events):
        return "step"
    return None


def _step_rows(run: list[Event]) -> dict[int, dict[str, Number]]:
    rows: dict[int, dict[str, Number]] = {}
    state: dict[str, Number] = {}
    current: int | None = None
    for event in run:
        state.update(event.kpis)
        current = event.step if event.step is not None else current
        if current is not None and (event.step is not None or event.kpis):
            rows[current] = dict(state)
    return rows


def _record(kpis: dict[str, Number]) -> frozenset[tuple[str, Any]]:
    """A KPI dict as a value that compares by content: NaN is a number that equals nothing, itself included
    (``float("nan")`` of TAO's string KPIs is a new object each line), so it is compared as its JSON word."""
    return frozenset((name, json_number(value)) for name, value in kpis.items())


def _fresh(run: list[Event]) -> list[bool]:
    """Whether each line's KPI dict is a new measurement (TAO repeats the last dict on every later line)."""
    out: list[bool] = []
    before = _record({})
    for event in run:
        record = _record(event.kpis)
        out.append(bool(event.kpis) and record != before)
        before = record
    return out


def _epoch_rows(run: list[Event]) -> dict[int, dict[str, Number]]:
    """Each fresh KPI dict of the run given to its epoch by the rule of this module's docstring."""
    fresh = _fresh(run)
    marks = [i for i, e in enumerate(run) if e.epoch is not None]
    rows: dict[int, dict[str, Number]] = {run[i].epoch: {} for i in marks}  # type: ignore[misc]
    after_names: set[frozenset[str]] = set()  # fresh right after an epoch line: a training loss
    val_names: set[frozenset[str]] = set()    # repeated by the next epoch line: a validation
    bounds = [-1] + marks + [len(run)]
    for a, b in zip(bounds, bounds[1:]):
        dicts = [run[i].kpis for i in range(a + 1, b) if fresh[i] and run[i].epoch is None]
        at_a = run[a].epoch if a >= 0 else None
        at_b = run[b].epoch if b < len(run) else None
        to_b: list[dict[str, Number]] = []
        if at_a is None:
            to_b = dicts
            val_names.update(frozenset(d) for d in dicts)
        elif at_b is not None and dicts and _record(run[b].kpis) == _record(dicts[-1]):
            last = frozenset(dicts[-1])
            if len(dicts) > 1:
                after_names.add(frozenset(dicts[0]))
                val_names.add(last)
                to_b = dicts[-1:]
            elif last in val_names and last not in after_names:
                to_b = dicts
        for d in dicts:
            if at_b is not None and any(d is t for t in to_b):
                rows[at_b].update(d)
            elif at_a is not None:
                rows[at_a].update(d)
        if b < len(run) and fresh[b]:
            rows[run[b].epoch].update(run[b].kpis)  # type: ignore[index]
    return rows


def series(log: StatusLog) -> list[Row]:
    """The KPI series by epoch (or by step when no epoch was written), sorted; [] before any progress."""
    key = _key_column(log)
    if key is None:
        return []
    merged: dict[int, dict[str, Number]] = {}
    for run in log.runs:
        rows = _epoch_rows(run) if key == "epoch" else _step_rows(run)
        if rows:
            first = min(rows)
            merged = {k: v for k, v in merged.items() if k < first}
            merged.update(rows)
    names: list[str] = []
    for values in merged.values():
        names += [n for n in values if n not in names and n != key]
    return [{key: k, **{n: merged[k].get(n) for n in names}} for k in sorted(merged)]


def key_column(rows: Sequence[Row]) -> str:
    """"epoch" or "step": the first column of the rows."""
    return next(iter(rows[0])) if rows else "epoch"


def kpi_names(rows: Sequence[Row]) -> list[str]:
    """The KPI columns of the rows, in order."""
    return list(rows[0])[1:] if rows else []


def nearest_kpi(name: str, names: Sequence[str]) -> str | None:
    """The one of ``names`` a mistyped KPI ``name`` most likely meant (``val_los``: ``val_loss``; case aside), None
    when none is near enough (``val_loss`` is not ``train_loss``)."""
    lowered = {n.lower(): n for n in names}
    near = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.75)
    return lowered[near[0]] if near else None


def require_kpis(rows: Sequence[Row], wanted: Sequence[str]) -> None:
    """One-line TaoError naming the KPIs that exist when one of ``wanted`` is not among them."""
    names = kpi_names(rows)
    missing = [k for k in wanted if k not in names]
    if not missing:
        return
    if not names:
        raise TaoError(f"no KPI {missing[0]!r}: the status file holds no KPI values yet")
    nearest = f" (did you mean {near!r}?)" if (near := nearest_kpi(str(missing[0]), names)) else ""
    raise TaoError(f"no KPI {missing[0]!r} in the status file{nearest}: it has {', '.join(names)}")


def best(rows: Sequence[Row], kpi: str, mode: str = "min") -> Row:
    """The row where ``kpi`` is lowest (``min``) or highest (``max``); the earliest on a tie, NaN ignored."""
    if mode not in ("min", "max"):
        raise UsageError(f"best mode {mode!r} is unknown: use min or max")
    require_kpis(rows, [kpi])
    found = [row for row in rows if is_finite_number(row.get(kpi))]
    if not found:
        raise TaoError(f"KPI {kpi!r} has no finite value yet (only missing or NaN values)")
    chooser = min if mode == "min" else max
    return dict(chooser(found, key=lambda row: row[kpi]))


# ---------------------------------------------------------------- renderings
def to_json(rows: Sequence[Row]) -> list[Row]:
    """The rows as strict JSON values (NaN/infinite KPIs become "nan"/"inf"/"-inf"): what ``--json`` prints."""
    return [{k: json_number(v) for k, v in row.items()} for row in rows]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return format_number(value, 6)


def table(rows: Sequence[Row]) -> str:
    """An aligned text table, right-aligned columns, "-" where a KPI had no value yet."""
    if not rows:
        return "no KPI values in the status file yet"
    columns = list(rows[0])
    cells = [columns] + [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(text.rjust(w) for text, w in zip(line, widths)).rstrip() for line in cells)


def _csv_safe(name: str) -> str:
    """A header a spreadsheet will not run as a formula (a KPI name is written by the training container)."""
    return "'" + name if name[:1] in ("=", "+", "-", "@") else name


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return json_number(value)
    return repr(value) if isinstance(value, float) else str(value)


def to_csv(rows: Sequence[Row]) -> str:
    """The rows as CSV text (header first; an empty cell where a KPI had no value); "" when there are none."""
    if not rows:
        return ""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    columns = list(rows[0])
    writer.writerow([_csv_safe(c) for c in columns])
    for row in rows:
        writer.writerow([_csv_value(row.get(c)) for c in columns])
    return buf.getvalue()
