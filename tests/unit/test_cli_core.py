"""The core CLIs as a skill runs them: exit codes, one-line errors, outputs, run bits."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[2]
SCRIPTS = BANK / "scripts"
CORE_CLIS = ["tao_job_record.py", "redact_secrets.py", "resolve_versions_key.py", "stamp_versions.py"]


def run(script, *args, env=None, cwd=None, stdin=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([str(SCRIPTS / script), *args], capture_output=True, text=True, env=e, cwd=cwd,
                          input=stdin, timeout=60)


@pytest.mark.parametrize("script", CORE_CLIS)
def test_executable_with_shebang_from_any_cwd(script, tmp_path):
    path = SCRIPTS / script
    assert os.access(path, os.X_OK), f"{script} lacks its run bit"
    assert path.read_text().startswith("#!/usr/bin/env python3\n")
    r = run(script, "--help", cwd=tmp_path)
    assert r.returncode == 0 and "usage:" in r.stdout


@pytest.mark.parametrize("script", CORE_CLIS)
def test_help_imports_no_heavy_deps(script):
    code = (f"import sys, runpy; before = set(sys.modules); sys.argv=[{str(SCRIPTS / script)!r}, '--help']; "
            f"sys.path.insert(0, {str(SCRIPTS)!r})\n"
            "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('yaml', 'jsonschema', 'jinja2') if m in sys.modules and m not in before]\n"
            "sys.stderr.write('HEAVY=' + ','.join(heavy))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY=" in r.stderr and r.stderr.rsplit("HEAVY=", 1)[1] == ""


OPEN = ["open", "--platform", "k8s", "--image", "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt", "--network-arch",
        "visual_changenet", "--action", "Train", "--storage-tier", "A", "--results-dir", "/results/r1"]


def test_job_record_flow(state_dir):
    r = run("tao_job_record.py", *OPEN)
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip()
    assert r.stdout == job + "\n" and re.fullmatch(r"visual-changenet-train-[0-9a-f]{8}", job)
    r = run("tao_job_record.py", "mark", job, "--state", "RUNNING", "--backend-ref", f"ns/{job}",
            "--meta", "uid=abc-123", "--meta", "namespace=ns", "--message", "pod up HF_TOKEN=s3cr3tVALUE42")
    assert r.returncode == 0 and r.stdout == f"{job} RUNNING\n"
    r = run("tao_job_record.py", "show", job, "--json")
    rec = json.loads(r.stdout)
    assert rec["backend"] == {"uid": "abc-123", "namespace": "ns"} and rec["backend_ref"] == f"ns/{job}"
    assert rec["platform"] == "kubernetes"
    raw = (state_dir / f"{job}.json").read_text()
    assert "s3cr3tVALUE42" not in raw and "s3cr3tVALUE42" not in r.stdout
    r = run("tao_job_record.py", "mark", job, "--state", "PENDING", "--source", "backend-hook")
    assert r.returncode == 0
    r = run("tao_job_record.py", "mark", job, "--state", "ERROR", "--err-class", "ERR_INFRA", "--source", "poller")
    assert r.returncode == 0
    r = run("tao_job_record.py", "mark", job, "--state", "RUNNING")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "ERROR is terminal" in r.stderr
    r = run("tao_job_record.py", "show", job)
    assert "state: ERROR" in r.stdout and "err_class: ERR_INFRA" in r.stdout and "PENDING (backend-hook)" in r.stdout
    r = run("tao_job_record.py", "open", *OPEN[1:], "--retry-of", job)
    child = r.stdout.strip()
    assert json.loads(run("tao_job_record.py", "show", child, "--json").stdout)["attempt"] == 2
    r = run("tao_job_record.py", "list", "--active")
    head, row = r.stdout.splitlines()
    assert head.split()[:3] == ["ID", "NAME", "ARCH/ACTION"] and row.split()[0] == child and job not in r.stdout
    r = run("tao_job_record.py", "list", "--active", "--no-headers")
    assert r.stdout.split()[0] == child
    r = run("tao_job_record.py", "list", "--platform", "kubernetes", "--state", "ERROR", "--json")
    assert [x["id"] for x in json.loads(r.stdout)] == [job]
    r = run("tao_job_record.py", "dir", job)
    assert r.returncode == 0 and Path(r.stdout.strip()).is_dir()


@pytest.mark.parametrize("args,code,needle", [
    (["mark", "dino-train-00000000", "--state", "RUNNING"], 1, "no job record"),
    (["mark", "Bad_Id", "--state", "RUNNING"], 1, "not a job id"),
    (["open", *OPEN[1:-1], "rel/dir"], 1, "not absolute"),
    (["open", *OPEN[1:-1], "s3://ak:sk@bucket/x"], 1, "credentials"),
    (["open", *[a if a != "k8s" else "lsf" for a in OPEN[1:]]], 1, "unknown platform"),
    (["open", *[a if a != "A" else "B" for a in OPEN[1:]]], 1, "storage tier"),
    (["open", "--platform", "slurm"], 2, "required"),
    (["open", *OPEN[1:], "--meta", "novalue"], 2, "KEY=VALUE"),
])
def test_job_record_errors(state_dir, args, code, needle):
    r = run("tao_job_record.py", *args)
    assert r.returncode == code and needle in r.stderr
    if code == 1:
        assert len(r.stderr.strip().splitlines()) == 1


def test_illegal_mark_names_allowed(state_dir):
    job = run("tao_job_record.py", *OPEN).stdout.strip()
    assert run("tao_job_record.py", "mark", job, "--state", "UNKNOWN").returncode == 0
    r = run("tao_job_record.py", "mark", job, "--state", "PENDING")
    assert r.returncode == 1
    assert r.stderr.strip() == (f"error: illegal transition UNKNOWN -> PENDING for job {job}: "
                                "allowed from UNKNOWN: RUNNING, COMPLETE, ERROR, CANCELED, PRUNED")
    r = run("tao_job_record.py", "mark", job, "--state", "RUNNING", "--err-class", "ERR_PROGRAM")
    assert r.returncode == 1 and "only allowed with --state ERROR" in r.stderr


def test_resolve_exit_codes(tmp_path):
    r = run("resolve_versions_key.py", "images.tao_toolkit.pyt_pyxis")
    assert r.returncode == 0 and r.stdout.startswith("nvcr.io#nvidia/")
    r = run("resolve_versions_key.py", "images.tao_toolkit.pyx")
    assert r.returncode == 1 and "did you mean images.tao_toolkit.pyt" in r.stderr
    r = run("resolve_versions_key.py", "images.tao_toolkit.pyt", env={"TAO_VERSIONS_FILE": str(tmp_path / "no.yaml")})
    assert r.returncode == 2
