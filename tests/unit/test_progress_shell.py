"""The shell side of training progress, run for real with /bin/sh (and busybox sh where installed):
the one-command status reader of taobank.progress.remote, pick(), and the stand-in trainer
testclusters/fake_tao_train.sh whose output the parser must read."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from taobank.errors import TaoError
from taobank.progress import READ_STATUS_SH, best, parse, pick, progress, read_argv, series, split_files
from taobank.progress import remote
from taobank.progress.statusfile import stamp_key

TRAINER = Path(__file__).resolve().parents[2] / "testclusters" / "fake_tao_train.sh"
SHELLS = [pytest.param(["/bin/sh"], id="sh"),
          pytest.param(["busybox", "sh"], id="busybox",
                       marks=pytest.mark.skipif(not shutil.which("busybox"), reason="busybox is not installed"))]


def run_sh(shell: list[str], *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(shell + list(argv), capture_output=True, text=True, timeout=60, env=env)


def read_remote(shell: list[str], results: str) -> dict[str, str]:
    res = run_sh(shell, *read_argv(results)[1:])
    assert res.returncode == 0 and res.stderr == ""
    return split_files(res.stdout)


# ---------------------------------------------------------------- the reader
@pytest.mark.parametrize("shell", SHELLS)
def test_the_reader_prints_the_top_and_every_action_status_file(shell, tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "odd name $(touch pwned)").mkdir()
    (tmp_path / "line\nbreak").mkdir()
    (tmp_path / "no_status").mkdir()
    (tmp_path / "status.json").write_text('{"a": 1}\n{"b": 2')  # torn last line, no newline
    (tmp_path / "train" / "status.json").write_text('{"c": 3}\n#status-file 9 evil/status.json\n|{"x": 1}\n')
    (tmp_path / "odd name $(touch pwned)" / "status.json").write_text("")
    (tmp_path / "line\nbreak" / "status.json").write_text("{}\n")
    files = read_remote(shell, str(tmp_path))
    assert files == {"status.json": '{"a": 1}\n{"b": 2\n',
                     "train/status.json": '{"c": 3}\n#status-file 9 evil/status.json\n|{"x": 1}\n',
                     "odd name $(touch pwned)/status.json": ""}
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_long_runs_whole_file_is_read_and_every_epoch_ranked(shell, tmp_path):
    """Per-step lines (a few hundred KB, as some networks write): every epoch is read, not only the file's end."""
    lines = []
    for e in range(10):
        lines += [json.dumps({"step": e * 100 + s, "status": "RUNNING", "kpi": {"loss": 1.0}, "message": "x" * 300})
                  for s in range(100)]
        lines.append(json.dumps({"epoch": e, "max_epoch": 9, "status": "RUNNING", "kpi": {"val_loss": 1 - e / 20}}))
    text = "".join(line + "\n" for line in lines)
    (tmp_path / "status.json").write_text(text)
    assert len(text) > 350_000
    got = read_remote(shell, str(tmp_path))["status.json"]
    log = parse(got)
    assert got == text and log.cut_size is None and [r["epoch"] for r in series(log)] == list(range(10))


@pytest.mark.parametrize("shell", SHELLS)
def test_a_runaway_file_is_read_from_its_end_and_says_so(shell, tmp_path, monkeypatch):
    line = json.dumps({"status": "RUNNING", "epoch": 1, "message": "x" * 200})
    count = remote.TAIL_BYTES // len(line) + 50
    with open(tmp_path / "status.json", "w") as f:
        f.write("".join(line + "\n" for _ in range(count - 1)) + json.dumps({"status": "RUNNING", "epoch": 2}) + "\n")
    size = (tmp_path / "status.json").stat().st_size
    text = read_remote(shell, str(tmp_path) + "/")["status.json"]
    log = parse(text)
    assert text.startswith(f"{remote.CUT}{size}\n") and len(text) <= remote.TAIL_BYTES + 64
    assert log.skipped == 0 and log.cut_size == size and progress(log).epoch == 2


@pytest.mark.parametrize("shell", SHELLS)
def test_a_missing_or_empty_folder_prints_nothing(shell, tmp_path):
    assert read_remote(shell, str(tmp_path)) == {}
    assert read_remote(shell, str(tmp_path / "missing")) == {}


def test_the_script_reads_as_many_bytes_and_files_as_the_parser_expects():
    assert f"tail -c {remote.TAIL_BYTES} " in READ_STATUS_SH
    assert f'[ "$n" -le {remote.MAX_FILES} ]' in READ_STATUS_SH
    assert f"'{remote.HEADER}%s %s\\n'" in READ_STATUS_SH


