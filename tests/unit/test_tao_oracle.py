"""Replays of what TAO's own code writes (tests/support/tao_oracle.py: nvidia-tao-core's StatusLogger, Lightning's
ModelCheckpoint at TAO's settings) through the bank's readers: the epoch a KPI belongs to, the best checkpoint,
how a run ended, and the verdict each platform's observation leads to."""
from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import pytest

from tests.support import tao_oracle as oracle
from taobank import records
from taobank.core import track, training
from taobank.contract import Observation, ResultsLocation, TaoEnd
from taobank.platforms.docker import observe as docker_observe
from taobank.platforms.docker import results_access as docker_results
from taobank.platforms.kubernetes import logs as k8s_logs
from taobank.platforms.kubernetes import render as k8s_render
from taobank.progress import best, parse, progress, series
from taobank.records import Record
from taobank.campaign.results_verbs import find_best
from taobank.platforms.slurm import status as slurm_status
from taobank.states import State

JOB = "dino-train-0001"
#: monitor_status's FAILURE line for an interrupt (TAO's entrypoint then exits 0)
INTERRUPTED = "DINO train was interrupted: stopped in epoch 5"


def _trained(tmp_path: Path, **scenario) -> oracle.Run:
    return oracle.train(tmp_path / JOB, oracle.Scenario(**scenario))


def _record(folder: Path, platform: str = "docker") -> Record:
    return Record.of({"id": JOB, "platform": platform, "state": "RUNNING", "action": "train", "image": "none",
                      "network_arch": "dino", "results_dir": str(folder), "transitions": [], "attempt": 1,
                      "created_at": "", "updated_at": "", "backend": {"results_dir": str(folder)}})


# ------------------------------------------------------------------ what TAO's logger writes
def test_taos_logger_writes_the_lines_the_bank_reads(tmp_path):
    run = _trained(tmp_path)
    lines = oracle.lines(run)
    assert [x["message"] for x in lines[:5]] == ["Starting DINO train", "Starting Training Loop.",
                                                 "Eval metrics generated.", "Training loop in progress",
                                                 "Train metrics generated."]
    assert lines[2]["kpi"] == {"val_mAP": "0.1", "val_loss": 0.9}  # val_mAP as text, as DINO writes it
    assert lines[3]["epoch"] == 0 and lines[3]["max_epoch"] == 7 and lines[3]["kpi"] == lines[2]["kpi"]
    # nvidia-tao-core's monitor_status says how the action ended: a RUNNING line, no SUCCESS word
    assert lines[-1]["message"] == "DINO train completed successfully" and lines[-1]["status"] == "RUNNING"
    assert run.exit_code == 0 and progress(parse(run.status_text)).status == "SUCCESS"
    # Lightning's names at TAO's settings, and its relative last-link
    assert run.checkpoints[4] == "model_epoch_004_step_00050.pth"
    assert os.readlink(run.folder / "dino_model_latest.pth") == "model_epoch_007_step_00080.pth"


# ------------------------------------------------------------------ a validation that diverges after the best epoch
def test_a_nan_validation_after_the_best_epoch_leaves_the_best_where_it_was(tmp_path):
    run = _trained(tmp_path)
    assert '"val_mAP": "nan"' in run.status_text  # str(float("nan")): a new NaN object on every line read
    rows = series(parse(run.status_text))
    assert [r["epoch"] for r in rows] == list(range(8))
    assert [r["val_mAP"] for r in rows[:5]] == [0.1, 0.2, 0.3, 0.45, 0.5]
    assert all(math.isnan(r["val_mAP"]) and math.isnan(r["val_loss"]) for r in rows[5:])
    assert best(rows, "val_mAP", "max")["epoch"] == 4
    assert best(rows, "val_loss", "min")["epoch"] == 4


@pytest.mark.parametrize("kpi,mode", [("val_mAP", "max"), ("val_loss", "min")])
def test_artifacts_pick_the_best_epochs_checkpoint_from_the_listing(tmp_path, kpi, mode):
    run = _trained(tmp_path)
    folder = run.folder.parent
    listing = docker_results.list_results(_record(folder), ResultsLocation(str(folder), True), status=True)
    found = find_best(listing, kpi, mode, "train")
    assert (found.at, found.value) == (4, 0.5)
    assert found.checkpoints[0] == "train/model_epoch_004_step_00050.pth"


