"""What the progress e2e tests share: poll a job's status until its training shows progress, or it ends."""
from __future__ import annotations

import time
from typing import Callable

TERMINAL = ("COMPLETE", "ERROR", "CANCELED")


def wait_for_progress(view_of: Callable[[], dict], *, min_epoch: int = 2, timeout: float = 180,
                      interval: float = 2) -> dict:
    """The first status view (``view_of()``: one job's ``--json`` view) of a RUNNING job whose progress has
    reached ``min_epoch``; AssertionError when the job ends first or the time runs out."""
    end = time.time() + timeout
    view: dict = {}
    while time.time() < end:
        view = view_of()
        if view["state"] == "RUNNING" and ((view.get("progress") or {}).get("epoch") or 0) >= min_epoch:
            return view
        if view["state"] in TERMINAL:
            break
        time.sleep(interval)
    raise AssertionError(f"never saw the running training's progress: last view {view}")
