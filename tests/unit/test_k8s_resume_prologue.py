"""A pod the Job controller replaces after a disruption resumes from the newest checkpoint on the job's volume:
the prologue is in the pod's command exactly when it can work (an argv train job, one pod, tier A), and the
command it runs is the user's argv with TAO's resume override (run here under busybox-compatible sh)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from taobank.platforms.kubernetes.render import find, render_manifests

KEY = "train.resume_training_checkpoint_path"
BASE = {"image": "busybox", "action": "train", "gpus": 1, "mounts": [{"pvc": "c", "mount_path": "/results"}]}


def command(spec: dict) -> list[str]:
    job = find(render_manifests(spec, job_id="dino-train-1a2b3c4d", namespace="ns"), "Job")
    return job["spec"]["template"]["spec"]["containers"][0]["command"]


@pytest.mark.parametrize("change", [{"action": "evaluate"}, {"args": None, "command": "train.sh"}, {"nodes": 2},
                                   {"no_results": True, "mounts": []}])
def test_no_prologue_where_a_resume_cannot_work(change):
    spec = {**BASE, "args": ["sh", "t.sh"], **change}
    spec = {k: v for k, v in spec.items() if v is not None}
    assert not any("tao_latest_checkpoint" in part for part in command(spec))


@pytest.mark.parametrize("log_copy", [True, False])
def test_the_replaced_pod_runs_the_argv_with_the_newest_checkpoint(tmp_path: Path, log_copy):
    argv = command({**BASE, "args": ["echo", "ARGV", f"{KEY}=/old.pth", "$(NOT_EXPANDED_HERE)"], "log_copy": log_copy})
    assert argv[:2] == ["/bin/sh", "-c"] and argv[3] == "tao-main"
    script = argv[2].replace("$$", "$")  # what the kubelet hands the shell
    job = tmp_path / "dino-train-1a2b3c4d"
    env = {"PATH": "/usr/bin:/bin", "TAO_API_RESULTS_DIR": str(tmp_path), "TAO_API_JOB_ID": job.name,
           "HOSTNAME": "pod-0"}
    first = subprocess.run(["sh", "-c", script, *argv[3:]], capture_output=True, text=True, env=env)
    assert f"ARGV {KEY}=/old.pth $(NOT_EXPANDED_HERE)" in first.stdout  # nothing yet: the argv as given
    (job / "train").mkdir(parents=True, exist_ok=True)
    (job / "train" / "model_epoch_004.pth").write_text("x")
    again = subprocess.run(["sh", "-c", script, *argv[3:]], capture_output=True, text=True, env=env)
    assert f"ARGV $(NOT_EXPANDED_HERE) {KEY}={job}/train/model_epoch_004.pth" in again.stdout
    assert f"tao: resuming from checkpoint {job}/train/model_epoch_004.pth" in again.stdout
