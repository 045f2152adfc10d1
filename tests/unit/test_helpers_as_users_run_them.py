"""Every helper in scripts/ as a user runs it: from any folder, without the bank's
dependencies installed, and with bad input (one line, never a traceback)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[2]
SCRIPTS = BANK / "scripts"
HELPERS = sorted(p.name for p in SCRIPTS.glob("*.py"))


def run(argv, *, env=None, cwd=None, timeout=60):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(argv, capture_output=True, text=True, env=e, cwd=cwd, stdin=subprocess.DEVNULL,
                          timeout=timeout)


def test_helper_list_is_not_empty():
    assert "tao_job_record.py" in HELPERS and len(HELPERS) >= 10


@pytest.mark.parametrize("script", HELPERS)
def test_help_from_another_folder_by_path_and_by_python3(script, tmp_path):
    path = SCRIPTS / script
    assert path.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n"), f"{script}: shebang"
    assert os.access(path, os.X_OK), f"{script} lacks its run bit: chmod +x"
    for argv in ([str(path), "--help"], [sys.executable, str(path), "--help"]):
        r = run(argv, cwd=tmp_path)
        assert r.returncode == 0 and r.stdout.strip() and "Traceback" not in r.stderr, (argv, r.stderr)


@pytest.mark.parametrize("script", HELPERS)
def test_help_imports_no_heavy_dependency(script, tmp_path):
    """Helpers run many times per job: --help (and argument parsing) must not import yaml/jsonschema/jinja2."""
    r = run([sys.executable, "-X", "importtime", str(SCRIPTS / script), "--help"], cwd=tmp_path)
    heavy = [ln for ln in r.stderr.splitlines() if ln.rsplit("|", 1)[-1].strip() in ("yaml", "jsonschema", "jinja2")]
    assert r.returncode == 0 and heavy == [], heavy


# ------------------------------------------------------------------ without pyyaml/jsonschema/jinja2

@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A Python with none of the bank's dependencies (a venv without site packages)."""
    venv = tmp_path_factory.mktemp("nodeps") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    probe = run([py, "-c", "import importlib.util as u; print([m for m in ('yaml','jsonschema','jinja2') "
                 "if u.find_spec(m)])"])
    assert probe.stdout.strip() == "[]", probe.stdout
    return py


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("spec") / "spec.yaml"
    p.write_text("image: nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt\n")
    return p


OPEN = ["open", "--platform", "slurm", "--image", "nvcr.io/x:1", "--network-arch", "dino", "--action", "train",
        "--storage-tier", "A", "--results-dir", "/results/x"]

# (helper args, the pip package the one line must name)
NEEDS = [
    (["resolve_versions_key.py", "images.tao_toolkit.pyt"], "pyyaml"),
    (["resolve_versions_key.py", "--list"], "pyyaml"),
    (["stamp_versions.py", "--check"], "pyyaml"),
    (["stamp_versions.py", "--check", str(BANK / "skills")], "pyyaml"),
    (["lint_skills.py"], "pyyaml"),
    (["render_k8s_job.py", "--spec", "SPEC"], "pyyaml"),
    (["render_sbatch.py", "--spec", "SPEC"], "pyyaml"),
    (["tao_k8s.py", "submit", "--spec", "SPEC"], "pyyaml"),
    (["tao_slurm.py", "submit", "--spec", "SPEC", "--dry-run"], "pyyaml"),
]


