"""KPI series drawn in the terminal (plotext) or into a PNG (matplotlib): optional extras, imported only here.

Neither library is a dependency of the bank: each is imported inside its
function, and a missing one is a one-line TaoError naming the pip command.
"""
from __future__ import annotations

import importlib
import io
from pathlib import Path
from typing import Any, Sequence

from .. import fsio
from ..errors import TaoError
from .series import Row, key_column, kpi_names, require_kpis
from .statusfile import is_finite_number

#: Marker characters told apart without colour (one per KPI, in turn).
_MARKERS = "*+ox#@%&"
#: Values beyond this magnitude are left out like NaN: a diverged KPI, and the plot libraries overflow near 1e308.
MAX_PLOTTED = 1e100


def _optional(module: str, package: str, why: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise TaoError(f"{why} needs the optional package {package}: pip install {package}") from None


def _lines(rows: Sequence[Row], kpis: Sequence[str] | None) -> list[tuple[str, list[int], list[float]]]:
    """(name, xs, ys) of each chosen KPI, finite points within MAX_PLOTTED only; one-line TaoError when nothing
    can be drawn."""
    names = list(kpis) if kpis else kpi_names(rows)
    require_kpis(rows, names)
    key = key_column(rows)
    out = []
    for name in names:
        points = [(row[key], row[name]) for row in rows
                  if is_finite_number(row.get(name)) and abs(row[name]) <= MAX_PLOTTED]
        if points:
            out.append((name, [x for x, _ in points], [float(y) for _, y in points]))
    if not out:
        raise TaoError(f"nothing to plot yet: {', '.join(names)} has no finite value within ±{MAX_PLOTTED:g}")
    return out


def plot_terminal(rows: Sequence[Row], kpis: Sequence[str] | None = None, *, width: int = 80, height: int = 20,
                  color: bool = False) -> str:
    """The chosen KPIs (all when None) against the epoch, as terminal text; plain characters unless ``color``."""
    plotext = _optional("plotext", "plotext", "a terminal plot")
    figure: Any = getattr(plotext, "figure", None)  # plotext has no types; checked for its API below
    if not hasattr(figure, "signal"):  # plotext 5 has a different API
        raise TaoError("a terminal plot needs plotext 6 or newer: pip install --upgrade plotext")
    lines = _lines(rows, kpis)
    figure.clear()
    try:
        figure.plot_size(max(20, width), max(8, height))
        for i, (name, xs, ys) in enumerate(lines):
            signal = figure.signal(xs, ys, marker=None if color else _MARKERS[i % len(_MARKERS)])
            signal.label(name)
            signal.lines()
            figure.draw(signal)
        figure.label(key_column(rows))
        return figure.build().string(colorless=not color)
    finally:
        figure.clear()


def _label(name: str) -> str:
    """A KPI name as matplotlib shows it verbatim: "$" would start math text, a leading "_" hides the legend entry."""
    name = name.replace("$", r"\$")
    return " " + name if name.startswith("_") else name


def plot_png(rows: Sequence[Row], kpis: Sequence[str] | None, path: Path | str) -> Path:
    """The chosen KPIs (all when None) against the epoch, written as a PNG at ``path`` (mode 600, atomic)."""
    _optional("matplotlib", "matplotlib", "a PNG plot")
    figure_module = _optional("matplotlib.figure", "matplotlib", "a PNG plot")
    lines = _lines(rows, kpis)
    fig = figure_module.Figure(figsize=(8, 4.5), dpi=100)  # no pyplot: no GUI backend, no global state
    ax = fig.subplots()
    for name, xs, ys in lines:
        ax.plot(xs, ys, marker="o", markersize=3, label=_label(name))
    ax.set_xlabel(key_column(rows))
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    target = Path(path)
    try:
        fsio.write_private(target, buf.getvalue())
    except OSError as exc:
        raise TaoError(f"cannot write the plot to {target}: {exc.strerror or exc}") from None
    return target
