"""The one submit order (taobank.core.pipeline) over a stand-in platform: a single job and a sweep go through the same
gates and the same ONE adapter launch; a multi-node sweep trial gets the NCCL gate line a single job gets; what a
launch leaves behind is written by the core alone."""
from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from taobank.core import nccl_verdicts, pipeline
from taobank import records
from taobank.campaign import sweeps
from taobank.core import platform as core
from taobank.platforms.slurm.spec import SlurmSpec
from taobank.contract import Batch, Launch, Plan, SubmitOptions
from taobank.errors import SubmitUncertain, TaoError
from taobank.core.platform import JobView

SPEC = {"command": ["dino", "train", "-e", "s.yaml"]}


class Stand:
    """A platform that plans every spec as ``nodes`` nodes and launches without a cluster, counting its calls."""

    name = "slurm"
    helper = "tao_slurm.py"

    def __init__(self, nodes: int = 1) -> None:
        self.nodes = nodes
        self.checks: list[tuple[int, Batch]] = []
        self.launches: list[tuple[list[str], Batch]] = []
        self.fail: Exception | None = None
        self.checkpoint: tuple[str, dict] | None = None

    def typed_spec(self, spec):
        return SlurmSpec.from_dict(spec)

    def typed_specs(self, specs):  # the contract's default: each spec typed on its own
        return [self.typed_spec(spec) for spec in specs]

    def plan(self, spec, opts, rec):
        return Plan(spec, "img", "dino", "train", "A", "/l/results/{id}", nodes=self.nodes)

    def plan_all(self, specs, opts, rec):  # the contract's default: each spec planned on its own
        return [self.plan(spec, opts, rec) for spec in specs]

    def cluster_key(self, plan):
        return "lab"

    def adopt(self, plan, rec, gate):
        return None

    def check(self, plans, gate, batch):
        self.checks.append((len(plans), batch))
        gate.lines.append("checked")

    def launch(self, plans, recs, batch):
        self.launches.append(([r.id for r in recs], batch))
        if self.checkpoint:
            batch.checkpoint(recs[0].id, *self.checkpoint)
        if self.fail:
            raise self.fail
        return [Launch(f"slurm:{i}", {"n": i}, "submitted") for i in range(len(plans))]

    def view(self, rec):
        return JobView.from_record(rec)


@pytest.fixture()
def stand(state_dir, monkeypatch):
    made = Stand()
    monkeypatch.setattr(core, "get", lambda name: made)
    monkeypatch.delenv(nccl_verdicts.GATE_ENV, raising=False)
    return made


def _probe_ok() -> None:
    now = datetime.now(timezone.utc).strftime(nccl_verdicts.STAMP)
    nccl_verdicts.save_verdict("slurm", "lab", {"verdict": "ok", "job_id": "probe-1", "checked_at": now,
                                                "backend": "nccl"})


def test_one_job_and_a_sweep_take_the_same_single_launch(stand):
    view = core.Platform.submit(stand, dict(SPEC), SubmitOptions())
    done = sweeps.submit("slurm", dict(SPEC), SubmitOptions(), [{"train.optim.lr": "0.1"}, {"train.optim.lr": "0.2"}], 1)
    assert [len(ids) for ids, _ in stand.launches] == [1, 2]  # one launch call each, with every job in it
    (_, single), (_, batch) = stand.launches
    assert single.sweep is None and single.max_concurrent == 1
    assert batch.sweep == done.sweep and batch.max_concurrent == 1
    assert [n for n, _ in stand.checks] == [1, 2]  # one check of the whole list each
    assert records.load(view.id)["backend_ref"] == "slurm:0"
    assert [records.load(v.id)["backend_ref"] for v in done.views] == ["slurm:0", "slurm:1"]


def test_a_multi_node_sweep_trial_prints_the_nccl_line_a_single_job_prints(stand):
    stand.nodes = 2
    _probe_ok()
    view = core.Platform.submit(stand, dict(SPEC), SubmitOptions())
    done = sweeps.submit("slurm", dict(SPEC), SubmitOptions(), [{"train.optim.lr": "0.1"}, {"train.optim.lr": "0.2"}])
    (line,) = re.findall(r"NCCL probe ok \(job probe-1, [^)]*\)", view.extra["gate"])
    assert "NCCL over GPUs" in line and line in done.gate
    for v in [view, *done.views]:  # every record keeps the verdict it was launched under
        assert records.load(v.id)["backend"]["nccl_probe_job"] == "probe-1"


def test_a_multi_node_sweep_without_a_probe_is_refused_before_any_record(stand):
    stand.nodes = 2
    with pytest.raises(TaoError, match="need an ok NCCL probe"):
        sweeps.submit("slurm", dict(SPEC), SubmitOptions(), [{"train.optim.lr": "0.1"}, {"train.optim.lr": "0.2"}])
    assert records.list_records() == [] and stand.launches == []
    done = sweeps.submit("slurm", dict(SPEC), SubmitOptions(skip_nccl_probe=True), [{"train.optim.lr": "0.1"}])
    assert "NCCL probe skipped (--skip-nccl-probe)" in done.gate.split("; ")


def test_a_failed_launch_marks_every_record_error_single_and_sweep(stand):
    stand.fail = TaoError("sbatch: error: invalid partition")
    with pytest.raises(TaoError, match="^sbatch: error: invalid partition$"):
        core.Platform.submit(stand, dict(SPEC), SubmitOptions())
    with pytest.raises(TaoError, match=r"failed to launch \(sbatch: error: invalid partition\); no trial runs"):
        sweeps.submit("slurm", dict(SPEC), SubmitOptions(), [{"train.optim.lr": "0.1"}, {"train.optim.lr": "0.2"}])
    recs = records.list_records()
    assert len(recs) == 3 and {r["state"] for r in recs} == {"ERROR"}
    assert all("failed before launch: sbatch: error: invalid partition" in r["message"] for r in recs)


def test_what_a_launch_learns_on_the_way_is_written_by_the_core(stand):
    stand.checkpoint = ("staged; submitting", {"staged_dir": "/l/jobs/x"})
    stand.fail = SubmitUncertain("sbatch answer lost: run resume", note="sbatch answer lost; finish with resume")
    with pytest.raises(SubmitUncertain):
        core.Platform.submit(stand, dict(SPEC), SubmitOptions())
    (rec,) = records.list_records()
    assert rec["state"] == "PENDING" and rec["backend"]["staged_dir"] == "/l/jobs/x"
    assert rec["message"] == "sbatch answer lost; finish with resume" and not rec.get("backend_ref")


def test_max_concurrent_is_checked_once_for_every_caller():
    assert pipeline.check_concurrency(None, 3) == 3 and pipeline.check_concurrency(3, 3) == 3
    with pytest.raises(TaoError, match="at least 1"):
        pipeline.check_concurrency(0, 3)
    with pytest.raises(TaoError, match="--max-concurrent 9 is more than the sweep's 3 trials: give at most 3"):
        pipeline.check_concurrency(9, 3)