# ------------------------------------------------------------------ a crash mid-epoch, then a resume
def test_a_crash_then_a_resume_reads_as_one_training(tmp_path):
    crashed = _trained(tmp_path, stop_at=(3, oracle.Crashed))
    assert crashed.exit_code == 1 and progress(parse(crashed.status_text)).status == "FAILURE"
    assert os.readlink(crashed.folder / "dino_model_latest.pth") == "model_epoch_002_step_00030.pth"
    resumed = _trained(tmp_path, resume_after=2)
    log = parse(resumed.status_text)
    assert len(log.runs) == 2 and progress(log).status == "SUCCESS"
    rows = series(log)
    assert [r["epoch"] for r in rows] == list(range(8)) and best(rows, "val_mAP", "max")["epoch"] == 4
    assert os.readlink(resumed.folder / "dino_model_latest.pth") == "model_epoch_007_step_00080.pth"


# ------------------------------------------------------------------ other actions write to their own folders
@pytest.mark.parametrize("action", ["evaluate", "export", "inference"])
def test_each_action_writes_its_own_folder_and_ends_in_success(tmp_path, action):
    _trained(tmp_path)
    run = oracle.action(tmp_path / JOB, action, {"mAP": "0.5"} if action == "evaluate" else None)
    files = {"train/status.json": (tmp_path / JOB / "train" / "status.json").read_text(),
             f"{action}/status.json": run.status_text}
    assert training.chosen_log(files, action)[0] == f"{action}/status.json"
    assert training.tao_end(files, action) == TaoEnd("SUCCESS", f"DINO {action} completed successfully")


# ------------------------------------------------------------------ an interrupt: FAILURE, exit code 0
def _interrupted(tmp_path: Path) -> oracle.Run:
    run = _trained(tmp_path, stop_at=(5, oracle.Interrupted))
    assert run.exit_code == 0 and oracle.lines(run)[-1]["status"] == "FAILURE"
    return run


def _status_files(folder: Path) -> dict[str, str]:
    return {"train/status.json": (folder / "train" / "status.json").read_text()}


def _is_taos_failure(obs: Observation) -> None:
    assert obs.state == State.ERROR and obs.err_class == "ERR_PROGRAM", obs
    assert "FAILURE" in obs.message and "DINO train was interrupted" in obs.message, obs.message


def test_docker_a_clean_exit_after_taos_failure_is_an_error(tmp_path):
    folder = _interrupted(tmp_path).folder.parent
    obs = docker_observe.said(_record(folder), docker_observe.classify({"Status": "exited", "ExitCode": 0}))
    assert obs.state == State.COMPLETE and obs.tao_end == TaoEnd("FAILURE", INTERRUPTED)
    _is_taos_failure(track.tao_last_word(obs))
    assert "exit code 0" in obs.message


def test_slurm_a_completed_job_after_taos_failure_is_an_error(tmp_path):
    folder = _interrupted(tmp_path).folder.parent
    end = training.tao_end(_status_files(folder), "train")
    obs = slurm_status.classify(None, {"state": "COMPLETED", "exit_code": "0:0"}, None, tao=end)
    _is_taos_failure(track.tao_last_word(obs))


def test_kubernetes_a_completed_pod_after_taos_failure_is_an_error(tmp_path):
    """The pod prints its status files' last lines as it ends (render.FINAL_STATUS_SH, run here for real); the
    observation reads them back from its log."""
    folder = _interrupted(tmp_path).folder.parent
    printed = subprocess.run(["sh", "-c", k8s_render.FINAL_STATUS_SH], capture_output=True, text=True, check=True,
                             env={"PATH": "/usr/bin:/bin", "TAO_API_RESULTS_DIR": str(folder.parent),
                                  "TAO_API_JOB_ID": JOB}).stdout
    obs = Observation(State.COMPLETE, "Job complete", exit_code=0,
                      tao_end=training.tao_end(k8s_logs.final_lines("some output\n" + printed) or {}, "train"))
    _is_taos_failure(track.tao_last_word(obs))


