"""Issue 38 items 3, 4, 10, 14: a sweep's size is counted before any trial is built, the sweep file is read by
the one rule for files a flag names, YAML quirks are settled (``1e-5`` a number, a duplicate key refused) and a
bare AWS secret is no sweep value."""
from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager

import pytest

from taobank.campaign import sweepfile
from taobank.errors import UsageError

AWS_SECRET = "wJalrXUtnFEMI/" + "K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example, joined at run time


@contextmanager
def deadline(seconds: int = 10):
    """Fail (instead of hanging the run) when the block blocks or grinds."""
    def boom(*_):
        raise TimeoutError(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    began = time.monotonic()
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - began < seconds


# ------------------------------------------------------------------ item 3: counted before built
@pytest.mark.parametrize("flags", [
    ["a=" + ",".join(map(str, range(100))), "b=" + ",".join(map(str, range(100))),
     "c=" + ",".join(map(str, range(100))), "d=" + ",".join(map(str, range(100)))],
    ["a=" + ",".join(map(str, range(10001)))],
])
def test_many_sweep_flags_are_refused_by_their_count(flags):
    with deadline(5), pytest.raises(UsageError, match="more than 10000 trials"):
        sweepfile.trials(flags, None)


@pytest.mark.parametrize("text", [
    "grid: {" + ", ".join(f"k{i}: [{', '.join(map(str, range(10)))}]" for i in range(9)) + "}\n",  # 10^9
    "random: {samples: 100000000, seed: 1, params: {a: {low: 0, high: 1}}}\n",
    "trials: [" + ", ".join("{a: %d}" % i for i in range(10001)) + "]\n",
])
def test_huge_sweep_files_are_refused_before_building(tmp_path, text):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with deadline(10), pytest.raises(UsageError, match="more than 10000 trials"):
        sweepfile.trials(None, str(f))


def test_a_grid_at_the_limit_is_still_accepted(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("grid: {a: [" + ", ".join(map(str, range(100))) + "], b: [" + ", ".join(map(str, range(100))) + "]}\n")
    assert len(sweepfile.trials(None, str(f))) == 10000


def test_the_sweep_file_size_is_capped(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text("grid: {a: [" + ", ".join("1" for _ in range(2_000_000)) + "]}\n")
    with deadline(10), pytest.raises(UsageError, match="larger than"):
        sweepfile.trials(None, str(f))


# ------------------------------------------------------------------ item 4: one rule for files a flag reads
def test_sweep_file_dev_zero_is_refused_at_once():
    with deadline(5), pytest.raises(UsageError, match="not a regular file") as err:
        sweepfile.trials(None, "/dev/zero")
    assert "\n" not in str(err.value)


def test_sweep_file_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "s.fifo"
    os.mkfifo(fifo)
    with deadline(5), pytest.raises(UsageError, match="not a regular file"):
        sweepfile.trials(None, str(fifo))


@pytest.mark.parametrize("name, words", [("missing.yaml", "no such file"), (".", "directory")])
def test_sweep_file_other_refusals_are_one_line(tmp_path, name, words):
    with pytest.raises(UsageError, match=words) as err:
        sweepfile.trials(None, str(tmp_path / name))
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------ item 10: YAML quirks
def test_exponent_without_a_dot_is_a_number(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("random: {samples: 3, seed: 1, params: {train.optim.lr: {low: 1e-5, high: 1e-2, log: true}}}\n")
    lrs = [float(t["train.optim.lr"]) for t in sweepfile.trials(None, str(f))]
    assert all(1e-5 <= x <= 1e-2 for x in lrs)


@pytest.mark.parametrize("text", [
    "grid: {train.optim.lr: [0.1], train.optim.lr: [0.2, 0.3]}\n",
    "trials: [{a: 1, a: 2}]\n",
    "grid: {a: [1]}\ngrid: {b: [2]}\n",
    "random: {samples: 2, samples: 3, seed: 1, params: {a: {low: 0, high: 1}}}\n",
])
def test_duplicate_keys_are_refused(tmp_path, text):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(UsageError, match="given twice"):
        sweepfile.trials(None, str(f))


# ------------------------------------------------------------------ item 14: a bare AWS secret is no value
@pytest.mark.parametrize("value", [AWS_SECRET, "AKIA" + "ABCDEFGHIJ234567"])
def test_a_secret_as_a_sweep_value_is_refused_unshown(tmp_path, value):
    with pytest.raises(UsageError, match="looks like a credential") as err:
        sweepfile.trials([f"train.optim.lr=0.1,{value}"], None)
    assert value not in str(err.value)
    f = tmp_path / "s.yaml"
    f.write_text(f"trials: [{{train.optim.lr: '{value}'}}]\n")
    with pytest.raises(UsageError, match="looks like a credential") as err:
        sweepfile.trials(None, str(f))
    assert value not in str(err.value)


def test_stage_files_list_fifo_is_refused_not_waited_on(tmp_path, cli):
    """The same rule for stage_files.py --list (it read the path whole, a FIFO blocked it)."""
    fifo = tmp_path / "list.fifo"
    os.mkfifo(fifo)
    (tmp_path / "src").mkdir()
    with deadline(20):
        out = cli("stage_files.py", "--list", str(fifo), "--src", str(tmp_path / "src"), "--dest", str(tmp_path / "d"))
    assert out.rc == 2 and "not a regular file" in out.err and len(out.err_lines) == 1, out
