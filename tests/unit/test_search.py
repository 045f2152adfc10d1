"""A search's core with the REAL Optuna (requirements-dev.txt pins optuna==5.0.0; nothing of it is faked): the
space grammar and the settings' one-line refusals, the bundle, and the trial-side runner driving the stand-in
trainer (testclusters/fake_tao_train.sh with fake.lr_optimum: val_loss a known function of train.optim.lr)."""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from taobank.errors import TaoError, UsageError
from taobank.campaign.search import bundle, journal, settings, space, trial

BANK = Path(__file__).resolve().parents[2]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"
LR = "train.optim.lr=loguniform(1e-5,1e-1)"


# ------------------------------------------------------------------ space and settings
def test_the_four_kinds_parse_and_read_back():
    got = space.from_flags([LR, "train.wd=uniform(0, 0.1)", "train.bs=int(8,32)", "model.bb=choice(resnet18, resnet34)"])
    assert got["train.optim.lr"] == space.Param("train.optim.lr", "loguniform", 1e-5, 1e-1)
    assert got["train.bs"].grid() == list(range(8, 33)) and got["train.optim.lr"].grid() is None
    assert got["model.bb"].choices == ("resnet18", "resnet34")
    assert space.from_dict(space.to_dict(got)) == got
    assert got["train.optim.lr"].text() == "loguniform(1e-05,0.1)"


@pytest.mark.parametrize("flag,says", [
    ("a=uniform(1,0)", "empty or inverted"),
    ("a=uniform(1,1)", "empty or inverted"),
    ("a=int(5,2)", "empty or inverted"),
    ("a=loguniform(0,1)", "bounds above 0"),
    ("a=loguniform(-1,1)", "bounds above 0"),
    ("a=choice(x)", "at least two values"),
    ("a=choice(x,x)", "twice"),
    ("a=choice(x,a b)", "not safe"),
    ("a=normal(0,1)", "use loguniform"),
    ("a=uniform(0,nan)", "finite"),
    ("a=uniform(0)", "two bounds"),
    ("a=int(1.5,3)", "whole numbers"),
    ("-a=uniform(0,1)", "not a TAO override key"),
    ("a", "KEY=loguniform"),
])
def test_a_bad_space_is_one_line(flag, says):
    with pytest.raises(UsageError, match=says) as err:
        space.from_flags([flag])
    assert "\n" not in str(err.value)


def test_a_key_given_twice_and_flags_with_a_file_are_refused(tmp_path):
    with pytest.raises(UsageError, match="twice"):
        space.from_flags(["a=uniform(0,1)", "a=uniform(0,2)"])
    f = tmp_path / "space.yaml"
    f.write_text("train.optim.lr: loguniform(1e-5, 1e-2)\nmodel.bb: choice(a, b)\n")
    assert list(space.of(None, str(f))) == ["train.optim.lr", "model.bb"]
    with pytest.raises(UsageError, match="not both"):
        space.of(["a=uniform(0,1)"], str(f))
    assert space.of(None, None) == {}  # no space: TAO's AutoML keys of the job's network (test_search_default_space)
    f.write_text("a: 3\n")
    with pytest.raises(UsageError, match="expression"):
        space.of(None, str(f))


def _settings(**kw) -> settings.Settings:
    args = {"sampler": "tpe", "pruner": "asha", "trials": 6, "kpi": "val_loss", "mode": None,
            "space": space.from_flags([LR])}
    args.update(kw)
    return settings.make("study-x", **args)


@pytest.mark.parametrize("kw,says", [
    ({"sampler": "bayes"}, "--search 'bayes' is unknown"),
    ({"pruner": "sha"}, "--prune 'sha' is unknown"),
    ({"trials": 0}, "--trials must be a whole number from 1"),
    ({"kpi": "foo"}, "add --mode min"),
    ({"kpi": ""}, "needs --kpi"),
    ({"mode": "up"}, "--mode 'up' is unknown"),
    ({"sampler": "grid"}, "continuous"),
    ({"sampler": "grid", "space": space.from_flags(["a=int(1,3)"]), "trials": 4}, "3 points"),
])
def test_bad_settings_are_one_line(kw, says):
    with pytest.raises(UsageError, match=says) as err:
        _settings(**kw)
    assert "\n" not in str(err.value)


