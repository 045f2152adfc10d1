"""A search given no ``--space`` takes the keys TAO marks ``automl_enabled`` (taobank.campaign.search.automl), and a
search's ``--kpi`` must be one the network logs (TAO's own list), both before anything is created."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from taobank import tao_spec_check, tao_command
from taobank.errors import UsageError
from taobank.campaign.search import automl, space

BANK = Path(__file__).resolve().parents[2]


def _texts(network: str, action: str = "train") -> dict[str, str]:
    return {k: p.text() for k, p in automl.default(network, action).space.items()}


def test_dinos_default_space_follows_taos_metadata_by_the_documented_rules():
    got = _texts("dino")
    assert got["train.optim.lr"] == "loguniform(2e-06,0.02)"  # default 2e-4 in [0, 1]: two decades either side
    assert got["train.optim.weight_decay"] == "loguniform(1e-06,0.01)"
    assert got["train.optim.momentum"] == "uniform(0,1)"  # default 0.9: TAO's range as it is
    assert got["model.enc_layers"] == "int(3,12)"  # no top in TAO's metadata: TAO's rule, default/2 .. 2 x default
    assert got["dataset.batch_size"] == "int(1,4)"  # an open top (inf) is the default, as TAO's AutoML takes it
    left = automl.default("dino", "train").left_out
    assert {"model.num_queries", "model.num_select"} <= set(left)  # TAO ties them to each other
    assert all(k.split(".")[0] in ("model", "dataset", "train") for k in got)


def test_booleans_options_conditions_and_lists():
    got = _texts("classification_pyt")
    assert got["model.backbone.freeze_backbone"] == "choice(true,false)"
    assert "distill.teacher.backbone.freeze_backbone" not in got  # another action's section
    assert "train.optim.betas" in automl.default("classification_pyt", "train").left_out  # a list
    assert automl.default("mask2former", "train").left_out["model.mask_former.hidden_dim"] == \
        "TAO's condition '/ 8' is not a range"
    assert automl.param("a.b", {"type": "number", "default": 0.5}, {})[0].text() == "uniform(0.05,5)"
    assert automl.param("a.b", {"type": "integer", "default": 6}, {})[0].text() == "int(3,12)"
    assert automl.param("a.b", {"type": "string", "default": "x"}, {"valid_options": ["x", "y"]})[0].text() == \
        "choice(x,y)"
    assert automl.param("a.b", {"type": "number", "default": 0.0}, {"valid_min": 0.0, "valid_max": "inf"})[0] is None


@pytest.mark.parametrize("network", tao_command.networks())
def test_every_default_space_passes_the_spec_check_at_its_edges(network):
    try:
        found = automl.default(network, "train")
    except UsageError as exc:
        assert "give --space" in str(exc) and "\n" not in str(exc)
        return
    for edge in space.edges(found.space):
        report = tao_spec_check.check(network, "train", None, [f"{k}={v}" for k, v in edge.items()], required=False)
        assert not report.lines(), (edge, report.lines())


def test_a_network_without_automl_keys_refuses_in_one_line():
    for network in ("mal", "re_identification"):
        with pytest.raises(UsageError, match="give --space") as got:
            automl.default(network, "train")
        assert "\n" not in str(got.value)
    with pytest.raises(UsageError, match="has no network"):
        automl.default("my_custom_net", "train")


def _dry_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TAO_STATE_DIR": str(tmp_path / "state"), "TAO_DOCKER_RESULTS_DIR": str(tmp_path / "r")}
    return subprocess.run([sys.executable, str(BANK / "scripts" / "tao_docker.py"), "submit", "--dry-run",
                           "--image", "busybox:1", "--search", "tpe", "--trials", "4", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_a_dry_run_without_space_says_the_space_on_stderr_and_stages_it(tmp_path):
    res = _dry_run(tmp_path, "--kpi", "val_mAP50", "--", "dino", "train")
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0].startswith("search space: TAO's AutoML keys of dino train (13 keys")
    assert "  train.optim.lr=loguniform(2e-06,0.02)" in lines
    assert '"train.optim.lr"' in res.stdout and "loguniform" in res.stdout  # the staged study.json


def test_a_kpi_the_network_does_not_log_is_refused_in_one_line_and_nothing_is_created(tmp_path):
    res = _dry_run(tmp_path, "--kpi", "val_accuracy", "--space", "train.optim.lr=loguniform(1e-5,1e-2)", "--",
                   "dino", "train")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip() == ("error: --kpi 'val_accuracy': dino does not log it; TAO lists val_mAP50, and its "
                                  "train_loss and val_loss: give one of them (nothing was submitted; --no-kpi-check "
                                  "for a KPI its trainer writes all the same)")
    # a KPI the trainer writes though TAO does not list it (DINO's val_mAP): --no-kpi-check, the spec still checked
    assert _dry_run(tmp_path, "--kpi", "val_mAP", "--mode", "max", "--no-kpi-check", "--space",
                    "train.optim.lr=loguniform(1e-5,1e-2)", "--", "dino", "train").returncode == 0
    bad_spec = _dry_run(tmp_path, "--kpi", "val_mAP", "--mode", "max", "--no-kpi-check", "--space",
                        "train.optim.lr=loguniform(1e-5,1e-2)", "--", "dino", "train", "train.num_epoch=3")
    assert bad_spec.returncode != 0 and "train.num_epochs" in bad_spec.stderr
    # every TAO trainer writes its losses to status.json, whatever TAO's API lists
    assert _dry_run(tmp_path, "--kpi", "val_loss", "--space", "train.optim.lr=loguniform(1e-5,1e-2)", "--",
                    "dino", "train").returncode == 0
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("*.json"))
    # a custom build: --no-spec-check; a stand-in command (not TAO's entrypoint): not judged
    assert _dry_run(tmp_path, "--kpi", "val_accuracy", "--mode", "max", "--no-spec-check", "--space", "train.optim.lr=loguniform(1e-5,1e-2)",
                    "--", "dino", "train").returncode == 0
    stand_in = _dry_run(tmp_path, "--kpi", "val_loss", "--network-arch", "dino", "--action", "train", "--space",
                        "train.optim.bogus=loguniform(1e-5,1e-2)", "--", "sh", "-c", "true")
    assert stand_in.returncode == 0  # ... and said so: its space was not checked either
    assert f"note: sweep preview: {tao_command.NOT_TAO_FORM_SPACE}" in stand_in.stderr.splitlines(), stand_in
    # one of TAO's patterns of a network's per-class names is a KPI it logs
    assert _dry_run(tmp_path, "--kpi", "img_bbox_NuScenes/NDS", "--mode", "max", "--space",
                    "train.optim.lr=loguniform(1e-5,1e-2)", "--", "sparse4d", "train").returncode == 0


def test_a_search_of_no_known_network_without_space_says_what_to_give(tmp_path):
    res = _dry_run(tmp_path, "--kpi", "val_loss", "--", "sh", "-c", "true")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--space" in res.stderr
