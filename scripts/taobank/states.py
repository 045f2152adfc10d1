"""Job status vocabulary and the one transition table every platform obeys.

The table is data: the record store enforces it, docs/job-record.md is
checked against it by a test, and the tests iterate over it.

Why each edge exists:

* PENDING -> RUNNING | COMPLETE | ERROR | CANCELED | UNKNOWN: a poll can miss
  the RUNNING phase of a short job, so PENDING may go straight to an end.
* RUNNING -> PENDING: SLURM requeues a preempted or node-failed job under the
  same job id (``--requeue``); the job waits again, it has not ended.
* UNKNOWN -> RUNNING | COMPLETE | ERROR | CANCELED: contact came back (or the
  exit marker was found). Never UNKNOWN -> PENDING: a poller that sees a
  pending backend job for an UNKNOWN record leaves the record UNKNOWN until
  the job runs or ends, so the history cannot loop PENDING/UNKNOWN.
* PENDING | RUNNING | UNKNOWN -> PRUNED: a trial of a search (``--search``) stopped early by its study's
  pruner (its KPI was worse than the rung's cut). An end of its own, not an error: nothing failed.
* COMPLETE, ERROR, CANCELED, PRUNED are terminal: nothing leaves them.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum
from typing import Sequence

from .errors import TaoError

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10 (versions.yaml tools.python_min) has no StrEnum: the same str() and format() by hand
    class StrEnum(str, Enum):
        """A member is its value: ``str()`` and ``format()`` give the plain name, as 3.11's StrEnum does."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return str(self.value).__format__(spec)


