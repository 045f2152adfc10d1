"""DURATION in the job table is how long the job ran (first seen RUNNING -> its end), from the record's
transitions, the same for a record (``tao_jobs.py list``) and a refreshed view (``tao_jobs.py status``)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from taobank.campaign import jobtable
from taobank.core.platform import JobView

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
NOW = T0 + timedelta(hours=2)


def at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record(*history: tuple[str, float], backend_ref: str | None = "slurm:101") -> dict:
    """A 2-node SLURM record whose transitions are ``(state, minutes after submit)``."""
    trs = [{"time": at(m), "state": s, "source": "poller", "message": None} for s, m in history]
    return {"id": "dino-train-0a1b2c3d", "platform": "slurm", "network_arch": "dino", "action": "train",
            "image": "img", "results_dir": "/l/results/dino-train-0a1b2c3d",
            "state": history[-1][0], "backend_ref": backend_ref, "backend": {"nodes": 2}, "attempt": 1,
            "transitions": trs, "created_at": at(0), "updated_at": at(history[-1][1] + 30)}


def duration(rec: dict) -> str:
    """DURATION of the record's row and of its refreshed view's row: always the same."""
    by_record = jobtable.row(rec, NOW)[jobtable.COLUMNS.index("DURATION")]
    by_view = jobtable.row(JobView.from_record(rec), NOW)[jobtable.COLUMNS.index("DURATION")]
    assert by_record == by_view
    return by_record


def test_duration_is_the_run_from_its_start_not_the_queue_wait_or_a_later_record_write():
    rec = record(("PENDING", 0), ("RUNNING", 10), ("COMPLETE", 13))
    assert duration(rec) == "3m"


def test_a_job_that_ran_between_two_polls_counts_from_its_submission_never_0s():
    rec = record(("PENDING", 0), ("COMPLETE", 7))  # never seen RUNNING: it started and ended between polls
    assert duration(rec) == "7m"


def test_a_running_job_counts_up_to_now_and_a_waiting_one_has_no_duration_yet():
    assert duration(record(("PENDING", 0), ("RUNNING", 60))) == "1h00m"
    assert duration(record(("PENDING", 0))) == "-"


@pytest.mark.parametrize("end", ["ERROR", "CANCELED"])
def test_a_job_never_launched_has_no_duration_not_0s(end):
    rec = record(("PENDING", 0), (end, 0), backend_ref=None)  # sbatch refused / canceled before launch
    assert duration(rec) == "-"


def test_times_without_a_fraction_of_a_second_are_read_too():
    rec = record(("PENDING", 0), ("RUNNING", 1), ("COMPLETE", 4))
    for t in rec["transitions"]:
        t["time"] = t["time"].split(".")[0] + "Z"
    assert duration(rec) == "3m"
