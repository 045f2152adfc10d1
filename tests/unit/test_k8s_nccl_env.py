"""TAO_K8S_NCCL_ENV: per-cluster NCCL settings reach the pods; flags win; a bad line is one clear error."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

BANK = Path(__file__).resolve().parents[2]
RENDER = BANK / "scripts" / "render_k8s_job.py"
ARGS = ["--image", "busybox", "--command", "true", "--gpus", "1", "--nodes", "2", "--job-id", "dino-train-0a1b2c3d", "--no-results"]


def render(tmp_path: Path, text: str, *extra: str) -> subprocess.CompletedProcess:
    f = tmp_path / "nccl.env"
    f.write_text(text)
    env = {**os.environ, "TAO_K8S_NCCL_ENV": str(f)}
    return subprocess.run([sys.executable, str(RENDER), *ARGS, *extra], capture_output=True, text=True,
                          env=env, timeout=60)


def job_env(stdout: str) -> dict[str, str]:
    job = next(o for o in yaml.safe_load_all(stdout) if o and o["kind"] == "Job")
    return {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_file_values_reach_the_pod_and_flags_win(tmp_path):
    proc = render(tmp_path, "# cluster A\nNCCL_SOCKET_IFNAME=eth0\nexport NCCL_IB_HCA=mlx5\n",
                  "--nccl-env", "NCCL_SOCKET_IFNAME=ib0")
    assert proc.returncode == 0, proc.stderr
    env = job_env(proc.stdout)
    assert env["NCCL_SOCKET_IFNAME"] == "ib0" and env["NCCL_IB_HCA"] == "mlx5"


def test_line_without_value_is_one_line_error_naming_file_and_line(tmp_path):
    proc = render(tmp_path, "NCCL_SOCKET_IFNAME=eth0\nNCCL_IB_HCA\n")
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "TAO_K8S_NCCL_ENV" in lines[0] and "line 2" in lines[0], proc.stderr


def test_missing_file_is_one_line_error(tmp_path):
    env = {**os.environ, "TAO_K8S_NCCL_ENV": str(tmp_path / "nope.env")}
    proc = subprocess.run([sys.executable, str(RENDER), *ARGS], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1 and "TAO_K8S_NCCL_ENV" in proc.stderr