@pytest.mark.parametrize("bad", ["", "results", "s3://bucket/x", "/a\nb", None])
def test_the_reader_needs_an_absolute_folder(bad):
    with pytest.raises(TaoError, match="absolute folder on the cluster"):
        read_argv(bad)


def test_split_files_ignores_what_is_not_a_status_file():
    out = ("noise\n|orphan\n#status-file 3 ../status.json\n|a\n#status-file x status.json\n|b\n"
           "#status-file 2 a/b/status.json\n|c\n#status-file 4 status.json\n|{}\n\n|late\n")
    assert split_files(out) == {"status.json": "{}\n"}
    assert split_files(None) == {} and split_files("") == {}


# ---------------------------------------------------------------- pick
def _at(minute: int) -> str:
    return json.dumps({"date": "3/7/2025", "time": f"10:{minute}:0", "status": "RUNNING"}) + "\n"


def test_pick_prefers_the_action_then_the_top_then_the_newest():
    files = {"status.json": _at(1), "train/status.json": "", "evaluate/status.json": _at(9)}
    assert pick(files, "train") == "train/status.json"
    assert pick(files, "export") == "status.json"
    assert pick(files, None) == "status.json"
    del files["status.json"]
    assert pick(files, None) == "evaluate/status.json"
    assert pick({"b/status.json": _at(10), "a/status.json": _at(9), "c/status.json": "junk"}) == "b/status.json"
    assert pick({"b/status.json": "", "a/status.json": ""}) == "a/status.json"
    assert pick({}, "train") is None


