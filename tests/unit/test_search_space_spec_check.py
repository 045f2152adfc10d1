"""A search's space and a batch's shared problems go through the spec check before anything is created."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from taobank import tao_spec_gate, tao_command
from taobank.campaign.search import space

BANK = Path(__file__).resolve().parents[2]


def _docker_dry_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TAO_STATE_DIR": str(tmp_path / "state"), "TAO_DOCKER_RESULTS_DIR": str(tmp_path / "r")}
    return subprocess.run([sys.executable, str(BANK / "scripts" / "tao_docker.py"), "submit", "--dry-run",
                           "--image", "busybox:1", *args], capture_output=True, text=True, env=env, timeout=120)


def test_edges_give_each_bound_and_each_choice_once():
    found = space.from_flags(["train.optim.lr=loguniform(1e-5,0.1)", "model.backbone=choice(a,b)"])
    assert space.edges(found) == [{"train.optim.lr": "1e-05"}, {"train.optim.lr": "0.1"},
                                  {"model.backbone": "a"}, {"model.backbone": "b"}]


def test_a_space_key_tao_lacks_a_float_for_a_whole_number_and_a_bound_past_taos_range_are_refused(tmp_path):
    res = _docker_dry_run(tmp_path, "--search", "tpe", "--trials", "4", "--kpi", "val_mAP50",
                          "--space", "train.bogus=uniform(1,2)", "--space", "train.num_epochs=uniform(0.5,2)",
                          "--space", "train.optim.lr=loguniform(1e-5,5)", "--", "dino", "train")
    assert res.returncode != 0 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines[0].startswith("error: --space train.bogus: no such key in dino's spec")
    assert sum("train.bogus" in line for line in lines) == 1  # once, not once per bound
    assert any("--space train.num_epochs: 0.5 is not a whole number" in line for line in lines)
    assert any("--space train.optim.lr: 5.0 is above TAO's maximum" in line for line in lines)
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("*.json"))


def test_the_commands_own_problem_is_said_plainly_and_once_for_every_trial(tmp_path):
    res = _docker_dry_run(tmp_path, "--search", "tpe", "--trials", "5", "--kpi", "val_mAP50",
                          "--space", "train.optim.lr=loguniform(1e-5,0.1)", "--", "dino", "train",
                          "train.num_epochs=abc")
    assert res.returncode != 0
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("error:")] == [
        "error: train.num_epochs: 'abc' is not a whole number (nothing was submitted; fix the spec (tao_jobs.py "
        "spec check), or --no-spec-check for a TAO the bank does not know)"]


def test_a_sweep_names_only_the_trials_a_problem_is_in():
    specs = [tao_command.identified({"command": ["dino", "train", f"train.num_epochs={v}"]}) for v in ("1", "x", "y")]
    problems, _ = tao_spec_gate.check(specs, lambda spec, path: None)
    assert problems == ["trial 1: train.num_epochs: 'x' is not a whole number",
                        "trial 2: train.num_epochs: 'y' is not a whole number"]
    shared = [tao_command.identified({"command": ["dino", "train", "train.num_epoch=3", f"train.optim.lr={v}"]})
              for v in ("0.1", "0.2")]
    problems, _ = tao_spec_gate.check(shared, lambda spec, path: None)
    assert len(problems) == 1 and problems[0].startswith("train.num_epoch: no such key")


@pytest.mark.parametrize("flag", [["--prune", "median"], ["--prune", "bogus"]])
def test_prune_belongs_to_a_search(tmp_path, flag):
    res = _docker_dry_run(tmp_path, "--sweep", "train.num_epochs=1,2", *flag, "--", "dino", "train")
    assert res.returncode == 2 and "--prune belongs to a search" in res.stderr