@pytest.mark.parametrize("args,package", NEEDS, ids=[" ".join(a[:2]) for a, _ in NEEDS])
def test_missing_dependency_is_one_line_naming_the_package(bare_python, spec_file, tmp_path, args, package):
    argv = [bare_python, str(SCRIPTS / args[0]), *[str(spec_file) if a == "SPEC" else a for a in args[1:]]]
    r = run(argv, cwd=tmp_path, env={"TAO_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: missing Python dependency"), r.stderr
    assert f"pip install {package}" in lines[0]
    assert "drift:" not in r.stdout  # a missing parser is not a pin drift


def test_host_preflight_on_a_bare_python_lists_every_gap(bare_python, tmp_path):
    """check_host.py is what a fresh host runs first: it must report the missing packages, not die on them."""
    r = run([bare_python, str(SCRIPTS / "check_host.py"), "--platform", "slurm"], cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == "" and "Traceback" not in r.stderr, r.stderr
    missing = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("MISSING: ")]
    assert {"pyyaml", "jsonschema", "jinja2"} <= set(missing), r.stdout
    assert any(ln.startswith(("OK: ssh ", "MISSING: ssh ")) for ln in r.stdout.splitlines()), r.stdout
    assert any(ln.startswith("OK: python3 ") for ln in r.stdout.splitlines()), r.stdout


def test_job_record_reads_need_no_dependency(bare_python, state_dir, tmp_path):
    job = run([sys.executable, str(SCRIPTS / "tao_job_record.py"), *OPEN]).stdout.strip()
    for args in (["show", job], ["list"], ["dir", job]):
        r = run([bare_python, str(SCRIPTS / "tao_job_record.py"), *args], cwd=tmp_path)
        assert r.returncode == 0 and r.stderr == "", (args, r.stderr)


def test_job_record_writes_need_no_dependency(bare_python, state_dir, tmp_path):
    """A record write is checked by hand against the schema (every poll writes one): no jsonschema needed."""
    rec = [bare_python, str(SCRIPTS / "tao_job_record.py")]
    r = run(rec + OPEN, cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    job = r.stdout.strip()
    for args in (["mark", job, "--state", "RUNNING", "--backend-ref", "slurm:1"], ["mark", job, "--state", "RUNNING",
                 "--meta", "poll=2", "--message", "up"], ["mark", job, "--state", "ERROR", "--err-class", "ERR_INFRA"]):
        r = run(rec + args, cwd=tmp_path)
        assert r.returncode == 0 and r.stderr == "", (args, r.stderr)
    r = run(rec + ["open", *OPEN[1:], "--retry-of", job], cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_a_hand_edited_record_is_refused_in_one_line_without_jsonschema(bare_python, state_dir, tmp_path):
    """The record store checks the schema itself (taobank.records.shape): a record a write would refuse is
    reported damaged, in the same one line, with or without jsonschema installed."""
    job = run([sys.executable, str(SCRIPTS / "tao_job_record.py"), *OPEN]).stdout.strip()
    path = state_dir / f"{job}.json"
    path.write_text(path.read_text().replace('"storage_tier": "A"', '"storage_tier": "B"'))
    said = []
    for py in (bare_python, sys.executable):
        r = run([py, str(SCRIPTS / "tao_job_record.py"), "mark", job, "--state", "RUNNING"], cwd=tmp_path)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1 and "is damaged (unknown storage_tier)" in lines[0], r.stderr
        said.append(lines[0])
    assert said[0] == said[1]
    r = run([bare_python, str(SCRIPTS / "redact_secrets.py"), "redact"], cwd=tmp_path)
    assert r.returncode == 0


# ------------------------------------------------------------------ bad input: one line, no traceback

@pytest.fixture(scope="module")
def junk(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("junk")
    (d / "bad.yaml").write_text("x: [\n")
    (d / "bin.dat").write_bytes(b"\xff\xfe\x00\x81 not utf-8")
    (d / "list.yaml").write_text("- a\n- b\n")
    (d / "adir").mkdir()
    return {k.replace(".", "_"): str(d / k) for k in ("bad.yaml", "bin.dat", "list.yaml", "adir")} | {
        "missing": str(d / "nope")}


FUZZ = [
    ["tao_job_record.py"],
    ["tao_job_record.py", "bogus"],
    ["tao_job_record.py", "open"],
    ["tao_job_record.py", "mark", "x"],
    ["tao_job_record.py", "mark", "", "--state", "RUNNING"],
    ["tao_job_record.py", "mark", "../../etc/passwd", "--state", "RUNNING"],
    ["tao_job_record.py", "mark", "dino-train-00000000", "--state", "BOGUS"],
    ["tao_job_record.py", "mark", "dino-train-00000000", "--state", "RUNNING", "--source", "nobody"],
    ["tao_job_record.py", "show", "../x"],
    ["tao_job_record.py", "list", "--state", "BOGUS"],
    ["tao_job_record.py", "list", "--platform", "lsf"],
    ["tao_job_record.py", "open", "--platform", "slurm", "--image", "", "--network-arch", "", "--action", "",
     "--storage-tier", "A", "--results-dir", "/x"],
    ["tao_job_record.py", "open", "--platform", "slurm", "--image", "a\nb", "--network-arch", "!!", "--action", "?",
     "--storage-tier", "A", "--results-dir", "/x"],
    ["resolve_versions_key.py"],
    ["resolve_versions_key.py", ""],
    ["resolve_versions_key.py", "..."],
    ["resolve_versions_key.py", "images.tao_toolkit.pyt.deeper"],
    ["resolve_versions_key.py", "--bogus"],
    ["stamp_versions.py", "--bogus"],
    ["stamp_versions.py", "--check", "{missing}"],
    ["redact_secrets.py"],
    ["redact_secrets.py", "lint"],
    ["redact_secrets.py", "lint", "{missing}"],
    ["redact_secrets.py", "lint", "{adir}"],
    ["redact_secrets.py", "redact", "{missing}"],
    ["lint_skills.py", "--root", "{missing}"],
    ["lint_skills.py", "--root", "{bin_dat}"],
    ["lint_skills.py", "--skill", "no-such-skill"],
    ["sync_plugin_manifests.py", "--bogus"],
    ["check_host.py", "--platform", "lsf"],
    ["render_k8s_job.py", "--spec", "{missing}"],
    ["render_k8s_job.py", "--spec", "{bad_yaml}"],
    ["render_k8s_job.py", "--spec", "{bin_dat}"],
    ["render_k8s_job.py", "--spec", "{adir}"],
    ["render_k8s_job.py", "--spec", "{list_yaml}"],
    ["render_sbatch.py", "--spec", "{missing}"],
    ["render_sbatch.py", "--spec", "{bin_dat}"],
    ["render_sbatch.py", "--spec", "{adir}"],
    ["tao_slurm.py", "submit", "--spec", "{bin_dat}", "--dry-run"],
    ["tao_slurm.py", "bogus"],
    ["tao_k8s.py", "submit", "--spec", "{bin_dat}"],
    ["tao_k8s.py", "logs"],
    ["stage_files.py", "--list", "{missing}", "--src", "{adir}", "--dest", "{adir}/d"],
    ["stage_files.py", "--list", "{bin_dat}", "--src", "{adir}", "--dest", "{adir}/d", "--dry-run"],
    ["stage_files.py", "--list", "{adir}", "--src", "{adir}", "--dest", "{adir}/d"],
    ["local_cluster.py", "up", "lsf"],
    ["local_cluster.py", "bogus"],
]


@pytest.mark.parametrize("args", FUZZ, ids=[" ".join(a)[:60] for a in FUZZ])
def test_bad_input_is_one_line_without_traceback(args, junk, tmp_path):
    argv = [sys.executable, str(SCRIPTS / args[0]), *[a.format(**junk) for a in args[1:]]]
    r = run(argv, cwd=tmp_path, env={"TAO_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode != 0, (args, r.stdout)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    if args[0] == "lint_skills.py" and not lines:  # lint problems are its output: 'file:line: rule: message'
        lines = r.stdout.strip().splitlines()
        assert len(lines) == 1 and ": name: no skill named" in lines[0], r.stdout
        return
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr


@pytest.mark.parametrize("content", ["x: [\n", "\xff not utf-8", "just a string\n"])
def test_broken_versions_file_is_one_line(content, tmp_path):
    f = tmp_path / "versions.yaml"
    f.write_bytes(content.encode("latin-1"))
    for args in (["resolve_versions_key.py", "images.tao_toolkit.pyt"], ["stamp_versions.py", "--check"]):
        r = run([sys.executable, str(SCRIPTS / args[0]), *args[1:]], env={"TAO_VERSIONS_FILE": str(f)})
        assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and str(f) in lines[0], r.stderr
        assert "drift:" not in r.stdout  # a broken pin file is one error, not one drift per marked line