def test_settings_travel_as_json_and_make_optunas_own_objects():
    import optuna

    s = _settings(kpi="mAP", mode=None, seed=7)
    back = settings.Settings.from_dict(json.loads(s.to_json()))
    assert back.to_dict() == s.to_dict() and back.mode == "max" and back.mode_from == "name"
    assert isinstance(settings.sampler(back, 3), optuna.samplers.TPESampler)
    assert isinstance(settings.pruner(back), optuna.pruners.SuccessiveHalvingPruner)
    assert isinstance(settings.pruner(_settings(pruner="hyperband")), optuna.pruners.HyperbandPruner)
    assert isinstance(settings.pruner(_settings(pruner="median")), optuna.pruners.MedianPruner)
    grid = _settings(sampler="grid", space=space.from_flags(["a=choice(x,y)", "b=int(1,3)"]))
    assert isinstance(settings.sampler(grid, 0), optuna.samplers.GridSampler)
    d = settings.distributions(s.space)["train.optim.lr"]
    assert isinstance(d, optuna.distributions.FloatDistribution) and d.log
    with pytest.raises(UsageError):
        settings.Settings.from_dict({**s.to_dict(), "sampler": "nope"})


def test_the_cli_refuses_search_flags_alone_and_checks_before_reading_the_spec():
    from taobank.cli import verbcli

    p = argparse.ArgumentParser()
    verbcli.add_submit_flags(p)
    with pytest.raises(UsageError, match="belongs to a search"):
        verbcli.trials_of(p.parse_args(["--kpi", "val_loss"]))
    with pytest.raises(UsageError, match="not both"):
        verbcli.trials_of(p.parse_args(["--search", "tpe", "--trials", "2", "--sweep", "a=1,2", "--kpi", "val_loss",
                                         "--space", LR]))
    with pytest.raises(UsageError, match="needs --trials"):
        verbcli.trials_of(p.parse_args(["--search", "tpe", "--kpi", "val_loss", "--space", LR]))
    got = verbcli.trials_of(p.parse_args(["--search", "tpe", "--trials", "3", "--kpi", "val_loss", "--space", LR]))
    assert got == [{}, {}, {}]


def test_a_bad_search_on_the_command_line_is_one_line_and_creates_nothing(tmp_path, state_dir):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"network_arch": "dino", "action": "train", "command": ["true"]}))
    proc = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_slurm.py"), "submit", "--spec", str(spec),
                           "--search", "tpe", "--trials", "3", "--kpi", "val_loss", "--space", "a=loguniform(0,1)"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "bounds above 0" in proc.stderr
    assert not state_dir.exists() or not any(state_dir.rglob("*.json"))


# ------------------------------------------------------------------ the bundle
def test_the_bundle_carries_optuna_and_the_runner_and_runs_without_this_path(tmp_path):
    data = bundle.build.__wrapped__("tpe")
    assert data == bundle.build.__wrapped__("tpe")  # the same install makes the same bytes
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    for need in ("__main__.py", "optuna/__init__.py", "optuna/storages/journal/_file.py", "colorlog/__init__.py",
                 "tqdm/__init__.py", "packaging/version.py", "taobank/campaign/search/trial.py",
                 "taobank/progress/statusfile.py"):
        assert need in names, need
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n or ".dist-info" in n]
    pyz = tmp_path / "search.pyz"
    pyz.write_bytes(data)
    # -I: no PYTHONPATH, no user site; the bundle alone brings Optuna and the bank
    proc = subprocess.run([sys.executable, "-I", str(pyz), "--help"], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert proc.returncode == 0 and "--settings" in proc.stdout, proc.stderr
    assert not [n for n in names if n.startswith(("taobank/platforms/slurm/", "taobank/cli/", "optuna/testing/"))]
    st = bundle.Staging(_settings())
    files = st.files("sweep-1")
    assert json.loads(files["study.json"])["study"] == "sweep-1"
    assert st.wrap(["dino", "train", "-e", "s.yaml"], "/x/search/", 4) == [
        "python3", "/x/search/search.pyz", "--settings", "/x/search/study.json", "--trial", "4", "--", "dino", "train",
        "-e", "s.yaml"]


# ------------------------------------------------------------------ the runner, on the stand-in trainer
def _study(tmp_path: Path, **kw) -> Path:
    folder = tmp_path / "search"
    folder.mkdir(exist_ok=True)
    s = _settings(action="train", **kw)
    s.study, s.poll_seconds, s.stop_grace_seconds = "sweep-t", 0.2, 10
    (folder / "study.json").write_text(s.to_json())
    return folder / "study.json"


def _trial(tmp_path: Path, path: Path, i: int, monkeypatch, *extra: str, epochs: int = 4) -> tuple[int, Path]:
    results = tmp_path / f"r{i}"
    results.mkdir()
    monkeypatch.setenv("TAO_API_JOB_ID", f"job-{i}")
    argv = ["sh", str(TRAINER), "--results", str(results), "--epochs", str(epochs), "--sleep", "1", "-e", "x",
            "fake.lr_optimum=0.001", *extra]
    import signal

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)}
    rc = trial.run(path, i, argv, results=results)
    # the runner forwards signals to TAO while it runs; after, a caller in the same process has its own handlers
    assert {sig: signal.getsignal(sig) for sig in before} == before
    return rc, results


