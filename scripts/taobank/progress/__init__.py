"""Training you can watch: TAO's ``status.json`` read into progress, a KPI series, tables and plots.

Pure and platform-independent; a platform only fetches the text (one
``kubectl exec`` or one ``ssh`` command running :data:`READ_STATUS_SH`).

::

    files = split_files(output_of(READ_STATUS_SH, results_dir))  # {relative path: text}
    log = parse(files[pick(files, action)])                      # StatusLog (log.skipped: unreadable lines)
    progress(log).line()          # "epoch 3/10 eta 0:12:30 train_loss=0.412 mAP=0.31"
    rows = series(log)            # [{"epoch": 1, "train_loss": 0.5, ...}, ...]
    table(rows); to_csv(rows); to_json(rows); best(rows, "val_loss", "min")
    plot_terminal(rows, ["train_loss"]); plot_png(rows, None, "kpis.png")   # optional plotext / matplotlib

Modules: ``statusfile`` (parsing, Progress), ``series`` (rows, renderings,
best), ``plot`` (optional plots), ``remote`` (the shell reader, pick).
"""
from __future__ import annotations

from .plot import plot_png, plot_terminal
from .remote import READ_STATUS_SH, pick, read_argv, split_files
from .series import best, key_column, kpi_names, series, table, to_csv, to_json
from .statusfile import Event, Progress, StatusLog, format_seconds, parse, parse_timedelta, progress

__all__ = [
    "READ_STATUS_SH", "Event", "Progress", "StatusLog", "best", "format_seconds", "key_column", "kpi_names",
    "parse", "parse_timedelta", "pick", "plot_png", "plot_terminal", "progress", "read_argv", "series",
    "split_files", "table", "to_csv", "to_json",
]
