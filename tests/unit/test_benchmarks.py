"""The benchmarks that need no cluster, run at a small N with --check: they run, and their COUNTS hold.

Times are printed by the benchmarks and never asserted here (house rule: speed targets live in
benchmarks/, as ratios measured in one run). The cluster benchmarks have e2e tests beside their
cluster's other e2e tests (tests/e2e/*/test_benchmark_*.py).
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

BANK = Path(__file__).resolve().parents[2]
BENCH = BANK / "benchmarks"


def run(script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=300,
                          env=env)


def load(script: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(script.removesuffix(".py"), BENCH / script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------- helper_startup.py
def test_helper_startup_check_passes_and_prints_every_ratio():
    res = run("helper_startup.py", "-n", "1", "--check")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("command"))
    rows = [ln for ln in lines[head + 1:] if ln.strip()]
    assert len(rows) == 11 and all(ln.endswith("x") for ln in rows), rows
    assert "tao_job_record.py mark ID --meta (writes)" in res.stdout
    imports = [ln for ln in lines[:head] if " imports " in ln]
    assert len(imports) == 11
    assert [ln.split(" imports ")[0].strip() for ln in imports if "none of" not in ln] == ["resolve_versions_key.py KEY"]


def test_helper_startup_check_fails_when_a_cheap_verb_imports_a_heavy_module(tmp_path):
    """A sitecustomize that imports yaml into every interpreter: every cheap command now imports it."""
    (tmp_path / "sitecustomize.py").write_text("import yaml\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    res = run("helper_startup.py", "-n", "1", "--no-bytecode-cache", "--check", env=env)
    assert res.returncode == 1
    assert "error: tao_job_record.py mark ID --meta (writes) imports yaml" in res.stderr.splitlines()


# ---------------------------------------------------------------- redact_scaling.py
def test_redact_scaling_check_counts_grow_linearly():
    res = run("redact_scaling.py", "--check", "--min", "100", "--max", "400")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    mod = load("redact_scaling.py")
    *table, verdict = res.stdout.splitlines()
    assert verdict == "check: every shape's work counts grow linearly"
    rows = [ln[19:].split() for ln in table[1:] if ln.strip()]  # past the shape column
    assert len(rows) == 3 * len(mod.SHAPES)  # sizes 100, 200, 400 of every shape
    assert all(len(r) == 10 and r[6].isdigit() and r[8].isdigit() for r in rows), rows[:3]  # calls, vetted


def test_the_call_count_tells_a_quadratic_scan():
    """What the check measures: a scan that looks at every earlier line for each line makes ~4x the calls per
    doubling, a linear one ~2x (the bound is 2.5x)."""
    mod = load("redact_scaling.py")
    code = compile("def seen(a, b):\n    return a == b\n"
                   "def redact_text(text):\n    lines = text.splitlines()\n"
                   "    return [seen(a, b) for i, a in enumerate(lines) for b in lines[:i]]\n", "quadratic.py", "exec")
    fake = types.ModuleType("quadratic")
    exec(code, fake.__dict__)
    small, big = (mod.counts(fake, mod.SHAPES["value-lines"](n))[0] for n in (200, 400))
    assert big / small > mod.MAX_GROWTH
    real = [mod.counts(mod.redact, mod.SHAPES["value-lines"](n))[0] for n in (200, 400)]
    assert real[1] / real[0] <= mod.MAX_GROWTH


# ---------------------------------------------------------------- secret_lint_corpus.py
def test_secret_lint_corpus_check_on_a_sample():
    res = run("secret_lint_corpus.py", "--check", "--sample", "10")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1].startswith("check: ")
    assert "caught" in res.stdout and "placements:" in res.stdout


def test_secret_lint_corpus_check_names_what_fell_below_the_floor():
    sys.path.insert(0, str(BENCH))
    try:
        mod = load("secret_lint_corpus.py")
    finally:
        sys.path.remove(str(BENCH))
    now = {"secrets": 10, "clean": 5, "caught": 9, "missed": 1, "redacted": 10, "relint_clean": 10,
           "false_positives": 0, "missed_ids": ["s-1"], "not_redacted_ids": [], "relint_ids": [], "false_positive_ids": []}
    placed = {"secrets": 4, "clean": 2, "missed": 0, "leaked": 1, "false_positives": 0, "objects": 2,
              "objects_caught": 2, "missed_ids": [], "leaked_ids": ["p-3"], "false_positive_ids": [],
              "not_objects_ids": []}
    stored = {"secrets": 100, "clean": 50, "caught": 100, "redacted": 100, "relint_clean": 100, "false_positives": 0,
              "placements": {"secrets": 40, "caught": 40, "leaked": 0, "false_positives": 0, "objects": 20,
                             "objects_caught": 20}}
    assert mod.regressions(now, placed, stored) == ["caught below figures.json: s-1",
                                                    "placements leaked below figures.json: p-3"]
    assert mod.regressions({**now, "caught": 10, "missed": 0, "missed_ids": []}, {**placed, "leaked": 0}, stored) == []


# ---------------------------------------------------------------- slurm_sweep.py (runs in tests/e2e/slurm)
def test_slurm_sweep_check_holds_the_counts_of_a_good_run_and_names_each_broken_one():
    """The e2e test runs the benchmark; here its --check is fed counts (importing it starts no cluster)."""
    mod = load("slurm_sweep.py")
    rows = [{"n": 1, "submit_connections": 1, "submit_connect_attempts": 2, "submit_commands": 4,
             "status_connections": 1, "status_commands": 1},
            {"n": 3, "submit_connections": 1, "submit_connect_attempts": 1, "submit_commands": 12,
             "status_connections": 1, "status_commands": 1}]
    sweeps = [(1, {}, {"connections": 2, "ssh_failures": 0}), (3, {}, {"connections": 6, "ssh_failures": 0})]
    crow = [{"n": 3, "submit_connect_attempts": 1, "submit_commands_per_job": 4.0, "status_connections": 0,
             "status_commands": 1}]
    assert mod.check(rows, sweeps, crow, hosts=2) == []
    rows[1]["submit_connections"] = 3  # a connection per submit
    rows[0]["submit_commands"] = 5
    sweeps[1][2]["ssh_failures"] = 1
    crow[0].update(submit_connect_attempts=3, status_connections=1)  # the master did not persist
    assert [line.split(":")[0].split(",")[0] for line in mod.check(rows, sweeps, crow, hosts=2)] == [
        "in-process", "in-process", "naive sweep of 3 jobs", "CLI", "CLI status of 3 jobs"]


# ---------------------------------------------------------------- mcp_status.py (start-up only; the status part is e2e)
def test_mcp_status_startup_prints_its_ratio():
    res = run("mcp_status.py", "--runs", "1", "--no-status")
    assert res.returncode == 0, res.stdout + res.stderr
    (line,) = res.stdout.splitlines()
    assert line.startswith("start-up to initialize answered: ") and "python3 -c pass" in line and "x; " in line


# ---------------------------------------------------------------- spec_check.py
def test_spec_check_benchmark_holds_its_counts():
    """The check's process loads no job verb and no jsonschema; a misspelt key is one line at check and at
    submit (nothing created); a sweep's spec file is read once and each bad trial is one line."""
    res = run("spec_check.py", "-n", "1", "--trials", "30", "--check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "(1 read of its spec, 2 bad trials named)" in res.stdout
    assert [ln.split()[0] for ln in res.stdout.splitlines() if ln.startswith("  ")] == ["ratio", "the"]


# ---------------------------------------------------------------- search.py
def test_search_check_holds_its_counts_at_a_small_n():
    """Real Optuna on a journal file: every trial asked and told once, one report per epoch run, the grid's
    epochs N * E; the quality targets are the full run's (times and ratios never asserted here)."""
    res = run("search.py", "--trials", "6", "--concurrent", "2", "--epochs", "3", "--seeds", "1", "--check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "epochs tpe+asha / grid:" in res.stdout and "beats random at equal epochs:" in res.stdout
