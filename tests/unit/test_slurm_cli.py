"""The SLURM helpers as an agent calls them (no cluster needed for these)."""
import json
import os
import subprocess
from pathlib import Path

BANK = Path(__file__).resolve().parents[2]


def run(script, *args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TAO_SSH", "TAO_SLURM"))}
    e.update(env or {})
    return subprocess.run([str(BANK / "scripts" / script), *args], capture_output=True, text=True, env=e, timeout=60)


def spec_file(tmp_path, **kw):
    spec = {"network_arch": "deformable_detr", "action": "train", "image": "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt",
            "num_gpus": 16, "command": ["deformable_detr", "train", "-e", "/lustre/specs/train.yaml"]}
    spec.update(kw)
    p = tmp_path / f"job{len(list(tmp_path.iterdir()))}.json"
    p.write_text(json.dumps(spec))
    return p


def test_scripts_are_executable_with_a_shebang():
    for name in ("tao_slurm.py", "render_sbatch.py"):
        path = BANK / "scripts" / name
        assert os.access(path, os.X_OK) and path.read_text().startswith("#!/usr/bin/env python3\n")
    assert os.access(BANK / "benchmarks" / "slurm_sweep.py", os.X_OK)


def test_help_exits_zero():
    for args in (["--help"], ["submit", "--help"], ["status", "--help"]):
        assert run("tao_slurm.py", *args).returncode == 0
    assert run("render_sbatch.py", "--help").returncode == 0


def test_render_sbatch_prints_and_lints(tmp_path):
    res = run("render_sbatch.py", "--spec", str(spec_file(tmp_path)), "--job-id", "ddetr-train-1a2b3c4d", "--lint", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert "--nodes=2" in out["directives"] and "--job-name=ddetr-train-1a2b3c4d" in out["directives"]
    assert out["script"].startswith("#!/bin/bash\n")


def test_bad_input_is_one_line(tmp_path):
    cases = [
        (spec_file(tmp_path, time_hours=12), "exceeds the 4 h limit"),
        (spec_file(tmp_path, num_gpus=12), "not a multiple"),
        (spec_file(tmp_path, dataset={"root": "/home/me/data"}), "local path"),
        (spec_file(tmp_path, env={"NGC_KEY": "x"}), "looks like a credential"),
        (spec_file(tmp_path, partition="gpu\n#SBATCH --uid=0"), "partition"),
        (spec_file(tmp_path, bogus=1), "unknown field 'bogus'"),
    ]
    for path, fragment in cases:
        res = run("render_sbatch.py", "--spec", str(path))
        assert res.returncode == 1 and res.stdout == "", res.stdout
        assert res.stderr.count("\n") == 1 and fragment in res.stderr, res.stderr


def test_submit_dry_run_needs_no_cluster_and_no_secret(tmp_path):
    res = run("tao_slurm.py", "submit", "--spec", str(spec_file(tmp_path, secrets=["NGC_KEY"])), "--dry-run",
              "--partition", "batch", "--", "echo", "hi; rm -rf /")
    assert res.returncode == 0, res.stderr
    assert "#SBATCH --partition=batch" in res.stdout and "echo 'hi; rm -rf /'" in res.stdout
    assert '. "$TAO_CREDS_FILE"' in res.stdout


def test_submit_dry_run_json_is_the_same_script(tmp_path):
    path = str(spec_file(tmp_path))
    text = run("tao_slurm.py", "submit", "--spec", path, "--dry-run", "--job-id", "dino-train-00000000")
    as_json = run("tao_slurm.py", "submit", "--spec", path, "--dry-run", "--job-id", "dino-train-00000000", "--json")
    assert text.returncode == 0 and as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {"job_id": "dino-train-00000000", "script": text.stdout}


def test_missing_connection_settings_are_one_line(tmp_path, monkeypatch):
    res = run("tao_slurm.py", "preflight", env={"TAO_STATE_DIR": str(tmp_path)})
    assert res.returncode == 1 and res.stderr.startswith("error: SLURM_HOSTNAME is empty")
