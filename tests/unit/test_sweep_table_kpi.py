"""The sweep table's KPI column says which values it shows: the latest of every KPI by default, and with
``status --sweep ID --kpi NAME`` each trial's best value of that KPI and its epoch (counted from 1), taken from
``sweep best``'s own ranking (one listing of every trial's folder), never from the last epoch. Docker, on the
fake engine; the trials' folders are written by the fake trainer (val_loss lowest at its 2nd of 3 epochs)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from test_docker_campaigns import SPEC, TRAINER, Engine
from fakeproc import ok
from taobank import records
from taobank.campaign import sweeps
from taobank.contract import SubmitOptions
from taobank.errors import UsageError

VALUES = ["350", "210", "480"]  # each trial's lowest val_loss, in thousandths (the fake trainer's fake.best_val)


@pytest.fixture()
def ended(docker_fake, fake):
    """A 3-trial sweep whose trials all ended, each folder holding 3 epochs of status lines."""
    fake.on("python3", lambda c: c.argv[1:4] == ["-m", "taobank", "supervise"], ok("4242\n"))
    engine = Engine(fake)
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{"fake.best_val": v} for v in VALUES], len(VALUES))
    for v, view in zip(VALUES, done.views):
        folder = records.load(view.id)["backend"]["results_dir"]
        subprocess.run(["sh", str(TRAINER), "--results", folder, "--epochs", "3", f"fake.best_val={v}"],
                       check=True, capture_output=True)
        engine.containers[view.id].update(Status="exited", ExitCode=0)
    return engine, done


def test_the_kpi_column_shows_the_latest_kpis_by_default_and_says_so(ended):
    _, done = ended
    rows = sweeps.status(done.sweep)
    assert [r.state for r in rows] == ["COMPLETE"] * 3 and all(r.best is None for r in rows)
    text = sweeps.table(rows)
    head, *lines = text.splitlines()
    assert head.split()[-2:] == ["KPIS", "(latest)"]
    # the last epoch's val_loss (0.020 above each trial's best), not the best
    assert "val_loss=0.37" in lines[0] and "val_loss=0.23" in lines[1] and "val_loss=0.5 " in lines[2] + " "
    assert "best" not in rows[0].to_dict()


def test_with_a_ranking_kpi_each_cell_is_that_kpis_best_value_and_epoch_as_sweep_best_ranks(ended):
    engine, done = ended
    sweeps.status(done.sweep)  # the trials' ends seen (their logs saved, their last progress read once)
    since = len(engine.fake.calls)
    rows = sweeps.status(done.sweep, kpi="val_loss", mode="min")
    # ended trials are not asked again: the one call is sweep best's listing of every trial's folder (a local sh)
    assert [c.program for c in engine.fake.calls[since:]] == ["sh"]
    win = sweeps.best(done.sweep, "val_loss", "min")
    assert {r.id: r.best["value"] for r in rows} == {e["id"]: e["value"] for e in win.ranked}
    assert [r.best["at"] for r in rows] == [1, 1, 1] and rows[1].best["key"] == "epoch"
    text = sweeps.table(rows)
    head, *lines = text.splitlines()
    assert head.split()[-3:] == ["BEST", "val_loss", "(min)"]
    # TAO's epoch 1, as artifacts --kpi says it and the checkpoint's name carries it (model_epoch_001)
    assert [line.split("  ")[-1] for line in lines] == ["val_loss 0.35 @ep1", "val_loss 0.21 @ep1",
                                                        "val_loss 0.48 @ep1"]
    assert rows[0].to_dict()["best"] == {"kpi": "val_loss", "mode": "min", "mode_from": "flag", "value": 0.35, "key": "epoch", "at": 1}


def test_a_trial_without_the_kpi_shows_a_dash_and_the_rank_is_checked_before_any_call(ended, fake):
    _, done = ended
    rows = sweeps.status(done.sweep, kpi="train_loss", mode="max")
    assert all(r.kpi_text().startswith("train_loss ") and "@ep" in r.kpi_text() for r in rows)
    assert sweeps.best_text({"kpi": "val_loss", "value": None, "key": "epoch", "at": None}) == "-"
    assert sweeps.best_text({"kpi": "loss", "value": 2.5, "key": "step", "at": 120}) == "loss 2.5 @step120"
    since = len(fake.calls)
    for kpi, mode in ((" ", "min"), ("val_loss", "best")):
        with pytest.raises(UsageError):
            sweeps.status(done.sweep, kpi=kpi, mode=mode)
    assert fake.calls[since:] == []


def test_status_sweep_kpi_on_the_command_line(ended, cli):
    _, done = ended
    out = cli("tao_jobs.py", "status", "--sweep", done.sweep, "--kpi", "val_loss")
    assert out.rc == 0, out
    assert "BEST val_loss (min, from the KPI's name)" in out.out.splitlines()[0] and "val_loss 0.21 @ep1" in out.out
    best_id = next(line.split()[1] for line in out.out.splitlines() if "val_loss 0.21 @ep1" in line)
    arts = cli("tao_jobs.py", "artifacts", best_id, "--kpi", "val_loss")
    assert "at epoch 1:" in arts.out, arts  # one epoch, one number: the table's and artifacts' agree
    out = cli("tao_jobs.py", "status", "--sweep", done.sweep, "--kpi", "val_loss", "--mode", "max", "--json")
    assert [r["best"]["value"] for r in json.loads(out.out)] == [0.37, 0.23, 0.5]
    out = cli("tao_jobs.py", "status", "--sweep", done.sweep, "--no-headers")
    assert "KPIS" not in out.out and "val_loss=0.23" in out.out
    out = cli("tao_jobs.py", "status", done.views[0].id, "--kpi", "val_loss")
    assert out.rc == 2 and "--sweep" in out.err


def test_a_pruned_trial_ranks_after_every_trial_that_ran_its_course(ended):
    """A search's PRUNED trial stopped early: sweep best never crowns it over a finished trial, even when its value
    (of fewer epochs) is lower; it stays in the ranking, last."""
    _, done = ended
    pruned = done.views[1].id  # the lowest val_loss of the three
    records.mark(pruned, "PRUNED", message="PRUNED at epoch 2: val_loss 0.21, worse than the rung's cut 0.2")
    win = sweeps.best(done.sweep, "val_loss", "min")
    assert win.id == done.views[0].id and abs(win.value - 0.35) < 1e-9
    assert [e["id"] for e in win.ranked] == [done.views[0].id, done.views[2].id, pruned]
    assert win.ranked[-1]["state"] == "PRUNED"
    rows = sweeps.status(done.sweep)
    assert [r.state for r in rows] == ["COMPLETE", "PRUNED", "COMPLETE"]  # terminal: the record stays


def test_a_mistyped_kpi_is_said_before_the_direction_its_name_lacks(ended, cli):
    """`sweep best ID --kpi val_los` (a name that says no direction): the line names the KPI the trials have,
    not "add --mode" first (which fixed nothing). A name they have that gives no direction still asks for --mode."""
    _, done = ended
    for argv in (("sweep", "best", done.sweep, "--kpi", "val_los"),
                 ("status", "--sweep", done.sweep, "--kpi", "val_los")):
        out = cli("tao_jobs.py", *argv)
        assert out.rc == 1 and len(out.err_lines) == 1, out
        assert out.err_lines[0].startswith("error: no KPI 'val_los' in the status file (did you mean 'val_loss'?)"), out
    out = cli("tao_jobs.py", "sweep", "best", done.sweep, "--kpi", "val_los", "--mode", "min")
    assert out.rc == 1 and "no trial has val_los yet (trial 0: no KPI 'val_los'" in out.out, out  # each trial's note
    for status in Path(records.load(done.views[1].id)["backend"]["results_dir"]).rglob("status.json"):
        status.write_text(status.read_text().replace("val_mAP", "val_metric"))  # one trial has such a KPI
    out = cli("tao_jobs.py", "sweep", "best", done.sweep, "--kpi", "val_metric")
    assert out.rc == 2 and "cannot tell from its name which way KPI 'val_metric' is better" in out.err, out
