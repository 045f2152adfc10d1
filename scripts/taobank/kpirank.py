"""Which way a KPI is better: the one rule of every verb that ranks by a KPI (``artifacts --kpi``, ``fetch --best``,
``prune --keep best``, ``sweep best``, ``status --sweep --kpi``, ``submit --parent-kpi``).

``--mode`` when given; otherwise the direction TAO's own AutoML infers from the metric's name (nvidia-tao-core's
``automl`` controller and its brains): a name holding ``loss``, or ``evaluation_cost``, is better lower, every
other KPI (mAP, accuracy, F1 ...) higher. Taking lower as the default whatever the name kept the worst checkpoint
of an ``mAP``. A direction taken from the name is said wherever the ranking is shown.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import UsageError

MODES = ("min", "max")

#: What ``--mode`` says on every ranking verb when it is left out.
MODE_HELP = ("best is the lowest (min) or highest (max) value; default: from the KPI's name, as TAO's AutoML reads "
             "it (lower for a name with 'loss', higher otherwise)")


@dataclass(frozen=True)
class Direction:
    """``mode`` (min or max) and whether it was taken from the KPI's name (no ``--mode`` given)."""

    mode: str
    inferred: bool = False

    @property
    def source(self) -> str:
        """``name`` or ``flag``: where the direction came from (the JSON output's ``mode_from``)."""
        return "name" if self.inferred else "flag"

    def text(self) -> str:
        """The direction as the text output shows it: ``max`` or ``max, from the KPI's name``."""
        return f"{self.mode}, from the KPI's name" if self.inferred else self.mode


def from_name(kpi: str) -> str:
    """The direction of ``kpi`` by its name alone (TAO AutoML's rule): ``min`` for a loss or a cost, else ``max``."""
    name = str(kpi).strip().lower()
    return "min" if "loss" in name or name == "evaluation_cost" else "max"


def direction(kpi: str | None, mode: str | Direction | None) -> Direction:
    """The direction a ranking by ``kpi`` uses: ``mode`` as given (min or max), else :func:`from_name`; an unknown
    mode is a one-line usage error."""
    if isinstance(mode, Direction):
        return mode
    if mode is None:
        return Direction(from_name(kpi or ""), inferred=True)
    if mode not in MODES:
        raise UsageError(f"--mode {str(mode)[:40]!r} is unknown: use min or max (or leave it out: from the KPI's "
                         "name)")
    return Direction(mode)


def inferred_note(kpi: str | None, mode: str | None, flag: str = "--mode") -> str | None:
    """The note a verb prints where a ranking it made is not shown by itself (``--parent-kpi``): which way ``kpi``
    was ranked when ``flag`` was left out; None when it was given (or there is no KPI)."""
    if kpi is None or mode is not None:
        return None
    way = direction(kpi, None)
    return (f"{kpi} ranked {'lowest' if way.mode == 'min' else 'highest'} first ({way.text()}); "
            f"{flag} {'max' if way.mode == 'min' else 'min'} ranks the other way")


__all__ = ["MODES", "MODE_HELP", "Direction", "from_name", "direction", "inferred_note"]
