"""The tao-run-on-slurm verb snippets (SKILL.md and its references), executed as written against
the local SLURM cluster (blocks marked ``<!-- test: NAME -->``), in the order
an agent would run them in one shell session."""
from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from devtools.skill_lint import BANK_LINE

BANK = Path(__file__).resolve().parents[2]
SKILL = BANK / "skills" / "tao-run-on-slurm" / "SKILL.md"
_BLOCK = re.compile(r"<!-- test: (?P<name>[a-z-]+) -->\n```(?P<lang>bash|yaml)\n(?P<body>.*?)```", re.S)


def blocks(lang: str = "bash") -> dict[str, str]:
    """Marked blocks of SKILL.md and its references (a block may move between them), by name."""
    out: dict[str, str] = {}
    for doc in [SKILL, *sorted((SKILL.parent / "references").glob("*.md"))]:
        for m in _BLOCK.finditer(doc.read_text(encoding="utf-8")):
            if m["lang"] == lang:
                assert m["name"] not in out, f"block {m['name']} is marked twice ({doc.name})"
                out[m["name"]] = m["body"]
    return out


def test_every_verb_has_a_tested_block():
    assert {"quick-path", "preflight", "submit", "submit-flags", "status", "list", "logs", "cancel", "stage"} <= set(blocks())


def test_quick_path_is_on_the_first_screen():
    """The quick path opens SKILL.md (first screen: 50 lines): the complete minimal job.yaml, then the verbs
    that submit that very file."""
    lines = SKILL.read_text(encoding="utf-8").splitlines()
    spec = next(n for n, ln in enumerate(lines, 1) if "<!-- test: spec -->" in ln)
    start = next(n for n, ln in enumerate(lines, 1) if "<!-- test: quick-path -->" in ln)
    body = blocks()["quick-path"]
    assert spec <= 25 and spec < start and start + len(body.splitlines()) <= 50, (spec, start)
    for verb in ("preflight", "submit --spec job.yaml", "status --watch", "logs", "cancel", 'tao_jobs.py" list'):
        assert verb in body, verb


def test_documented_spec_is_the_pinned_image_and_a_valid_spec():
    import yaml  # noqa: PLC0415

    from taobank import pins  # noqa: PLC0415
    from taobank import spec as specmod  # noqa: PLC0415

    spec = yaml.safe_load(blocks("yaml")["spec"])
    assert spec["image"] == pins.resolve("images.tao_toolkit.pyt")
    specmod.validate(spec, "slurm-job-spec.schema.json", "job spec")


