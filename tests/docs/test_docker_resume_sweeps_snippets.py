"""skills/tao-run-on-docker/references/resume-and-sweeps.md: its verb blocks (``<!-- test: NAME -->``) run as
written against the local Docker engine, with the stand-in trainer testclusters/fake_tao_train.sh as the job."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools.skill_lint import BANK_LINE

BANK = Path(__file__).resolve().parents[2]
DOC = BANK / "skills" / "tao-run-on-docker" / "references" / "resume-and-sweeps.md"
_BLOCK = re.compile(r"<!-- test: (?P<name>[a-z-]+) -->\n```bash\n(?P<body>.*?)```", re.S)
TRAIN = 'exec sh /fake/fake_tao_train.sh --results "$RESULTS_DIR" --epochs "$EPOCHS" --sleep 1 "$@"'


def blocks() -> dict[str, str]:
    return {m["name"]: m["body"] for m in _BLOCK.finditer(DOC.read_text(encoding="utf-8"))}


def test_every_verb_of_the_reference_has_a_tested_block():
    assert set(blocks()) == {"stand-in", "continue", "parent", "sweep", "preview-sweep", "cancel-sweep"}


@pytest.fixture()
def bank(docker_cluster, tmp_path):
    """(run a block, run a helper) in one private state and results folder; job.yaml is the fake training."""
    env = {**os.environ, **docker_cluster, "TAO_SKILL_BANK_PATH": str(BANK), "TAO_STATE_DIR": str(tmp_path / "state"),
           "TAO_DOCKER_RESULTS_DIR": str(tmp_path / "results")}
    (tmp_path / "results").mkdir()

    def spec(name: str, epochs: int, **extra) -> None:
        (tmp_path / name).write_text(json.dumps({
            "image": docker_cluster["TAO_LOCAL_DOCKER_IMAGE"], "network_arch": "dino", "action": "train", "gpus": 0,
            "stop_grace_seconds": 2, "env": {"EPOCHS": str(epochs)},
            "mounts": [{"host": str(BANK / "testclusters"), "container": "/fake"}],
            "command": ["sh", "-c", TRAIN, "tao"], **extra}))  # JSON is YAML

    def block(name: str, edit: tuple[str, str] = ("", ""), **extra: str) -> subprocess.CompletedProcess:
        body = blocks()[name].replace(*edit) if edit[0] else blocks()[name]
        return subprocess.run(["bash", "-c", f"{BANK_LINE}\n{body}"], env={**env, **extra}, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    def helper(script: str, *args: str) -> str:
        res = subprocess.run([sys.executable, str(BANK / "scripts" / script), *args], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, (args, res.stdout, res.stderr)
        return res.stdout

    return spec, block, helper, tmp_path


def _wait_for(path: Path, timeout: float = 60) -> None:
    end = time.time() + timeout
    while not path.exists():
        assert time.time() < end, f"{path} never appeared"
        time.sleep(0.3)


def test_stand_in_block_trains_as_tao_does(bank, docker_cluster):
    """The documented stand-in training, as written, with the local engine's busybox (it has no registry)."""
    spec, block, helper, tmp = bank
    line = next(ln for ln in blocks()["stand-in"].splitlines() if ln.startswith("IMAGE="))
    res = block("stand-in", (line, f"IMAGE={docker_cluster['TAO_LOCAL_DOCKER_IMAGE']}"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert " COMPLETE" in res.stdout and "epoch 5/5" in res.stdout, res.stdout
    assert "best val_loss (min, from the KPI's name) = 0.4 at epoch 3: train/model_epoch_003_step_00040.pth" in res.stdout, res.stdout


def test_continue_block_resumes_a_canceled_training(bank):
    spec, block, helper, tmp = bank
    spec("job.yaml", 4)
    jid = helper("tao_docker.py", "submit", "--spec", "job.yaml", "--quiet").strip()
    _wait_for(tmp / "results" / jid / "train" / "model_epoch_000_step_00010.pth")
    helper("tao_docker.py", "cancel", jid)
    res = block("continue", JOB_ID=jid)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("docker run --detach") and "train.resume_training_checkpoint_path=" in res.stdout
    assert " COMPLETE" in res.stdout, res.stdout
    (new,) = [r for r in json.loads(helper("tao_jobs.py", "list", "--json")) if r.get("continues") == jid]
    assert "resumed from checkpoint" in helper("tao_docker.py", "logs", new["id"])


def test_parent_block_evaluates_the_best_checkpoint(bank):
    spec, block, helper, tmp = bank
    spec("job.yaml", 3)
    jid = helper("tao_docker.py", "submit", "--spec", "job.yaml", "--quiet").strip()
    helper("tao_docker.py", "status", "--watch", "--interval", "0.5", jid)
    spec("eval.yaml", 0, action="evaluate", command=["sh", "-c", 'cat "$1"', "tao", "{parent.checkpoint}"])
    res = block("parent", JOB_ID=jid)
    assert res.returncode == 0 and " COMPLETE" in res.stdout, res.stdout + res.stderr
    (child,) = [r for r in json.loads(helper("tao_jobs.py", "list", "--json")) if r.get("parent") == jid]
    assert "fake checkpoint of epoch 1 step 20" in helper("tao_docker.py", "logs", child["id"])  # lowest val_loss


def test_sweep_block_runs_every_trial_and_names_the_best(bank):
    spec, block, helper, tmp = bank
    spec("job.yaml", 2)
    res = block("sweep")
    assert res.returncode == 0, res.stdout + res.stderr
    table = res.stdout[res.stdout.index("TRIAL  ID"):]  # after the watch lines (stdout too: issue 37)
    assert table.count(" COMPLETE ") == 4 and "val_loss=0.4" in table, res.stdout
    assert "best val_loss (min)" in res.stdout and "checkpoint train/model_epoch_001_step_00020.pth" in res.stdout


def test_preview_sweep_block_engages_no_engine_and_shows_the_containers_the_submit_makes(bank, docker_cluster):
    import shlex

    spec, block, helper, tmp = bank
    spec("job.yaml", 1)
    res = block("preview-sweep", TAO_CALL_LOG=str(tmp / "calls.jsonl"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert not (tmp / "calls.jsonl").exists() and not list((tmp / "state").glob("*.json"))  # no engine call, no record
    assert not list((tmp / "results").iterdir())
    lines = res.stdout.splitlines()
    assert lines[0].startswith("dry run: nothing was contacted"), res.stdout  # it says what it did not check
    assert lines[3].split()[:3] == ["0", "preview-trial-0", "train.optim.lr=0.001"], res.stdout
    assert "docker start preview-trial-0" in lines
    creates = [shlex.split(ln) for ln in lines if ln.startswith("docker create ")]
    assert len(creates) == 2 and creates[1][-1] == "train.optim.lr=0.0001"
    flags = blocks()["preview-sweep"].split("submit ", 1)[1].replace("\\\n", " ").replace("--dry-run", "--json")
    done = json.loads(helper("tao_docker.py", "submit", *shlex.split(flags)))
    made = json.loads(subprocess.run(["docker", "container", "inspect", *[j["id"] for j in done["jobs"]]],
                                     capture_output=True, text=True, check=True, env={**os.environ, **docker_cluster},
                                     timeout=60).stdout)
    helper("tao_docker.py", "cancel", "--sweep", done["sweep"])
    for argv, container in zip(creates, made):  # the command each container runs is the one previewed
        image = argv.index(container["Config"]["Image"])
        assert container["Config"]["Cmd"] == argv[image + 1:]
        assert container["Config"]["Labels"]["org.tao-skill-bank.sweep"] == done["sweep"]


def test_cancel_sweep_block_cancels_every_trial(bank):
    spec, block, helper, tmp = bank
    spec("job.yaml", 60)
    sid = helper("tao_docker.py", "submit", "--spec", "job.yaml", "--sweep", "train.optim.lr=0.1,0.2,0.3",
                 "--max-concurrent", "2", "--quiet").strip()
    res = block("cancel-sweep", SWEEP_ID=sid)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count(" CANCELED") == 3, res.stdout
