"""A search's launch on Docker (fake engine) and SLURM (fake ssh): what each trial is made with (the search's folder
mounted, the runner in front of the command), what is staged, and the one-line refusals that leave nothing."""
from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from fakeproc import ok
from test_docker_campaigns import SPEC, Engine
from taobank import records
from taobank.campaign import sweeps
from taobank.contract import SubmitOptions
from taobank.errors import TaoError, UsageError
from taobank.campaign.search import bundle, settings, space

PYTHON_RUNS = lambda c: c.argv[1] == "run" and "--rm" in c.argv  # noqa: E731  (the image's python3 check)


def staging() -> bundle.Staging:
    return bundle.Staging(settings.make("", sampler="tpe", pruner="asha", trials=3, kpi="val_loss", mode=None,
                                        space=space.from_flags(["train.optim.lr=loguniform(1e-5,1e-1)"])))


@pytest.fixture()
def engine(docker_fake, fake):
    fake.on("python3", lambda c: c.argv[1:4] == ["-m", "taobank", "supervise"], ok("4242\n"))
    return Engine(fake)


def test_each_trial_runs_the_runner_from_the_mounted_search_folder(engine, tmp_path):
    engine.fake.on("docker", PYTHON_RUNS, ok(""))
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{}, {}, {}], 2, search=staging())
    folder = tmp_path / "results" / done.sweep / "search"
    assert sorted(p.name for p in folder.iterdir()) == ["search.pyz", "study.json"]
    assert json.loads((folder / "study.json").read_text())["study"] == done.sweep
    checks = [c for c in engine.fake.calls if c.program == "docker" and PYTHON_RUNS(c)]
    assert len(checks) == 1 and checks[0].argv[-3:] == ["python3", "-c", "import sys, numpy; sys.exit("
                                                        "sys.version_info < (3, 10))"]
    for i, view in enumerate(done.views):
        argv = engine.containers[view.id]["argv"]
        assert f"type=bind,source={folder},target=/tao-search" in argv
        at = argv.index("img:1")
        assert argv[at + 1:at + 9] == ["python3", "/tao-search/search.pyz", "--settings", "/tao-search/study.json",
                                       "--trial", str(i), "--", "sh"]
        rec = records.load(view.id)
        assert rec["backend"]["search_dir"] == str(folder) and rec["backend"]["search"] == "tpe"
        assert rec["backend"]["search_kpi"] == "val_loss" and rec["overrides"] == {}


def test_an_image_without_python_is_refused_in_one_line_and_nothing_is_made(engine, tmp_path, state_dir):
    engine.fake.on("docker", PYTHON_RUNS, ok("", rc=127, stderr="python3: not found"))
    with pytest.raises(TaoError, match="has no python3 of 3.10 or later with numpy") as err:
        sweeps.submit("docker", SPEC, SubmitOptions(), [{}, {}, {}], 2, search=staging())
    assert "\n" not in str(err.value)
    assert not engine.containers and not list(state_dir.glob("*.json"))
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_a_journal_is_read_only_from_the_folder_the_record_names(engine, tmp_path):
    from taobank.platforms.docker import search as sweep

    engine.fake.on("docker", PYTHON_RUNS, ok(""))
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{}, {}, {}], 2, search=staging())
    rec = records.get(done.views[0].id)
    folder = rec.backend["search_dir"]
    assert sweep.read_search_file(rec, os.path.join(folder, "journal.log")) == ""  # no trial has run yet
    with pytest.raises(TaoError, match="not a trial of a search"):
        sweep.read_search_file(rec, "/etc/passwd")
    assert sweeps.study(done.sweep).trials == []


# ------------------------------------------------------------------ SLURM, on the fake ssh
SLURM_SPEC = {"network_arch": "dino", "action": "train", "container_runtime": "none", "num_gpus": 1,
              "command": ["sh", "train.sh", "-e", "spec.yaml"]}


