"""A sweep and the jobs it builds on (taobank.campaign.sweeps over a stand-in platform): ``--parent`` is applied once and
named on every trial record; every trial keeps its spec so ``continue`` works on one trial; a spec that was not
kept says why."""
from __future__ import annotations

import argparse

import pytest

from taobank.core import jobfiles, platform as core
from taobank.campaign import lineage, sweeps
from taobank import records
from taobank.cli import verbcli
from taobank.platforms.slurm.spec import SlurmSpec
from taobank.contract import Launch, Plan, ResultFile, ResultsListing, ResultsLocation, SubmitOptions
from taobank.errors import TaoError, UsageError
from taobank.core.platform import JobView
from taobank.states import State


class SweepStand:
    """A platform that plans every spec, lists a fixed parent folder and launches trials without a cluster."""

    name = "slurm"
    helper = "tao_slurm.py"
    spec_type = SlurmSpec

    def __init__(self) -> None:
        self.planned: list[dict] = []
        self.reached: list[str] = []

    # the parent's results
    def results_location(self, rec):
        return ResultsLocation(rec.results_dir, True)

    def list_results(self, rec, loc, *, status):
        files = [ResultFile("train/model_epoch_010.pth", 1, 1.0), ResultFile("train/model_epoch_011.pth", 1, 2.0)]
        return ResultsListing(loc.folder, files, links={"train/dino_model_latest.pth": "train/model_epoch_010.pth"})

    def lineage_access(self, spec, parent, folder):
        self.reached.append(folder)
        return spec

    def typed_spec(self, spec):
        return SlurmSpec.from_dict(spec)

    def typed_specs(self, specs):  # the contract's default: each spec typed on its own
        return [self.typed_spec(spec) for spec in specs]

    # a sweep
    def plan(self, spec, opts, rec):
        self.planned.append(spec)
        return Plan(spec, "img", "dino", "evaluate", "A", "/l/results/{id}")

    def plan_all(self, specs, opts, rec):  # the contract's default: each spec planned on its own
        return [self.plan(spec, opts, rec) for spec in specs]

    def check(self, plans, gate, batch):
        pass

    def adopt(self, plan, rec, gate):
        return None

    def cluster_key(self, plan):
        return "local"

    def launch(self, plans, recs, batch):
        return [Launch(f"slurm:9_{i}", {}, "submitted") for i in range(len(plans))]

    def view(self, rec):
        return JobView.from_record(rec)


@pytest.fixture()
def stand(state_dir, monkeypatch):
    made = SweepStand()
    monkeypatch.setattr(core, "get", lambda name: made)
    monkeypatch.setattr(lineage, "get", lambda name: made)
    return made


def parent_job() -> dict:
    rec = records.open_record("slurm", "img", "dino", "train", "A", "/l/results/{id}")
    for state in (State.RUNNING, State.COMPLETE):
        records.mark(rec["id"], state)
    return records.load(rec["id"])


SPEC = {"command": ["dino", "evaluate", "-e", "s.yaml", "evaluate.checkpoint={parent.checkpoint}"]}
TRIALS = [{"evaluate.batch_size": "8"}, {"evaluate.batch_size": "16"}]


def test_a_sweep_with_a_parent_fills_it_once_and_every_trial_names_it(stand):
    parent = parent_job()
    done = sweeps.submit("slurm", dict(SPEC), SubmitOptions(parent=parent["id"]), TRIALS)
    want = f"evaluate.checkpoint=/l/results/{parent['id']}/train/model_epoch_010.pth"  # the link's target
    assert [s.command[4:] for s in stand.planned] == [[want, "evaluate.batch_size=8"],
                                                         [want, "evaluate.batch_size=16"]]
    assert stand.reached == [f"/l/results/{parent['id']}"]  # one listing, one access step for the whole sweep
    assert [records.load(v.id)["parent"] for v in done.views] == [parent["id"]] * 2


def test_a_sweep_refuses_an_unusable_parent_before_any_record(stand):
    running = records.open_record("slurm", "img", "dino", "train", "A", "/l/results/{id}")
    with pytest.raises(TaoError, match="not COMPLETE"):
        sweeps.submit("slurm", dict(SPEC), SubmitOptions(parent=running["id"]), TRIALS)
    assert [r["id"] for r in records.list_records()] == [running["id"]]
    with pytest.raises(UsageError, match="--parent ID"):
        sweeps.submit("slurm", dict(SPEC), SubmitOptions(), TRIALS, parent_kpi="val_loss")


def test_the_helpers_hand_the_parent_flags_to_the_sweep(stand):
    parent = parent_job()
    args = argparse.Namespace(parent=parent["id"], parent_kpi=None, parent_mode="min",
                              allow_incomplete_parent=False, max_concurrent=None, json=False, quiet=True)
    assert verbcli.sweep_submit("slurm", dict(SPEC), SubmitOptions(), TRIALS, args) == 0
    trial_ids = [r["id"] for r in records.list_records() if r.get("sweep")]
    assert len(trial_ids) == 2 and all(records.load(i)["parent"] == parent["id"] for i in trial_ids)
    with pytest.raises(UsageError, match="--parent ID"):  # a plain submit does not drop --parent-kpi either
        verbcli.submit_lineage("slurm", {}, SubmitOptions(), argparse.Namespace(parent=None, parent_kpi="x"))


def test_every_trial_keeps_its_spec_so_continue_runs_that_trial(stand):
    done = sweeps.submit("slurm", {"command": ["dino", "train", "-e", "s.yaml"]}, SubmitOptions(secret_env=("K",)),
                         TRIALS)
    spec, options = jobfiles.load_spec(done.views[1].id)
    assert spec["command"] == ["dino", "train", "-e", "s.yaml", "evaluate.batch_size=16"]
    assert options == {"secret_env": ["K"]}


def test_a_spec_not_kept_says_why(state_dir):
    rec = records.open_record("slurm", "img", "dino", "train", "A", "/l/{id}")
    jobfiles.save_spec(rec["id"], {"command": ["x"], "env": {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}})
    with pytest.raises(TaoError, match="not kept: a value in its spec looks like a credential") as exc:
        jobfiles.load_spec(rec["id"])
    assert "wJalr" not in str(exc.value) and "before this bank kept one" not in str(exc.value)
    assert "wJalr" not in (records.artifact_dir(rec["id"]) / jobfiles.SPEC_FILE).read_text()
