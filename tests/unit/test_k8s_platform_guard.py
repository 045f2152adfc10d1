"""tao_k8s.py status/logs/cancel refuse a record of another platform (cancel marked a SLURM job CANCELED)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[2]


def sh(script: str, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BANK / "scripts" / script), *args], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.mark.parametrize("verb", ["status", "logs", "cancel"])
def test_slurm_record_is_refused_and_left_alone(tmp_path, verb):
    calls = tmp_path / "calls.jsonl"
    env = {**os.environ, "TAO_STATE_DIR": str(tmp_path / "state"), "TAO_CALL_LOG": str(calls),
           "KUBECONFIG": str(tmp_path / "none")}
    jid = sh("tao_job_record.py", "open", "--platform", "slurm", "--image", "img", "--network-arch", "dino",
             "--action", "train", "--storage-tier", "A", "--results-dir", "/results", env=env).stdout.strip()
    sh("tao_job_record.py", "mark", jid, "--state", "RUNNING", "--backend-ref", "12345", env=env)
    before = json.loads(sh("tao_job_record.py", "show", jid, "--json", env=env).stdout)
    assert before["state"] == "RUNNING"
    proc = sh("tao_k8s.py", verb, jid, env=env)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr + proc.stdout
    assert "slurm" in proc.stderr
    after = json.loads(sh("tao_job_record.py", "show", jid, "--json", env=env).stdout)
    assert after["state"] == "RUNNING" and after["transitions"] == before["transitions"]
    assert not calls.exists() or not any(json.loads(ln)[0] == "kubectl" for ln in calls.read_text().splitlines())
