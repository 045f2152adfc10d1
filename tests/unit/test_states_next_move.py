"""The one rule 'observation -> next mark' (taobank.states.next_move): the cases each platform special-cased."""
from __future__ import annotations

import pytest

from taobank.states import Move, State, TERMINAL, next_move

P, R, C, E, X, U = State.PENDING, State.RUNNING, State.COMPLETE, State.ERROR, State.CANCELED, State.UNKNOWN
PULL = "cannot pull image nvcr.io/x:1: manifest unknown (check the image name and imagePullSecrets / NGC_KEY)"
BACKOFF = "cannot pull image nvcr.io/x:1: the kubelet backs off before retrying the pull (check ...)"

CASES = [
    # (record state, recorded message, observed, message, keep_if) -> Move
    ("a move the table allows", P, "queued", R, "running", None, Move(R, "running")),
    ("a short job's end seen from PENDING", P, "queued", C, "exit code 0", None, Move(C, "exit code 0")),
    ("a requeue (SLURM) goes back to PENDING", R, "running", P, "requeued", None, Move(P, "requeued")),
    ("contact lost", R, "running", U, "the Job is gone", None, Move(U, "the Job is gone")),
    ("UNKNOWN stays UNKNOWN on PENDING, with the new message", U, "gone", P, "waiting", None, Move(U, "waiting")),
    ("UNKNOWN moves once the job runs", U, "gone", R, "running", None, Move(R, "running")),
    ("UNKNOWN moves once it ends", U, "gone", E, "exit 1", None, Move(E, "exit 1")),
    ("the same state: a message-only update", R, "1 pod running", R, "2 pods running", None, Move(R, "2 pods running")),
    ("the same state and an empty message: the recorded one stays", R, "running", R, "", None, Move(R, None)),
    ("pull retry: the recorded error stays while the kubelet backs off", P, PULL, P, BACKOFF, "cannot pull image ",
     Move(P, None)),
    ("pull retry: a record without the error takes the back-off line", P, "queued", P, BACKOFF, "cannot pull image ",
     Move(P, BACKOFF)),
    ("pull retry settles only while the state holds", P, PULL, R, "running", "cannot pull image ", Move(R, "running")),
] + [(f"a terminal record ({t}) stays the source of truth", t, "done", o, "seen", None, Move(None))
     for t in sorted(TERMINAL) for o in (U, P, R, C, E, X)]


@pytest.mark.parametrize("why,cur,recorded,observed,message,keep_if,want", CASES, ids=[c[0] for c in CASES])
def test_next_move(why, cur, recorded, observed, message, keep_if, want):
    assert next_move(cur, observed, message, recorded=recorded, keep_if=keep_if) == want