def test_trials_ask_report_prune_and_tell_through_one_journal(tmp_path, monkeypatch, capfd):
    path = _study(tmp_path, trials=5)
    ends = [_trial(tmp_path, path, i, monkeypatch) for i in range(5)]
    assert [rc for rc, _ in ends] == [0] * 5
    out = capfd.readouterr().out
    assert out.count("tao-search: trial ") >= 5
    study = journal.read((path.parent / "journal.log").read_text(), "sweep-t")
    states = {t.job_id: t.state for t in study.trials}
    assert set(states) == {f"job-{i}" for i in range(5)}
    assert "PRUNED" in states.values() and "COMPLETE" in states.values(), states
    for t in study.trials:
        status = (tmp_path / f"r{t.number}" / "train" / "status.json").read_text().splitlines()
        last = json.loads(status[-1])
        if t.state == "PRUNED":  # TAO stopped early; the runner's line is the file's last word
            assert last["status"] == "PRUNED" and last["message"].startswith("PRUNED at epoch ")
            assert "worse than the rung's cut" in last["message"] and t.epochs < 4
        else:
            assert last["message"] == "DINO train completed successfully" and t.epochs == 4
        assert f"override train.optim.lr={t.words()['train.optim.lr']}" in out  # TAO got the sampled value
    assert study.best is not None and study.best.state == "COMPLETE"
    # the stand-in's lowest val_loss is 0.4 + 0.25 * log10(lr / 0.001)^2 (+-0.01 noise): the value told is it
    lr = study.best.params["train.optim.lr"]
    import math

    assert abs(study.best.value - (0.4 + 0.25 * math.log10(lr / 0.001) ** 2)) <= 0.0125


def test_a_corrupted_journal_fails_the_trial_in_one_line_naming_the_file_and_starts_no_tao(tmp_path, monkeypatch,
                                                                                           capfd):
    path = _study(tmp_path)
    (path.parent / "journal.log").write_text('{"op_code": 0, "worker_id": "x"\nnot json at all\n')
    rc, results = _trial(tmp_path, path, 0, monkeypatch)
    out = capfd.readouterr().out.strip().splitlines()
    assert rc == trial.EXIT_STUDY
    assert len(out) == 1 and str(path.parent / "journal.log") in out[0] and "cannot be read" in out[0], out
    assert not (results / "train").exists()
    with pytest.raises(TaoError, match="cannot be read"):
        journal.read("garbage\n", "sweep-t")


def test_a_kpi_tao_never_writes_fails_the_trial_and_says_which_it_writes(tmp_path, monkeypatch, capfd):
    path = _study(tmp_path, kpi="val_accuracy", pruner="none")
    rc, _ = _trial(tmp_path, path, 0, monkeypatch, epochs=2)
    assert rc == trial.EXIT_NO_KPI
    out = capfd.readouterr().out
    assert "TAO never wrote val_accuracy" in out and "val_loss" in out
    (t,) = journal.read((path.parent / "journal.log").read_text(), "sweep-t").trials
    assert t.state == "FAIL"


