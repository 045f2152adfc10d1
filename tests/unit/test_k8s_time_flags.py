"""Kubernetes submit takes its time limit as SLURM and continue do (--time-hours / --time-minutes), or in
seconds (--active-deadline): one activeDeadlineSeconds, never two limits."""
from __future__ import annotations

import pytest

from taobank.errors import UsageError
from taobank.platforms.kubernetes.spec import spec_from_flags

BASE = {"image": "i", "command": "c"}


@pytest.mark.parametrize("given,seconds", [({"time_hours": 1.5}, 5400), ({"time_minutes": 2}, 120),
                                           ({"active_deadline_seconds": 30}, 30)])
def test_the_time_limit_in_any_unit_is_one_active_deadline(given, seconds):
    assert spec_from_flags(None, {**BASE, **given})["active_deadline_seconds"] == seconds


@pytest.mark.parametrize("bad", [0, -1, 1e9])
def test_a_time_limit_that_is_no_positive_number_is_refused(bad):
    with pytest.raises(UsageError, match="--time-hours must be a positive number"):
        spec_from_flags(None, {**BASE, "time_hours": bad})


def test_two_time_limits_are_refused_by_the_command_line(cli):
    out = cli("tao_k8s.py", "submit", "--image", "i", "--command", "c", "--time-hours", "1", "--active-deadline", "5")
    assert out.rc == 2 and "not allowed with argument" in out.err
