#!/usr/bin/env python3
"""Cost of one `tao_docker.py status` sweep over N running Docker jobs (N = 1, 5, 20), against a per-job poll.

Needs the local engine (`scripts/local_cluster.py up docker`). For each N it submits N `sleep` jobs through
the helper, runs the sweep, and prints the engine calls and the wall time of the sweep next to a naive poll
(one `docker inspect` per job), and their ratio measured in the same run. Every job it starts is removed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BANK / "scripts"), str(BANK)]

import testclusters.docker as ld  # noqa: E402

HELPER = str(BANK / "scripts" / "tao_docker.py")


def sh(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(argv[:4])} failed: {proc.stderr.strip()[-300:]}")
    return proc


def setup(n: int, env: dict) -> list[str]:
    return [sh([sys.executable, HELPER, "submit", "--quiet", "--image", ld.IMAGE, "--gpus", "0", "--", "sleep", "600"],
               env).stdout.strip() for _ in range(n)]


def sweep(env: dict, log: Path) -> tuple[int, float]:
    log.write_text("")
    t0 = time.perf_counter()
    out = sh([sys.executable, HELPER, "status", "--json"], {**env, "TAO_CALL_LOG": str(log)})
    wall = time.perf_counter() - t0
    assert all(v["state"] == "RUNNING" for v in json.loads(out.stdout)), out.stdout[:300]
    calls = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return sum(1 for c in calls if c and c[0] == "docker"), wall


def naive(ids: list[str], env: dict) -> tuple[int, float]:
    t0 = time.perf_counter()
    for jid in ids:
        sh(["docker", "container", "inspect", jid], env)
    return len(ids), time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,5,20")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every sweep took exactly one engine call")
    args = parser.parse_args()
    if not ld.status().get("ready"):
        print("error: the local Docker engine is not running: python3 scripts/local_cluster.py up docker", file=sys.stderr)
        return 1
    bad = []
    print(f"{'N':>4} {'sweep calls':>12} {'sweep s':>8} {'naive calls':>12} {'naive s':>8} {'naive/sweep':>12}")
    for n in (int(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, **ld.env(), "TAO_STATE_DIR": f"{tmp}/state", "TAO_DOCKER_RESULTS_DIR": tmp}
            ids = setup(n, env)
            try:
                sweep(env, Path(tmp) / "warm.jsonl")  # the first sweep moves the records to RUNNING
                calls, wall = sweep(env, Path(tmp) / "calls.jsonl")
                ncalls, nwall = naive(ids, env)
            finally:
                subprocess.run(["docker", "rm", "--force", *ids], env=env, capture_output=True, timeout=300)
            print(f"{n:>4} {calls:>12} {wall:>8.2f} {ncalls:>12} {nwall:>8.2f} {nwall / wall:>11.2f}x", flush=True)
            if calls != 1:
                bad.append(f"N={n}: {calls} engine calls")
    if args.check and bad:
        print("error: a status sweep must take one engine call: " + "; ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
