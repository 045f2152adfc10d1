#!/usr/bin/env python3
"""Start-up time of the core helpers against a bare `python3 -c pass`, interleaved in one run.

The helpers run many times per job (every mark, every poll), so their import
cost matters. Prints median and p90 wall time over N runs, and the overhead
over the interpreter baseline. Usage: python3 benchmarks/helper_startup.py [-n 20]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
S = BANK / "scripts"


def _time(argv: list[str], n: int, env: dict) -> list[float]:
    out = []
    for _ in range(n):
        run_argv = argv
        t0 = time.perf_counter()
        subprocess.run(run_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=20, help="runs per command (default 20)")
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as state:
        env = dict(os.environ, TAO_STATE_DIR=state)
        job = subprocess.run([py, str(S / "tao_job_record.py"), "open", "--platform", "slurm", "--image", "img:1",
                              "--network-arch", "dino", "--action", "train", "--storage-tier", "A",
                              "--results-dir", "/r"], capture_output=True, text=True, env=env, check=True).stdout.strip()
        cases = [
            ("python3 -c pass (baseline)", [py, "-c", "pass"]),
            ("tao_job_record.py --help", [py, str(S / "tao_job_record.py"), "--help"]),
            ("tao_job_record.py show ID", [py, str(S / "tao_job_record.py"), "show", job]),
            ("tao_job_record.py mark ID (nothing new)", [py, str(S / "tao_job_record.py"), "mark", job, "--state", "PENDING"]),
            ("tao_job_record.py mark ID --meta (writes)",
             [py, str(S / "tao_job_record.py"), "mark", job, "--state", "PENDING", "--meta", "poll={i}"]),
            ("tao_job_record.py list --active", [py, str(S / "tao_job_record.py"), "list", "--active"]),
            ("resolve_versions_key.py --help", [py, str(S / "resolve_versions_key.py"), "--help"]),
            ("resolve_versions_key.py KEY", [py, str(S / "resolve_versions_key.py"), "images.tao_toolkit.pyt"]),
            ("redact_secrets.py --help", [py, str(S / "redact_secrets.py"), "--help"]),
            ("redact_secrets.py lint versions.yaml", [py, str(S / "redact_secrets.py"), "lint", str(BANK / "versions.yaml")]),
            ("stamp_versions.py --help", [py, str(S / "stamp_versions.py"), "--help"]),
        ]
        # round-robin, so load from other processes hits every command alike
        times: dict[str, list[float]] = {label: [] for label, _ in cases}
        for i in range(args.n):
            for label, argv in cases:
                times[label].append(_time([a.replace("{i}", str(i)) for a in argv], 1, env)[0])
        results = list(times.items())
    base = statistics.median(results[0][1])
    print(f"{'command':44} {'median ms':>9} {'p90 ms':>8} {'over baseline':>13}   (n={args.n}, {py})")
    for label, ts in results:
        med = statistics.median(ts)
        p90 = sorted(ts)[max(0, int(len(ts) * 0.9) - 1)]
        print(f"{label:44} {med:9.1f} {p90:8.1f} {med - base:+13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
