#!/usr/bin/env python3
"""Timings of the local Kubernetes cluster (control plane, real nodes, kwok): warm start, no-op up, down, builds.

Runs a private cluster (its own TAO_LOCAL_CLUSTER_DIR, so a shared running one
is left alone) from the cached binaries; builds them first if the cache is
cold (that build is then timed too). Prints the start phases recorded by
``up`` and the build times recorded in the cache's build.json.
Usage: python3 benchmarks/local_k8s_startup.py [-n 2]
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
CLI = [sys.executable, str(BANK / "scripts" / "local_cluster.py")]


def _timed(action: str, env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(CLI + [action, "kubernetes"], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2, help="start/stop cycles")
    args = parser.parse_args()
    sys.path[:0] = [str(BANK / "scripts"), str(BANK)]
    from testclusters.kubernetes import k8s_build

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TAO_LOCAL_CLUSTER_DIR=tmp)
        cold = k8s_build.cached() is None or k8s_build.node_cached() is None
        for i in range(args.n):
            up = _timed("up", env)
            phases = json.loads((Path(tmp) / "kubernetes" / "cluster.json").read_text())["phases_s"]
            noop = _timed("up", env)
            down = _timed("down", env)
            label = "cold (build + start)" if cold and i == 0 else "warm start"
            print(f"cycle {i + 1}: up {label} {up:.1f} s, up again (no-op) {noop:.2f} s, down {down:.1f} s")
            print("  phases (s since start): " + ", ".join(f"{k} {v}" for k, v in
                                                         sorted(phases.items(), key=lambda kv: kv[1])))
    for d in (k8s_build.cached(), k8s_build.node_cached()):
        build = json.loads((d / "build.json").read_text())
        print(f"cached build in {d.name}: {build['seconds']} s (built {build['built_at']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
