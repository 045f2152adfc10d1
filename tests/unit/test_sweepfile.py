"""Sweep descriptions: flags, files (grid, trials, seeded random incl. log-uniform) and the value rule."""
from __future__ import annotations

import math
import re
import shlex

import pytest
from hypothesis import given, strategies as st

from taobank import records
from taobank.campaign import sweepfile, sweeps
from taobank.records import shape
from taobank.errors import TaoError, UsageError


def test_flags_make_the_cartesian_product_in_a_stable_order():
    grid = sweepfile.parse_flags(["train.optim.lr=0.1,0.01", "train.bs=8,16"])
    assert sweepfile.product(grid) == [
        {"train.optim.lr": "0.1", "train.bs": "8"}, {"train.optim.lr": "0.1", "train.bs": "16"},
        {"train.optim.lr": "0.01", "train.bs": "8"}, {"train.optim.lr": "0.01", "train.bs": "16"}]


@pytest.mark.parametrize("flags, words", [
    (["lr=1", "lr=2"], "twice"), (["lr="], "empty"), (["lr=1,,2"], "empty"), (["lr=1,1"], "twice"),
    (["lr"], "KEY=V1"), (["-lr=1"], "override key"), (["lr=a b"], "not safe"), (["lr=$(id)"], "not safe"),
    (["lr=x'y"], "not safe")])
def test_bad_flags_are_one_line_errors(flags, words):
    with pytest.raises(UsageError, match=words) as err:
        sweepfile.trials(flags, None)
    assert "\n" not in str(err.value)


def test_no_trials_and_both_forms_are_refused():
    with pytest.raises(UsageError, match="N = 0"):
        sweepfile.check_trials([])
    with pytest.raises(UsageError, match="not both"):
        sweepfile.trials(["a=1"], "f.yaml")
    assert sweepfile.trials(None, None) is None


def test_file_forms(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("grid: {train.optim.lr: [0.1, 0.01], model.arch: resnet18}\n")
    assert sweepfile.trials(None, str(f)) == [{"train.optim.lr": "0.1", "model.arch": "resnet18"},
                                              {"train.optim.lr": "0.01", "model.arch": "resnet18"}]
    f.write_text("trials: [{train.optim.lr: 0.1}, {train.optim.lr: 0.01, train.bs: 16}, {amp: true}]\n")
    assert sweepfile.trials(None, str(f))[2] == {"amp": "true"}
    f.write_text("trials: [{a: 1}, {a: 1}]\n")
    with pytest.raises(UsageError, match="repeats"):
        sweepfile.trials(None, str(f))
    f.write_text("grid: {a: [1]}\ntrials: []\n")
    with pytest.raises(UsageError, match="exactly one"):
        sweepfile.trials(None, str(f))


def test_random_is_seeded_log_uniform_and_in_range():
    block = {"samples": 50, "seed": 7, "params": {"train.optim.lr": {"low": 1e-5, "high": 1e-1, "log": True},
                                                  "train.epochs": {"low": 1, "high": 5, "int": True},
                                                  "arch": {"choices": ["r18", "r34"]}}}
    a, b = sweepfile.random_trials(block), sweepfile.random_trials(block)
    assert a == b and len(a) == 50
    lrs = [float(t["train.optim.lr"]) for t in a]
    assert all(1e-5 <= x <= 1e-1 for x in lrs)
    assert sum(x < 1e-3 for x in lrs) > 15  # log-uniform: half the draws are below the geometric middle
    assert {t["train.epochs"] for t in a} <= {"1", "2", "3", "4", "5"} and {t["arch"] for t in a} == {"r18", "r34"}
    with pytest.raises(UsageError, match="above 0"):
        sweepfile.random_trials({"samples": 1, "seed": 1, "params": {"x": {"low": 0, "high": 1, "log": True}}})


@given(st.text(max_size=40))
def test_every_accepted_value_is_one_safe_word(text):
    try:
        out = sweepfile.value_text("k", text)
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    assert shlex.split(out) == [out] and shlex.quote(out) == out and "=" not in out and "," not in out
    assert sweepfile.VALUE.match(out)
    ov = shape.schema()["properties"]["overrides"]["additionalProperties"]
    assert len(out) <= ov["maxLength"] and re.search(ov["pattern"], out)  # the record stores it as it is


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers() | st.booleans())
def test_numbers_become_safe_words_or_one_line_errors(value):
    try:
        out = sweepfile.value_text("k", value)
    except UsageError:
        assert isinstance(value, float) and not math.isfinite(value)
        return
    assert sweepfile.VALUE.match(out)


def test_the_override_rule_is_written_once():
    """One regex per concept: sweepfile checks a trial's overrides with tao_command' rule, and the record schema's
    patterns (which the record store checks) say the same (anchored)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    literal = sweepfile.VALUE.pattern
    holders = [p.relative_to(root).as_posix() for p in (root / "scripts").rglob("*.py") if literal in p.read_text()]
    assert holders == ["scripts/taobank/tao_command.py"]
    ov = json.loads((root / "schemas" / "job-record.schema.json").read_text())["properties"]["overrides"]
    assert ov["additionalProperties"]["pattern"] == "^" + sweepfile.VALUE.pattern
    assert ov["propertyNames"]["pattern"] == "^" + sweepfile.KEY.pattern
    with pytest.raises(TaoError):  # the record store refuses what the sweep parser refuses
        records.open_record("slurm", "img", "dino", "train", "A", "/r/{id}",
                            sweep=("dino-sweep-abcd1234", 0, {"train.optim.lr": "0.1 x"}))


def test_trial_spec_appends_key_value_after_the_command():
    ov = {"train.optim.lr": "0.1", "bs": "8"}
    assert sweeps.trial_spec({"command": ["tao", "-e", "s.yaml"]}, ov)["command"][-2:] == ["train.optim.lr=0.1", "bs=8"]
    assert sweeps.trial_spec({"args": ["-e", "s.yaml"]}, ov)["args"] == ["-e", "s.yaml", "train.optim.lr=0.1", "bs=8"]
    assert sweeps.trial_spec({"command": "tao train -e s.yaml"}, ov)["command"] == "tao train -e s.yaml train.optim.lr=0.1 bs=8"
    with pytest.raises(UsageError):
        sweeps.trial_spec({}, ov)


def test_a_trial_record_keeps_its_sweep_fields(state_dir):
    rec = records.open_record("slurm", "img", "dino", "train", "A", "/r/{id}", sweep=("dino-sweep-abcd1234", 2,
                                                                                     {"train.optim.lr": "0.1"}))
    again = records.load(rec["id"])
    assert (again["sweep"], again["trial"], again["overrides"]) == ("dino-sweep-abcd1234", 2, {"train.optim.lr": "0.1"})
    assert [r["id"] for r in records.list_records(sweep="dino-sweep-abcd1234")] == [rec["id"]]
    assert records.list_records(sweep="other-sweep-x") == []
