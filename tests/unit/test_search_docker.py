"""A search's launch on Docker, on the fake engine: what each trial's container is made with (the search's folder
mounted, the runner in front of the command), what is staged, and the one-line refusals that leave nothing."""
from __future__ import annotations

import json
import os

import pytest

from fakeproc import ok
from test_docker_campaigns import SPEC, Engine
from taobank import records, sweeps
from taobank.contract import SubmitOptions
from taobank.errors import TaoError
from taobank.search import bundle, settings, space

PYTHON_RUNS = lambda c: c.argv[1] == "run" and "--rm" in c.argv  # noqa: E731  (the image's python3 check)


def staging() -> bundle.Staging:
    return bundle.Staging(settings.make("", sampler="tpe", pruner="asha", trials=3, kpi="val_loss", mode=None,
                                        space=space.from_flags(["train.optim.lr=loguniform(1e-5,1e-1)"])))


@pytest.fixture()
def engine(docker_fake, fake):
    fake.on("python3", lambda c: c.argv[2:4] == ["sweep", "supervise"], ok("4242\n"))
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
    from taobank.docker import sweep

    engine.fake.on("docker", PYTHON_RUNS, ok(""))
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{}, {}, {}], 2, search=staging())
    rec = records.get(done.views[0].id)
    folder = rec.backend["search_dir"]
    assert sweep.read_search_file(rec, os.path.join(folder, "journal.log")) == ""  # no trial has run yet
    with pytest.raises(TaoError, match="not a trial of a search"):
        sweep.read_search_file(rec, "/etc/passwd")
    assert sweeps.study(done.sweep).trials == []