def test_the_core_marks_the_record_error_whatever_the_platform_said(tmp_path, state_dir):
    """The rule is the core's: an adapter that says COMPLETE with TAO's FAILURE leaves an ERROR record."""
    folder = _interrupted(tmp_path).folder.parent
    job = records.open_record("docker", "none", "dino", "train", "A", str(folder), check_folder=False)["id"]
    records.mark(job, State.RUNNING, source="poller")

    class Adapter:
        name = "docker"

        def observe(self, recs, *, context):
            obs = Observation(State.COMPLETE, "exit code 0", exit_code=0, job_id=job,
                              tao_end=training.tao_end(_status_files(folder), "train"))
            return [obs]

        def view(self, rec):
            from taobank.core.platform import JobView

            return JobView.from_record(rec)

        def views(self, recs):  # Platform.views: the views of a status's batch
            return [self.view(r) for r in recs]

        def ended(self, recs, context, *, carried_on=frozenset()):
            return {}

        def max_retries(self):
            return 0

    view = track.refresh(Adapter(), [records.get(job)])[0]
    assert records.get(job).state == State.ERROR and view.state == State.ERROR
    assert INTERRUPTED in (records.get(job).message or "")


def test_a_success_and_an_exit_code_are_left_alone(tmp_path):
    folder = _trained(tmp_path).folder.parent
    obs = Observation(State.COMPLETE, "exit code 0", exit_code=0,
                      tao_end=training.tao_end(_status_files(folder), "train"))
    assert track.tao_last_word(obs).state == State.COMPLETE and obs.message == "exit code 0"
    assert track.tao_last_word(Observation(State.ERROR, "exit code 1", exit_code=1)).message == "exit code 1"


# ------------------------------------------------------------------ the in-cluster stand-in replays TAO's lines
TRAINER = Path(__file__).resolve().parents[2] / "testclusters" / "fake_tao_train.sh"


def _replayed(tmp_path: Path, run: oracle.Run, shell: list[str]) -> tuple[int, Path]:
    replay = oracle.write_replay(run, tmp_path / "replay" / "train.replay")
    out = tmp_path / "cluster"
    done = subprocess.run([*shell, str(TRAINER), "--results", str(out), "--replay", str(replay)],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    return done.returncode, out / "train"


SHELLS = [["sh"]] + ([["busybox", "sh"]] if subprocess.run(["sh", "-c", "command -v busybox"],
                                                           capture_output=True).returncode == 0 else [])


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
@pytest.mark.parametrize("scenario", ["nan", "interrupt", "crash"])
def test_the_stand_in_replays_exactly_what_taos_code_wrote(tmp_path, shell, scenario):
    stop = {"interrupt": (5, oracle.Interrupted), "crash": (3, oracle.Crashed)}.get(scenario)
    run = _trained(tmp_path, stop_at=stop)
    code, folder = _replayed(tmp_path, run, shell)
    assert code == run.exit_code
    assert (folder / "status.json").read_text() == run.status_text
    assert sorted(p.name for p in folder.glob("model_*.pth")) == run.checkpoints
    assert os.readlink(folder / "dino_model_latest.pth") == os.readlink(run.folder / "dino_model_latest.pth")


def test_a_replayed_resume_appends_only_its_own_run(tmp_path):
    _trained(tmp_path, stop_at=(3, oracle.Crashed))
    resumed = _trained(tmp_path, resume_after=2)
    replay = oracle.write_replay(resumed, tmp_path / "resume.replay").read_text()
    assert replay.count("Starting DINO train") == 1 and "Resuming training from checkpoint" in replay
    assert replay.count("#checkpoint ") == 5 and replay.endswith("#exit 0\n")


def test_the_torch_stand_in_does_not_outlive_loading_lightning(tmp_path):
    """Other tests' libraries look for an imported torch (hypothesis seeds its RNG): none is left behind."""
    import sys

    _trained(tmp_path)
    assert not [n for n in sys.modules if n.split(".")[0] in ("torch", "torchmetrics")]


def test_docker_cancel_of_a_job_that_ended_with_taos_failure_says_error(tmp_path):
    """A cancel that finds the container already ended reports it as status would: TAO's FAILURE with exit 0 is
    an error, not COMPLETE."""
    from taobank.platforms.docker import cancel as docker_cancel

    folder = _interrupted(tmp_path).folder.parent
    stop = docker_cancel._ended(_record(folder), docker_observe.classify({"Status": "exited", "ExitCode": 0}))
    assert stop.outcome == "ended" and stop.state == State.ERROR and "FAILURE" in stop.message, stop