def _staged(call) -> dict[str, bytes]:
    import base64
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(call.stdin))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_a_slurm_search_is_one_site_check_more_and_stages_the_study_with_the_array(slurm):
    slurm.ssh("STAGE_MANY")
    slurm.ssh("SBATCH_ARRAY", "777\n")
    slurm.ssh("SEARCH_SITE", "site-checked\n")
    done = sweeps.submit("slurm", SLURM_SPEC, SubmitOptions(), [{}, {}, {}], 2, search=staging())
    ran = slurm.scripts()
    assert Counter(ran) == Counter(["MISSING", "SEARCH_SITE", "STAGE_MANY", "SBATCH_ARRAY"])  # one command more
    assert ran.index("SEARCH_SITE") < ran.index("STAGE_MANY")  # kept: the site is checked before anything is staged
    (stage,) = [c for c in slurm.calls if c.script == "STAGE_MANY"]
    files = _staged(stage)
    assert json.loads(files[f"{done.sweep}/search/study.json"])["study"] == done.sweep
    assert files[f"{done.sweep}/search/search.pyz"][:2] == b"PK"  # a zip application
    for i, view in enumerate(done.views):
        rec = records.load(view.id)
        folder = rec["backend"]["search_dir"]
        assert folder.endswith(f"/{done.sweep}/search") and rec["backend"]["search_pruner"] == "asha"
        script = files[f"{view.id}/sbatch/job_{view.id}.sbatch"].decode()
        assert f"python3 {folder}/search.pyz --settings {folder}/study.json --trial {i} -- sh train.sh" in script


@pytest.mark.parametrize("said,says", [("no-lock /lustre", "not exclusive"), ("no-python", "python3"),
                                       ("no-write /lustre", "cannot write")])
def test_a_slurm_site_that_cannot_run_a_search_is_refused_in_one_line_before_any_record(slurm, state_dir, said, says):
    slurm.ssh("SEARCH_SITE", said + "\nsite-checked\n")
    with pytest.raises(TaoError, match=says) as err:
        sweeps.submit("slurm", SLURM_SPEC, SubmitOptions(), [{}, {}, {}], 2, search=staging())
    assert "\n" not in str(err.value) and not list(state_dir.glob("*.json"))
    assert "STAGE_MANY" not in [c.script for c in slurm.calls]


def test_a_search_dry_run_shows_each_trials_runner_and_the_settings_contacting_nothing(slurm, docker_fake,
                                                                                      monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    shown = sweeps.preview("slurm", SLURM_SPEC, SubmitOptions(), [{}, {}, {}], 2, search=staging())
    assert not [c for c in slurm.calls if c.program in ("ssh", "docker") and not c.control]
    text = shown.text()
    assert text.count("(asked of the study as it starts)") == 3 and "search/study.json" in text
    assert "search.pyz --settings" in text and "--trial 2 -- sh train.sh" in text
    shown = sweeps.preview("docker", SPEC, SubmitOptions(), [{}, {}], 2, search=staging())
    text = shown.text()
    assert "target=/tao-search" in text and "/tao-search/search.pyz --settings /tao-search/study.json --trial 1" in text
    assert not [c for c in docker_fake.calls if c.program == "docker"]
    k8s = {"image": "x:1", "command": ["true"], "gpus": 0, "mounts": [{"pvc": "ws", "mount_path": "/results"}]}
    text = sweeps.preview("kubernetes", k8s, SubmitOptions(), [{}, {}], 2, search=staging()).text()
    assert "ConfigMap tao-search-preview-sweep" in text and 'mountPath: "/tao-search"' in text
    assert "search.pyz --settings /tao-search/study.json --trial" in text
    assert "--journal /results/preview-sweep/search/journal.log" in text.replace("\\\n", "").replace('  "', "")
    assert "bytes>" in text  # the bundle's bytes are not shown
    with pytest.raises(TaoError, match="on a mounted volume|per-pod staging"):  # a sweep's own rule, then the search's
        sweeps.preview("kubernetes", {**k8s, "mounts": [], "results_dir": "s3://b/r", "storage_tier": "C"},
                       SubmitOptions(secret_env=["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]),
                       [{}, {}], 2,
                       search=staging())
