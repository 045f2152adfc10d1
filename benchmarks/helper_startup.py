#!/usr/bin/env python3
"""Start-up time of the core helpers against a bare `python3 -c pass`, interleaved in one run.

The helpers run many times per job (every mark, every poll), so their import
cost matters. Prints median and p90 wall time over N runs, the overhead over
the interpreter baseline and the ratio to it (targets: a record write <= 2.5x,
a read verb or --help <= 2.0x).

Bytecode: every command runs once untimed first, with a private
PYTHONPYCACHEPREFIX, so the timed runs read compiled modules as a user's
second run does (PYTHONDONTWRITEBYTECODE, set on some machines, would
otherwise compile every module of the bank on every run; --no-bytecode-cache
measures that case).

--check (CI, any N): every command exits 0, a record verb or --help imports
none of jsonschema/yaml/jinja2 (``-X importtime``), and the record is written
exactly as often as it should be (a mark that learns nothing writes nothing;
each --meta mark writes once). Times are printed, never asserted.

Usage: python3 benchmarks/helper_startup.py [-n 20] [--no-bytecode-cache] [--check]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
S = BANK / "scripts"
#: modules a cheap verb must never import (jsonschema alone was ~55 ms of a record write)
HEAVY = ("jsonschema", "yaml", "jinja2")


def _time(argv: list[str], env: dict) -> tuple[float, int]:
    t0 = time.perf_counter()
    rc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False).returncode
    return (time.perf_counter() - t0) * 1000, rc


def imported(argv: list[str], env: dict) -> set[str]:
    """Top-level names of the modules ``argv`` (a python3 command) imports, read from ``-X importtime``."""
    res = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True, env=env,
                         check=False)
    names = set()
    for line in res.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                names.add(name.split(".")[0])
    return names


def cases(py: str, job: str) -> list[tuple[str, list[str], bool]]:
    """(label, argv, cheap): a cheap command must not import HEAVY."""
    rec = [py, str(S / "tao_job_record.py")]
    return [
        ("python3 -c pass (baseline)", [py, "-c", "pass"], True),
        ("tao_job_record.py --help", rec + ["--help"], True),
        ("tao_job_record.py show ID", rec + ["show", job], True),
        ("tao_job_record.py mark ID (nothing new)", rec + ["mark", job, "--state", "PENDING"], True),
        ("tao_job_record.py mark ID --meta (writes)", rec + ["mark", job, "--state", "PENDING", "--meta", "poll={i}"],
         True),
        ("tao_job_record.py list --active", rec + ["list", "--active"], True),
        ("resolve_versions_key.py --help", [py, str(S / "resolve_versions_key.py"), "--help"], True),
        ("resolve_versions_key.py KEY", [py, str(S / "resolve_versions_key.py"), "images.tao_toolkit.pyt"], False),
        ("redact_secrets.py --help", [py, str(S / "redact_secrets.py"), "--help"], True),
        ("redact_secrets.py lint versions.yaml", [py, str(S / "redact_secrets.py"), "lint", str(BANK / "versions.yaml")],
         True),
        ("stamp_versions.py --help", [py, str(S / "stamp_versions.py"), "--help"], True),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=20, help="timed runs per command (default 20)")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="keep the inherited environment and skip the untimed warm-up run")
    ap.add_argument("--check", action="store_true", help="assert exit codes, imports and record writes (not times)")
    args = ap.parse_args()
    if args.n < 1:
        ap.error("-n must be at least 1")
    py = sys.executable
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        env = dict(os.environ, TAO_STATE_DIR=str(state))
        if not args.no_bytecode_cache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        job = subprocess.run([py, str(S / "tao_job_record.py"), "open", "--platform", "slurm", "--image", "img:1",
                              "--network-arch", "dino", "--action", "train", "--storage-tier", "A",
                              "--results-dir", "/r"], capture_output=True, text=True, env=env, check=True).stdout.strip()
        todo = cases(py, job)
        if not args.no_bytecode_cache:
            for _, argv, _ in todo:  # untimed: compiles every module once into the private cache
                _time([a.replace("{i}", "warm") for a in argv], env)
        record = state / f"{job}.json"
        before = record.read_bytes()
        nothing_new = next(argv for label, argv, _ in todo if "nothing new" in label)
        _time(nothing_new, env)
        if record.read_bytes() != before:
            problems.append("a mark that learnt nothing rewrote the record")
        # round-robin, so load from other processes hits every command alike
        times: dict[str, list[float]] = {label: [] for label, _, _ in todo}
        for i in range(args.n):
            for label, argv, _ in todo:
                ms, rc = _time([a.replace("{i}", str(i)) for a in argv], env)
                times[label].append(ms)
                if rc != 0:
                    problems.append(f"{label} exited {rc}")
        rec = json.loads(record.read_text(encoding="utf-8"))
        if rec["backend"].get("poll") != str(args.n - 1):
            problems.append(f"the last --meta mark was not stored (poll={rec['backend'].get('poll')!r})")
        if len(rec["transitions"]) != 1:
            problems.append(f"same-state marks added transitions: {len(rec['transitions'])}")
        if args.check:
            for label, argv, cheap in todo:
                heavy = sorted(imported([a.replace("{i}", "check") for a in argv], env) & set(HEAVY))
                print(f"{label:44} imports {', '.join(heavy) or 'none of ' + '/'.join(HEAVY)}")
                if cheap and heavy:
                    problems.append(f"{label} imports {', '.join(heavy)}")
    base = statistics.median(times[todo[0][0]])
    bc = "no bytecode cache" if args.no_bytecode_cache else "warm bytecode cache"
    print(f"{'command':44} {'median ms':>9} {'p90 ms':>8} {'over baseline':>13} {'ratio':>6}   "
          f"(n={args.n}, {bc}, {py})")
    for label, ts in times.items():
        med = statistics.median(ts)
        p90 = sorted(ts)[min(len(ts) - 1, math.ceil(len(ts) * 0.9) - 1)]
        print(f"{label:44} {med:9.1f} {p90:8.1f} {med - base:+13.1f} {med / base:5.2f}x")
    for p in problems:
        print(f"{'error' if args.check else 'warning'}: {p}", file=sys.stderr)
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
