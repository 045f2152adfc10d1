"""Which way a KPI is better: the one rule of every verb that ranks by a KPI (``artifacts --kpi``, ``fetch --best``,
``prune --keep best``, ``sweep best``, ``status --sweep --kpi``, ``submit --parent-kpi``).

``--mode`` when given; otherwise read from the KPI's name. TAO's own AutoML reads a name holding ``loss`` (or
``evaluation_cost``) as better lower and every other name as better higher; that second half would rank an
``rmse``, a ``fid`` or an error rate the wrong way, and ``prune --keep best`` would then delete the best
checkpoints. So a name is read only when it says which way it goes: lower for a loss, cost, error or distance
word, higher for an accuracy, precision, overlap or score word; any other name needs ``--mode``. A direction
taken from the name is said wherever the ranking is shown.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import UsageError
from .jobspec import KPI_MODES
from .text import one_line

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


#: Words of a KPI's name that say lower is better (substrings, then whole words of the name).
LOWER_PARTS = ("loss", "cost", "error", "rmse", "mse", "mae", "fid", "abs_rel", "sq_rel", "latency", "perplexity")
LOWER_WORDS = frozenset({"err", "wer", "cer", "eer", "ter", "ade", "fde", "epe", "chamfer", "time"})
#: Words that say higher is better.
HIGHER_PARTS = ("map", "acc", "iou", "f1", "precision", "recall", "auc", "psnr", "ssim", "score", "dice", "bleu",
                "rouge", "ndcg", "pck", "top1", "top5", "top-1", "top-5")
HIGHER_WORDS = frozenset({"ap", "ar", "ap50", "ap75", "nds", "oks"})


def from_name(kpi: str) -> str | None:
    """The direction ``kpi``'s name says (``min`` or ``max``), None when it says none (then ``--mode`` is needed)."""
    name = str(kpi).strip().lower()
    words = set(re.split(r"[^a-z0-9]+", name)) - {""}
    if any(p in name for p in LOWER_PARTS) or words & LOWER_WORDS:
        return "min"
    if any(p in name for p in HIGHER_PARTS) or words & HIGHER_WORDS:
        return "max"
    return None


def direction(kpi: str | None, mode: str | Direction | None) -> Direction:
    """The direction a ranking by ``kpi`` uses: ``mode`` as given (min or max), else :func:`from_name`; an unknown
    mode is a one-line usage error."""
    if isinstance(mode, Direction):
        return mode
    if mode is None:
        if kpi is None:  # nothing is ranked: no direction is asked of the user
            return Direction("max", inferred=True)
        way = from_name(kpi)
        if way is None:
            raise UsageError(f"cannot tell from its name which way KPI {one_line(str(kpi))[:60]!r} is better: add "
                             "--mode min (lower is better) or --mode max")
        return Direction(way, inferred=True)
    if mode not in KPI_MODES:
        raise UsageError(f"--mode {str(mode)[:40]!r} is unknown: use min or max (or leave it out: from the KPI's "
                         "name)")
    return Direction(mode)


def check_mode(mode: str | None) -> None:
    """An unknown ``mode`` as :func:`direction` refuses it (None: left to the KPI's name, judged later)."""
    direction(None, mode)


def inferred_note(kpi: str | None, mode: str | None, flag: str = "--mode") -> str | None:
    """The note a verb prints where a ranking it made is not shown by itself (``--parent-kpi``): which way ``kpi``
    was ranked when ``flag`` was left out; None when it was given (or there is no KPI)."""
    if kpi is None or mode is not None:
        return None
    way = direction(kpi, None)
    return (f"{kpi} ranked {'lowest' if way.mode == 'min' else 'highest'} first ({way.text()}); "
            f"{flag} {'max' if way.mode == 'min' else 'min'} ranks the other way")


__all__ = ["Direction", "from_name", "direction", "check_mode", "inferred_note"]
