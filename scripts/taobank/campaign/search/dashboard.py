"""``tao_jobs.py study ID --dashboard``: the study in optuna-dashboard, on this machine only (127.0.0.1), served
from a copy of its journal that is refreshed while it runs; the trials on the cluster never wait for it.

The copy lives beside the sweep's first record (``study-journal.log``); a refresh appends what the journal
gained since (Optuna's journal reader keeps its place in the file), or replaces the copy when the journal was
rewritten. optuna-dashboard (PyPI, pinned below) is needed on this machine only.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

from ...errors import TaoError, UsageError
from . import journal, settings as settingsmod

DASHBOARD_VERSION = "0.21.0"
HOST = "127.0.0.1"
REFRESH_SECONDS = 10.0
COPY_FILE = "study-journal.log"


def dashboard_module():  # type: ignore[no-untyped-def]
    """optuna-dashboard at the pinned release, or one line saying how to get it."""
    try:
        import optuna_dashboard  # type: ignore[import-untyped]
    except ImportError:
        raise UsageError(f"--dashboard needs optuna-dashboard on this machine: pip install "
                         f"optuna-dashboard=={DASHBOARD_VERSION}") from None
    return optuna_dashboard


def refresh(copy: Path, text: str) -> bool:
    """The copy brought up to ``text`` (whole lines only): the new tail appended, or the copy replaced when the
    journal does not extend it; whether it changed."""
    text = journal.whole_lines(text)
    old = copy.read_text(encoding="utf-8") if copy.exists() else ""
    if text == old:
        return False
    if text.startswith(old):
        with open(copy, "a", encoding="utf-8") as fh:
            fh.write(text[len(old):])
        return True
    tmp = copy.with_name(copy.name + ".new")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, copy)
    return True


def serve(copy: Path, fetch: Callable[[], str], port: int, *, on_line: Callable[[str], None],
          every: float = REFRESH_SECONDS, stop: threading.Event | None = None) -> None:
    """Serve the study in ``copy`` on 127.0.0.1:``port`` until interrupted, refreshing the copy from ``fetch``
    every ``every`` seconds (a failed fetch is said and tried again: the page keeps the last copy)."""
    dash = dashboard_module()
    optuna = settingsmod.optuna_module()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    if not 1 <= port <= 65535:
        raise UsageError(f"--port {port} is not a port number")
    copy.parent.mkdir(parents=True, exist_ok=True)
    refresh(copy, fetch())
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    halt = stop or threading.Event()

    def loop() -> None:
        while not halt.wait(every):
            try:
                refresh(copy, fetch())
            except TaoError as exc:
                on_line(f"the journal could not be read this time ({exc}): the page shows the last copy")

    threading.Thread(target=loop, name="study-refresh", daemon=True).start()
    on_line(f"serving the study on http://{HOST}:{port}/ from a copy of its journal ({copy}), refreshed every "
            f"{every:g} s; Ctrl-C stops it")
    try:
        dash.run_server(JournalStorage(JournalFileBackend(str(copy))), host=HOST, port=port)
    finally:
        halt.set()


def serve_database(storage_env: str, port: int, *, on_line: Callable[[str], None]) -> None:
    """Serve a database study (its URL in this process's variable ``storage_env``, never shown) on
    127.0.0.1:``port`` until interrupted: optuna-dashboard reads the database itself, live."""
    from . import storage

    dash = dashboard_module()
    settingsmod.optuna_module()
    if not 1 <= port <= 65535:
        raise UsageError(f"--port {port} is not a port number")
    url = storage.url_from(storage_env)
    rdb = storage.opened(url, storage_env)
    on_line(f"serving the study database in ${storage_env} on http://{HOST}:{port}/ (read live); Ctrl-C stops it")
    dash.run_server(rdb, host=HOST, port=port)