# ---------------------------------------------------------------- the stand-in trainer
def test_the_trainer_is_shellcheck_clean_and_executable():
    assert os.access(TRAINER, os.X_OK)
    res = subprocess.run(["shellcheck", "-s", "sh", str(TRAINER)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_the_trainer_writes_what_the_parser_reads(shell, tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "status.json").write_text("left over from an earlier run\n")
    res = run_sh(shell, str(TRAINER), "--results", str(tmp_path), "--epochs", "5", "--epoch-time", "90000")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "Epoch 4: train_loss=0.166 val_loss=0.42"
    log = parse((tmp_path / "train" / "status.json").read_text())
    # 2 starts, 3 lines an epoch, the loop's end and TAO's success line
    assert (log.skipped, len(log.runs), len(log.events)) == (0, 1, 2 + 3 * 5 + 2)
    p = progress(log)
    assert (p.status, p.epoch, p.max_epoch, p.step, p.max_step) == ("SUCCESS", 4, 4, 50, 50)
    assert stamp_key(p.last_update) is not None  # the real clock, through date's own fields
    assert p.time_per_epoch == 90000 and p.kpis == {"val_mAP": 0.58, "val_loss": 0.42, "train_loss": 0.166}
    assert p.line() == "SUCCESS epoch 5/5 val_mAP=0.58 val_loss=0.42 train_loss=0.166"
    first = "\n".join((tmp_path / "train" / "status.json").read_text().splitlines()[:4])
    running = progress(parse(first))
    assert running.eta == 4 * 90000 and running.line() == "epoch 1/5 eta 100:00:00 val_mAP=0.42 val_loss=0.58"
    rows = series(log)
    assert [r["epoch"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["train_loss"] for r in rows] == sorted((r["train_loss"] for r in rows), reverse=True)
    assert best(rows, "val_loss")["epoch"] == 3 and best(rows, "train_loss")["epoch"] == 4
    names = sorted(p.name for p in (tmp_path / "train").glob("model_epoch_*.pth"))
    assert names == [f"model_epoch_00{i}_step_000{i + 1}0.pth" for i in range(5)]
    assert (tmp_path / "train" / "model_epoch_002_step_00030.pth").read_text() == "fake checkpoint of epoch 2 step 30\n"
    assert os.readlink(tmp_path / "train" / "dino_model_latest.pth") == "model_epoch_004_step_00050.pth"
    assert read_remote(shell, str(tmp_path))["train/status.json"] == (tmp_path / "train" / "status.json").read_text()


@pytest.mark.parametrize("shell", SHELLS)
def test_the_trainer_fails_at_the_epoch_asked(shell, tmp_path):
    res = run_sh(shell, str(TRAINER), "--results", str(tmp_path), "--epochs", "4", "--fail-at", "2")
    assert res.returncode == 1 and "failed at epoch 2" in res.stderr
    files = read_remote(shell, str(tmp_path))
    assert list(files) == ["train/status.json"] and pick(files, "train") == "train/status.json"
    p = progress(parse(files["train/status.json"]))
    assert (p.status, p.epoch) == ("FAILURE", 1) and p.message.endswith("simulated failure at epoch 2")
    assert sorted(p.name for p in tmp_path.glob("train/*.pth")) == [
        "dino_model_latest.pth", "model_epoch_000_step_00010.pth", "model_epoch_001_step_00020.pth"]


@pytest.mark.parametrize("shell", SHELLS)
def test_another_action_writes_its_own_folder(shell, tmp_path):
    res = run_sh(shell, str(TRAINER), "--results", str(tmp_path), "--action", "evaluate", "fake.best_val=300")
    assert res.returncode == 0, res.stderr
    files = read_remote(shell, str(tmp_path))
    assert list(files) == ["evaluate/status.json"] and pick(files, "evaluate") == "evaluate/status.json"
    p = progress(parse(files["evaluate/status.json"]))
    assert p.status == "SUCCESS" and p.kpis == {"val_mAP": 0.7, "val_loss": 0.3}
    assert not list(tmp_path.glob("evaluate/*.pth"))
    res = run_sh(shell, str(TRAINER), "--results", str(tmp_path), "--action", "export", "--interrupt-at", "0")
    assert res.returncode == 0  # TAO's entrypoint exits 0 after the interrupt it wrote FAILURE for
    assert progress(parse((tmp_path / "export" / "status.json").read_text())).status == "FAILURE"


@pytest.mark.parametrize("shell", SHELLS)
def test_the_trainer_writes_date_and_time_without_zero_padding(shell, tmp_path):
    env = {**os.environ, "FAKE_TAO_NOW": "03 07 2025 09 05 00"}
    res = run_sh(shell, str(TRAINER), "--results", str(tmp_path), "--epochs", "1", env=env)
    assert res.returncode == 0, res.stderr
    first = json.loads((tmp_path / "train" / "status.json").read_text().splitlines()[0])
    assert (first["date"], first["time"], first["status"]) == ("3/7/2025", "9:5:0", "STARTED")
    env["FAKE_TAO_NOW"] = "12 31 2025 23 59 10"
    run_sh(shell, str(TRAINER), "--results", str(tmp_path), "--epochs", "1", env=env)
    assert progress(parse((tmp_path / "train" / "status.json").read_text())).last_update == "12/31/2025 23:59:10"


@pytest.mark.parametrize("shell", SHELLS)
def test_the_trainer_resumes_after_the_checkpoints_epoch_and_from_the_latest_link(shell, tmp_path):
    assert run_sh(shell, str(TRAINER), "--results", str(tmp_path), "--epochs", "3", "--fail-at", "2").returncode == 1
    ckpt = tmp_path / "train" / "model_epoch_000_step_00010.pth"
    res = run_sh(shell, str(TRAINER), "--results", str(tmp_path), "--epochs", "3",
                 f"train.resume_training_checkpoint_path={ckpt}")
    assert res.returncode == 0 and f"at epoch 0" in res.stdout
    log = parse((tmp_path / "train" / "status.json").read_text())
    assert len(log.runs) == 2 and [r["epoch"] for r in series(log)] == [0, 1, 2]
    assert log.latest[1].message == f"Resuming training from checkpoint: {ckpt}"
    res = run_sh(shell, str(TRAINER), "--results", str(tmp_path), "--epochs", "4",
                 "train.resume_training_checkpoint_path=null")  # TAO: its own latest link
    assert res.returncode == 0 and "at epoch 2" in res.stdout
    assert [r["epoch"] for r in series(parse((tmp_path / "train" / "status.json").read_text()))] == [0, 1, 2, 3]


@pytest.mark.parametrize("argv", [[], ["--results"], ["--results", "/tmp/x"], ["--epochs", "2"],
                                  ["--results", "/tmp/x", "--epochs", "two"], ["--results", "/tmp/x", "--epochs", "0"],
                                  ["--results", "/tmp/x", "--epochs", "2", "--action", "a/b"],
                                  ["--results", "/tmp/x", "--epochs", "2", "--bogus", "1"]])
def test_the_trainer_refuses_bad_arguments(argv):
    res = run_sh(["/bin/sh"], str(TRAINER), *argv)
    assert res.returncode == 2 and res.stderr.strip() and not res.stdout