@pytest.fixture()
def session(slurm_cluster, tmp_path):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(Path.home()),
           "TAO_SKILL_BANK_PATH": str(BANK), "TAO_STATE_DIR": str(tmp_path / "state")}
    import os
    env["PATH"] = os.environ.get("PATH", env["PATH"])
    env.update(slurm_cluster)

    def run(names: list[str], spec: dict | None = None, **extra: str) -> subprocess.CompletedProcess:
        script = "\n".join([BANK_LINE, *(blocks()[n] for n in names)])  # the bank line starts the session
        e = {**env, **extra}
        if spec is not None:
            path = tmp_path / "job.yaml"  # the quick path's literal file name; JSON is YAML
            path.write_text(json.dumps(spec))
            e["SPEC"] = str(path)
        return subprocess.run(["bash", "-c", script], env=e, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    return run


SPEC = {"network_arch": "dino", "action": "train", "num_gpus": 1, "cpus_per_task": 1, "time_hours": 0.5}


def test_preflight_block(session):
    res = session(["preflight"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "OK: ssh:" in res.stdout and "OK: partitions: local" in res.stdout


def test_submit_watch_logs_blocks(session):
    spec = dict(SPEC, command=["bash", "-c", "echo from-the-skill-snippet; echo on-stderr >&2"])
    res = session(["submit", "status", "logs"], spec)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("JOB_ID=")
    assert " COMPLETE ref=slurm:" in res.stdout
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


def test_quick_path_as_written(session):
    """Preflight, submit job.yaml, watch to COMPLETE, logs, cancel (a no-op now), and the job table
    showing the job under its --name."""
    spec = dict(SPEC, command=["bash", "-c", "echo quick-path-ran"])
    res = session(["quick-path"], spec)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [ln for ln in res.stdout.splitlines() if "dino coco baseline" in ln]
    assert len(rows) == 1 and "slurm" in rows[0] and "COMPLETE" in rows[0], res.stdout
    job_id = rows[0].split()[0]
    assert "quick-path-ran" in res.stdout and f"{job_id} COMPLETE" in res.stdout, res.stdout


def test_flags_only_submit_passes_the_argv_after_the_separator(session, tmp_path):
    """The flags-only form: --name is stored, the local spec is uploaded, and `-e` after `--` reaches the command
    (here: dino, which the local nodes do not have, so the job ends in ERROR with the program's own failure)."""
    (tmp_path / "my-train.yaml").write_text("train:\n  num_epochs: 1\n")
    res = session(["submit-flags", "status", "logs", "list"], NAME="flags only form", TRAIN_SPEC="my-train.yaml",
                  CPUS_PER_TASK="1")  # the local nodes have the host's few real CPUs
    assert res.stdout.startswith("JOB_ID="), res.stdout + res.stderr
    job_id = res.stdout.splitlines()[0].split("=", 1)[1]
    assert f"{job_id} ERROR" in res.stdout and "dino" in res.stdout, res.stdout + res.stderr
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith(job_id) and "flags only form" in ln]
    assert rows, res.stdout
    rec = json.loads((tmp_path / "state" / f"{job_id}.json").read_text())
    assert rec["description"] == "flags only form" and rec["network_arch"] == "dino"


def test_list_block_reads_only_this_machines_records(session, tmp_path):
    spec = dict(SPEC, command=["true"])
    res = session(["submit", "list"], spec, NAME="per machine")
    assert res.returncode == 0, res.stdout + res.stderr
    job_id = res.stdout.splitlines()[0].split("=", 1)[1]
    assert sum(1 for ln in res.stdout.splitlines() if ln.startswith(job_id)) == 2, res.stdout
    other = session(["list"], TAO_STATE_DIR=str(tmp_path / "another-machine"))
    assert other.returncode == 0 and job_id not in other.stdout


def test_stage_block_then_a_job_reads_the_input_it_staged(session, tmp_path, slurm_cluster):
    (tmp_path / "labels.txt").write_text("cat\ndog\n")
    where = f"{slurm_cluster['SLURM_BASE_RESULTS_DIR']}/inputs-{uuid.uuid4().hex[:12]}"
    res = session(["stage"], INPUT="labels.txt", STAGE_DIR=where)
    assert res.returncode == 0 and res.stdout.startswith(f"staged {where}/labels.txt ("), res.stdout + res.stderr
    spec = dict(SPEC, inputs=[f"lustre://{where}/labels.txt"], command=["cat", f"{where}/labels.txt"])
    res = session(["submit", "status", "logs"], spec)
    assert res.returncode == 0 and "cat\ndog" in res.stdout, res.stdout + res.stderr


def test_stage_block_without_a_folder_stops_before_staging_anywhere(session, tmp_path):
    """SLURM_BASE_RESULTS_DIR is optional: the block must not fall back to lustre:///inputs without it."""
    (tmp_path / "labels.txt").write_text("cat\n")
    res = session(["stage"], INPUT="labels.txt", STAGE_DIR="", SLURM_BASE_RESULTS_DIR="")
    assert res.returncode != 0 and "set STAGE_DIR to your folder" in res.stderr, res.stdout + res.stderr
    assert "staged" not in res.stdout


def test_stand_in_block_trains_as_tao_does(session):
    """references/resume.md's stand-in training, as written: the trainer travels as a spec file, runs on the node,
    and the result verbs read what it wrote."""
    res = session(["stand-in"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert " COMPLETE " in res.stdout and "epoch 5/5" in res.stdout, res.stdout
    assert "best val_loss (min, from the KPI's name) = 0.4 at epoch 3: train/model_epoch_003_step_00040.pth" in res.stdout, res.stdout


def test_ssh_check_block_works_on_the_local_cluster(session):
    """references/ssh-setup.md's check, as written: it connects as the helper does (ssh_config aliases through
    TAO_SSH_CONFIG), so the local cluster's login alias answers and its refusing failover alias is named."""
    res = session(["ssh-check"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines() == ["FAILED: tao-slurm-refused", "OK: tao-slurm-login"], res.stdout + res.stderr
