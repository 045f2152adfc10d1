"""The wall-time chain: a SLURM job that outlives its allocation (``--max-attempts`` / ``--max-total-time``).

SLURM sends the batch shell USR1 ``walltime_margin_seconds`` before the wall time
(``--signal=B:USR1@margin``). The script then resubmits itself at once (held, the same job
name, ``--dependency=afterany`` on itself, released once its log folder exists), keeps the
program running for the margin minus ``kill_grace_seconds`` (TAO writes its periodic
checkpoints meanwhile), stops it (TERM, then the grace), and exits without an exit marker.
The next attempt finds the newest complete checkpoint in the job's results folder (the one
table: :mod:`taobank.checkpoints`) and resumes from it. ``meta/retries.jsonl`` gets one hop
(``"reason": "walltime"``) that ``status`` follows under the SAME record (the backend id moves
to the new SLURM job); ``cancel`` stops every job of the name. This module decides the
settings (pure); the shell is in templates/slurm/_chain*.sbatch.tmpl.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ... import checkpoints
from ...errors import TaoError
from .spec import SlurmSpec
from .resources import Resources, defaults

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*\Z", re.IGNORECASE)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "": 60}
#: Longest chain a spec may ask for (a typo guard: a year of run time).
MAX_TOTAL_SECONDS = 366 * 86400


@dataclass(frozen=True)
class Chain:
    max_attempts: int
    #: run time over every attempt (0: no limit but the attempts)
    max_total_seconds: int
    margin_seconds: int
    #: how long the program keeps running after USR1 before it is stopped (the grace follows)
    run_on_seconds: int
    stop_grace_seconds: int
    #: whether each attempt resumes from the newest checkpoint (an argv command of a train action)
    resume: bool


def parse_duration(value: Any, what: str = "--max-total-time") -> int:
    """``24h``, ``90m``, ``2d``, ``3600s`` or a plain number of minutes -> seconds."""
    m = _DURATION.match(str(value)) if not isinstance(value, bool) else None
    if not m:
        raise TaoError(f"{what} {str(value)[:20]!r} is not a duration: write 24h, 90m, 2d, 3600s or minutes")
    seconds = math.ceil(float(m.group(1)) * _UNIT[m.group(2).lower()])
    if not 60 <= seconds <= MAX_TOTAL_SECONDS:
        raise TaoError(f"{what} {value} is out of range: give at least one minute and at most 366 days")
    return seconds


def settings(spec: SlurmSpec | Mapping[str, Any], res: Resources) -> Chain | None:
    """The chain a spec asks for (None: none), checked against its wall time (a mapping: its typed spec)."""
    spec = SlurmSpec.of(spec)
    attempts, total = spec.max_attempts, spec.max_total_time
    if attempts is None and total is None:
        return None
    d = defaults()
    wall = res.time_minutes * 60
    total_s = parse_duration(total) if total is not None else 0
    if attempts is None:  # enough allocations for the total, one more for the queue's rounding
        attempts = min(int(d["max_job_retries"]) + 1, math.ceil(total_s / wall) + 1)
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
        raise TaoError(f"--max-attempts {attempts!r} must be a whole number of at least 1")
    margin = int(spec.walltime_margin_seconds or d["walltime_margin_seconds"])
    if margin * 2 > wall:
        raise TaoError(f"the wall-time margin {margin}s is more than half the wall time ({wall}s): lower "
                       "walltime_margin_seconds or ask for a longer --time")
    grace = min(int(d["kill_grace_seconds"]), margin // 3)
    argv = isinstance(spec.command, list)
    return Chain(max_attempts=attempts, max_total_seconds=total_s, margin_seconds=margin,
                 run_on_seconds=margin - 2 * grace, stop_grace_seconds=grace,
                 resume=argv and checkpoints.resumes(spec.action))


def signal_directive(chain: Chain) -> tuple[str, str]:
    """The ``#SBATCH`` line that warns the batch shell (``B:``), not the program, before the wall time."""
    return ("--signal", f"B:USR1@{chain.margin_seconds}")


__all__ = ["Chain", "parse_duration", "settings", "signal_directive", "MAX_TOTAL_SECONDS"]
