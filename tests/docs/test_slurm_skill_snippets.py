"""The tao-run-on-slurm SKILL.md verb snippets, executed as written against
the local SLURM cluster (blocks marked ``<!-- test: NAME -->``), in the order
an agent would run them in one shell session."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[2]
SKILL = BANK / "skills" / "tao-run-on-slurm" / "SKILL.md"
_BLOCK = re.compile(r"<!-- test: (?P<name>[a-z-]+) -->\n```bash\n(?P<body>.*?)```", re.S)


def blocks() -> dict[str, str]:
    return {m["name"]: m["body"] for m in _BLOCK.finditer(SKILL.read_text(encoding="utf-8"))}


def test_every_verb_has_a_tested_block():
    assert {"preflight", "submit", "status", "logs", "cancel"} <= set(blocks())


@pytest.fixture()
def session(slurm_cluster, tmp_path):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(Path.home()),
           "TAO_SKILL_BANK_PATH": str(BANK), "TAO_STATE_DIR": str(tmp_path / "state")}
    import os
    env["PATH"] = os.environ.get("PATH", env["PATH"])
    env.update(slurm_cluster)

    def run(names: list[str], spec: dict | None = None) -> subprocess.CompletedProcess:
        script = "\n".join(blocks()[n] for n in names)
        e = dict(env)
        if spec is not None:
            path = tmp_path / "job.json"
            path.write_text(json.dumps(spec))
            e["SPEC"] = str(path)
        return subprocess.run(["bash", "-c", script], env=e, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    return run


SPEC = {"network_arch": "dino", "action": "train", "num_gpus": 1, "cpus_per_task": 1, "time_hours": 0.5}


def test_preflight_block(session):
    res = session(["preflight"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "OK ssh:" in res.stdout and "OK partitions: local" in res.stdout


def test_submit_watch_logs_blocks(session):
    spec = dict(SPEC, command=["bash", "-c", "echo from-the-skill-snippet; echo on-stderr >&2"])
    res = session(["submit", "status", "logs"], spec)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "submitted dino-train-" in res.stdout
    assert "COMPLETE" in res.stdout
    assert "from-the-skill-snippet" in res.stdout and "on-stderr" in res.stdout
    assert "main.err" in res.stdout


def test_submit_cancel_blocks(session):
    spec = dict(SPEC, command=["sleep", "300"])
    res = session(["submit", "cancel"], spec)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "CANCELED" in res.stdout


def test_failed_submit_block_prints_one_line_and_stops(session):
    """A refused submit must reach the user as the helper's one line, not a JSON traceback,
    and the snippets after it must not run with an empty JOB_ID."""
    spec = dict(SPEC, command=["true"], dataset={"root": "/home/me/data"})
    res = session(["submit", "status"], spec)
    assert res.returncode == 1 and res.stdout == "", res.stdout
    assert res.stderr.startswith("error: dataset '/home/me/data' is a local path") and res.stderr.count("\n") == 1, res.stderr