class State(StrEnum):
    """A job's state in the bank's vocabulary (a ``str``: records and ``--json`` hold the plain name)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    ERROR = "ERROR"
    CANCELED = "CANCELED"
    UNKNOWN = "UNKNOWN"
    #: a search trial its study's pruner stopped early (terminal, not an error)
    PRUNED = "PRUNED"

    @property
    def is_terminal(self) -> bool:
        """Nothing leaves a terminal state."""
        return self in TERMINAL

    @property
    def is_active(self) -> bool:
        return self in ACTIVE


STATES: tuple[State, ...] = tuple(State)
TERMINAL: frozenset[State] = frozenset({State.COMPLETE, State.ERROR, State.CANCELED, State.PRUNED})
ACTIVE: frozenset[State] = frozenset({State.PENDING, State.RUNNING, State.UNKNOWN})
INITIAL: State = State.PENDING

#: state -> states a mark may move it to (same-state marks are handled apart:
#: allowed on an active record as an update, a no-op on a terminal one).
TRANSITIONS: dict[str, tuple[State, ...]] = {
    State.PENDING: (State.RUNNING, State.COMPLETE, State.ERROR, State.CANCELED, State.UNKNOWN, State.PRUNED),
    State.RUNNING: (State.PENDING, State.COMPLETE, State.ERROR, State.CANCELED, State.UNKNOWN, State.PRUNED),
    State.UNKNOWN: (State.RUNNING, State.COMPLETE, State.ERROR, State.CANCELED, State.PRUNED),
    State.COMPLETE: (),
    State.ERROR: (),
    State.CANCELED: (),
    State.PRUNED: (),
}

#: Failure classes; only an ERROR record may carry one (it is optional there).
ERR_CLASSES: tuple[str, ...] = ("ERR_INFRA", "ERR_PROGRAM")

#: Who wrote a mark.
SOURCES: tuple[str, ...] = ("agent", "poller", "backend-hook")

_STATE_ALIASES = {"CANCELLED": "CANCELED"}


def canonical_state(name: str) -> State:
    """Upper-case a state name (``running`` -> ``RUNNING``; ``CANCELLED`` -> ``CANCELED``)."""
    key = str(name).strip().upper()
    key = _STATE_ALIASES.get(key, key)
    if key not in STATES:
        raise TaoError(f"unknown state {name!r}: use one of {' '.join(STATES)}")
    return State(key)


def canonical_err_class(name: str) -> str:
    key = str(name).strip().upper()
    if key not in ERR_CLASSES:
        raise TaoError(f"unknown err_class {name!r}: use one of {' '.join(ERR_CLASSES)}")
    return key


def canonical_source(name: str) -> str:
    key = str(name).strip().lower()
    if key not in SOURCES:
        raise TaoError(f"unknown source {name!r}: use one of {' '.join(SOURCES)}")
    return key


def is_allowed(current: str, new: str) -> bool:
    """True when a mark may move a record from ``current`` to ``new`` (a different state)."""
    return new in TRANSITIONS.get(current, ())


@dataclass(frozen=True)
class Move:
    """What one observation does to a record: the state to mark (None: leave the record as it is) and the
    message to store (None: keep the recorded one)."""

    state: "State | None"
    message: str | None = None


def next_move(current: str, observed: str, message: str | None, *, recorded: str | None = None,
              keep_if: str | None = None) -> Move:
    """The one rule every platform's status obeys: what the backend ``observed`` (with ``message``) does to a
    record in state ``current`` whose message is ``recorded``.

    * A terminal record stays: after the end the record is the source of truth (a Job deleted by its TTL, a
      container removed, say nothing about how it ended).
    * UNKNOWN seen PENDING stays UNKNOWN with the new message: the table has no UNKNOWN -> PENDING, and the
      record moves once the job runs or ends (so its history cannot loop PENDING/UNKNOWN).
    * Any other move the table forbids leaves the record as it is.
    * The same state is a message-only update; an empty message keeps the recorded one.
    * ``keep_if``: the observation only repeats, in less detail, what the record says when the recorded message
      holds this text (a kubelet retrying one image pull flips its reason and drops the error): while the state
      does not change the recorded message stays, so a watch prints no new line for the flip.
    """
    if current in TERMINAL:
        return Move(None)
    text = message or None
    if observed == current and keep_if and keep_if in (recorded or ""):
        text = None
    if observed == current:
        return Move(State(current), text)
    if current == State.UNKNOWN and observed == State.PENDING:
        return Move(State.UNKNOWN, text)
    if not is_allowed(current, observed):
        return Move(None)
    return Move(State(observed), text)


def next_moves(seen: Sequence[tuple[str, str, str | None, str | None, str | None]]) -> list[Move]:
    """:func:`next_move` of several records at once (a status's batch): each ``(current, observed, message,
    recorded, keep_if)``."""
    return [next_move(c, o, m, recorded=r, keep_if=k) for c, o, m, r, k in seen]


#: Why a job was cut short (``Observation.cut_short``): it ran out of its time, or the cluster took its place.
CUT_SHORT = ("time limit", "preempted")


def continue_hint(job_id: str, cut_short: str) -> str:
    """The one line every platform's status puts first on a job cut short: ``continue`` carries it on from its
    last checkpoint (with more time when its time limit ended it)."""
    if cut_short not in CUT_SHORT:
        raise ValueError(f"cut_short must be one of {CUT_SHORT}")
    more = " --time-hours H (or --time-minutes M)" if cut_short == "time limit" else ""
    return f"{cut_short}: carry on with tao_jobs.py continue {job_id}{more}"


def allowed_text(current: str) -> str:
    """Human list of the moves out of ``current`` (for error lines)."""
    targets = TRANSITIONS.get(current, ())
    if not targets:
        return f"{current} is terminal: no transition is allowed"
    return f"allowed from {current}: {', '.join(targets)}"


def markdown_table() -> str:
    """The transition table as Markdown (docs/job-record.md embeds exactly this)."""
    lines = ["| from \\ to | " + " | ".join(STATES) + " |", "|---" * (len(STATES) + 1) + "|"]
    for src in STATES:
        cells = []
        for dst in STATES:
            if dst == src:
                cells.append("update" if src in ACTIVE else "no-op")
            else:
                cells.append("yes" if is_allowed(src, dst) else "-")
        lines.append(f"| **{src}** | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