def test_a_nan_kpi_is_pruned_or_failed_never_a_crash(tmp_path, monkeypatch):
    path = _study(tmp_path, kpi="train_loss")
    rc, _ = _trial(tmp_path, path, 0, monkeypatch, "fake.nan_at=0", epochs=3)
    (t,) = journal.read((path.parent / "journal.log").read_text(), "sweep-t").trials
    assert rc in (0, trial.EXIT_NO_KPI) and t.state in ("PRUNED", "FAIL", "COMPLETE")


def test_a_torn_last_line_of_the_journal_is_not_read():
    assert journal.whole_lines('{"a": 1}\n{"b"') == '{"a": 1}\n'
    assert journal.read("", "x").trials == []


# ------------------------------------------------------------------ the SLURM site check (its shell, run here)
def _site(tmp_path: Path, path_dirs: list[Path], *args: str) -> list[str]:
    from taobank.campaign.search.site import SEARCH_SITE

    env = {"PATH": ":".join(str(d) for d in path_dirs)}
    proc = subprocess.run(["/bin/sh", "-c", SEARCH_SITE, "tao", *args], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    assert words[-1:] == ["site-checked"], words
    return words[:-1]


def test_the_site_check_finds_a_lock_that_is_not_exclusive_and_a_missing_python(tmp_path):
    import os
    import shutil

    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("dirname", "mktemp", "rm", "ln"):
        os.symlink(shutil.which(name), tools / name)
    base = tmp_path / "base"
    base.mkdir()
    assert _site(tmp_path, [tools], str(base / "not" / "yet"), "lock", "-") == []  # the nearest existing folder
    assert _site(tmp_path, [tools], str(base), "lock", "python") == ["no-python"]  # no python3 on this PATH
    os.symlink(sys.executable, tools / "python3")
    assert _site(tmp_path, [tools], str(base), "lock", "python") == []
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "ln").write_text("#!/bin/sh\nexit 0\n")  # a filesystem where a second link "succeeds"
    (fake / "ln").chmod(0o755)
    assert _site(tmp_path, [fake, tools], str(base), "lock", "-") == ["no-lock", str(base)]
    assert _site(tmp_path, [fake, tools], str(base), "-", "-") == []  # a database study needs no journal lock
    assert list(base.iterdir()) == []  # the check leaves nothing behind
    full = tmp_path / "full"
    full.mkdir()
    (full / "mktemp").write_text("#!/bin/sh\nexit 1\n")  # a base no folder can be made in (read-only, full)
    (full / "mktemp").chmod(0o755)
    for lock in ("lock", "-"):  # refused for a database study too: TAO writes its results there
        assert _site(tmp_path, [full, tools], str(base), lock, "-") == ["no-write", str(base)]


def test_continue_of_a_search_trial_the_study_gave_no_values_is_one_line(state_dir):
    """A PRUNED trial continues with its study's values (the SLURM e2e shows it); one that never asked has none."""
    from taobank.core import jobfiles
    from taobank.campaign import lineage
    from taobank import records

    rec = records.open_record("slurm", "none", "dino", "train", "A", "/lustre/results", sweep=("dino-sweep-1", 0, {}),
                              backend={"search": "tpe", "search_kpi": "val_loss"})
    jobfiles.save_spec(rec["id"], {"network_arch": "dino", "action": "train", "command": ["true"]}, {})
    records.mark(rec["id"], "PRUNED", message="PRUNED at epoch 1: val_loss 1.4, worse than the rung's cut 0.6")
    with pytest.raises(TaoError, match="trial of search dino-sweep-1 whose study holds no values") as err:
        lineage.continue_job("slurm", rec["id"])
    assert "\n" not in str(err.value)


