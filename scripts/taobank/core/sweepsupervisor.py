"""A sweep that runs by itself on a platform whose held trials only the bank can start (one Docker host).

Submit starts ONE detached supervisor per sweep (its own session: it outlives the shell and the helper). It
runs the sweep's status in a loop, which starts held trials as slots free (:mod:`taobank.core.sweep_slots`) and
writes each trial's end to its record, and it stops when every trial has ended or been cancelled. A lock
held while it runs keeps it one per sweep; if it dies, the lock goes with it, nothing is lost (the records
and the containers are the state) and the next ``status`` of the sweep starts another. Starting a trial
twice cannot happen: a release runs under a lock of its sweep and reads the records inside it
(:func:`taobank.core.sweep_slots.release`), and starting a running container does nothing. The loop survives any
failure of one look (said on its log): the trials it would start next must not wait for a person.
"""
from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import records, states
from ..errors import TaoError
from ..records import Record
from ..redact import is_credential_name
from ..run import spawn_detached
from ..text import one_line

#: Files beside the sweep's first trial record: the lock the running supervisor holds, and its log.
LOCK, LOG = "sweep-supervisor.lock", "sweep-supervisor.log"
#: Seconds between two looks at the sweep (a trial waits at most this long for a free slot).
INTERVAL = 5.0


def _folder(first_trial: str) -> Path:
    return records.artifact_dir(first_trial)


def wanted(trials: Sequence[Record | Any]) -> bool:
    """A supervisor has work: a trial is still held (created, waiting for a slot). ``trials``: records or their
    views (each has ``state`` and ``backend``)."""
    return any(t.state in states.ACTIVE and (t.backend or {}).get("held") for t in trials)


def running(first_trial: str, folder: Path | None = None) -> bool:
    """Whether a supervisor holds the lock of the sweep whose first trial is ``first_trial`` now (``folder``: its
    folder, :func:`_folder`, when the caller has it)."""
    path = (folder or _folder(first_trial)) / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock this call took
    return False


def start(sweep_id: str, first_trial: str) -> int | None:
    """Start the sweep's supervisor, detached (its own session, no terminal); the pid, or None when one runs.

    It inherits this environment without credential variables: it only starts containers made already."""
    folder = _folder(first_trial)
    if running(first_trial, folder):
        return None
    scripts = str(Path(__file__).resolve().parents[2])  # where the package is (the bank is not installed)
    env = {k: v for k, v in os.environ.items() if not is_credential_name(k)}
    env["PYTHONPATH"] = os.pathsep.join([scripts, *filter(None, [os.environ.get("PYTHONPATH")])])
    env[records.STATE_DIR_ENV] = str(records.state_dir())  # absolute: it runs in another folder
    # run in the bank's own scripts folder: ``-m`` puts the working folder first on sys.path, and a ``taobank``
    # package in the folder a user ran submit from must never be the one that runs
    return spawn_detached([sys.executable, "-m", "taobank", "supervise", sweep_id],
                          log=folder / LOG, env=env, cwd=scripts)


def supervise(sweep_id: str, first_trial: str, look: Callable[[], list[Any]], *, interval: float = INTERVAL,
              sleep: Callable[[float], None] = time.sleep, on_line: Callable[[str], None] = lambda line: None) -> int:
    """The supervisor's loop (``python3 -m taobank supervise ID``): ``look`` at the sweep (its status rows,
    which also starts held trials) until every trial has ended; 0, also when another supervisor holds the
    lock already."""
    path = _folder(first_trial) / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_line(f"sweep {sweep_id}: a supervisor runs already")
            return 0
        on_line(f"sweep {sweep_id}: supervising (pid {os.getpid()})")
        shown: dict[str, str] = {}
        while True:
            try:
                rows = look()
            except TaoError as exc:  # a passing engine hiccup: say it, look again
                on_line(one_line(f"sweep {sweep_id}: {exc}"))
                sleep(interval)
                continue
            except Exception as exc:  # a defect met on one look must not leave the held trials held for ever
                on_line(one_line(f"sweep {sweep_id}: {type(exc).__name__}: {exc}; looking again"))
                sleep(interval)
                continue
            for row in rows:
                if shown.get(row.id) != row.state:
                    shown[row.id] = row.state
                    on_line(one_line(f"trial {row.trial} {row.id} {row.state}"))
            if all(row.state in states.TERMINAL for row in rows):
                on_line(f"sweep {sweep_id}: every trial has ended")
                return 0
            sleep(interval)
    finally:
        os.close(fd)