def test_the_mcp_submit_tools_take_the_search_arguments_from_the_helpers_own_parser():
    from taobank.mcp import tools

    for name in ("submit_slurm", "submit_docker", "submit_kubernetes"):
        spec = tools.by_name(name)
        props = tools.input_schema(spec)["properties"]
        assert {k: props[k]["type"] for k in ("search", "trials", "kpi", "space", "prune")} == {
            "search": "string", "trials": "integer", "kpi": "string", "space": "array", "prune": "string"}
    argv = tools.to_argv(tools.by_name("submit_slurm"), {"spec": "j.yaml", "search": "tpe", "trials": 3, "kpi": "val_loss",
                                                         "space": [LR]})
    assert argv[-4:] == ["--search=tpe", "--trials=3", "--kpi=val_loss", f"--space={LR}"]


def test_a_trial_runs_from_the_bundle_alone(tmp_path):
    """The bundle as a trial runs it: ``python3 -I search.pyz`` (no PYTHONPATH, no user site: only the bundle and
    the interpreter's own numpy), a whole trial on the stand-in, told to the journal beside the settings."""
    pyz = tmp_path / "search" / "search.pyz"
    path = _study(tmp_path, pruner="none")
    pyz.write_bytes(bundle.build.__wrapped__("tpe"))
    results = tmp_path / "r0"
    results.mkdir()
    proc = subprocess.run([sys.executable, "-I", str(pyz), "--settings", str(path), "--trial", "0", "--",
                           "sh", str(TRAINER), "--results", str(results), "--epochs", "2", "-e", "x",
                           "fake.lr_optimum=0.001"], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "RESULTS_DIR": str(results), "TAO_API_JOB_ID": "job-0"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tao-search: trial 0 COMPLETE: best val_loss" in proc.stdout
    (t,) = journal.read((path.parent / "journal.log").read_text(), "sweep-t").trials
    assert t.state == "COMPLETE" and t.job_id == "job-0" and t.epochs == 2


def test_a_shell_text_command_gets_the_sampled_overrides_as_its_last_words():
    st = bundle.Staging(_settings())
    got = st.wrap(["sh", "-c", "dino train -e s.yaml"], "/s", 0)
    assert got[got.index("--") + 1:] == ["sh", "-c", 'dino train -e s.yaml "$@"', "tao-search"]
    passed = ["sh", "-c", 'exec sh t.sh "$@"', "tao", "-e", "s.yaml"]  # passes its words on: as it is
    assert st.wrap(passed, "/s", 0)[-6:] == passed
    with pytest.raises(UsageError, match='no "\\$@"'):
        st.wrap(["sh", "-c", "exec sh t.sh", "tao", "-e", "s.yaml"], "/s", 0)
    with pytest.raises(TaoError, match="several lines or with a comment"):
        st.wrap(["sh", "-c", "cd /x\ndino train"], "/s", 0)
    # what the runner appends reaches the command, through a real shell
    words = st.wrap(["sh", "-c", "echo got"], "/s", 0)
    out = subprocess.run(words[words.index("--") + 1:] + ["train.optim.lr=0.001"], capture_output=True, text=True)
    assert out.stdout.strip() == "got train.optim.lr=0.001"


def test_a_journal_that_fails_under_a_running_trial_stops_tao_and_fails_it_in_one_line(tmp_path, monkeypatch, capfd):
    """The journal is replaced by a folder while the trial runs: its next report cannot be written."""
    path = _study(tmp_path, pruner="none")
    results = tmp_path / "r0"
    results.mkdir()
    monkeypatch.setenv("TAO_API_JOB_ID", "job-0")
    started = []

    class Broken(trial.Tao):
        def __init__(self, argv):
            super().__init__(argv)
            started.append(self)
            (path.parent / "journal.log").unlink()  # the journal gone under the study, a folder in its place
            (path.parent / "journal.log").mkdir()

    rc = trial.run(path, 0, ["sh", str(TRAINER), "--results", str(results), "--epochs", "3", "--sleep", "1", "-e",
                             "x", "fake.lr_optimum=0.001"], results=results, start=Broken)
    out = [ln for ln in capfd.readouterr().out.splitlines() if ln.startswith("tao-search:")]
    assert rc == trial.EXIT_STUDY and started and started[0].poll() is not None
    assert "failed under this trial" in out[-1] and str(path.parent / "journal.log") in out[-1], out
