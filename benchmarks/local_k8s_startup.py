#!/usr/bin/env python3
"""Timings of the local Kubernetes cluster (control plane, real nodes, kwok): warm start, no-op up, down, builds.

Runs a private cluster (its own TAO_LOCAL_CLUSTER_DIR, so a shared running one
is left alone) from the cached binaries; builds them first if the cache is
cold (that build is then timed too). Prints the start phases recorded by
``up`` and the build times recorded in the cache's build.json.

--check (CI: tests/e2e/kubernetes/test_benchmark_local_k8s_startup.py) measures
only what disturbs nobody: ``up`` on the shared cluster the e2e tests already
run, which must be a no-op -- every daemon keeps its pid, the cluster is not
started again (its ready_at stays), and not one process is run (the bank's
call log stays empty) -- timed N times. It never starts, stops or restarts a
cluster: a cluster that is not running, or that ``up`` would restart (pins,
images or kwok Stages changed), is an error. The private start/stop cycle is
left out of CI: a second full cluster (etcd, API server, two kubelets with
containerd, registry, S3) beside the shared one costs ~20 s of both cores per
start, while the e2e tests need them.

Usage: python3 benchmarks/local_k8s_startup.py [-n 2] [--check]
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


def check(n: int) -> int:
    """``up`` n times on the running shared cluster: a no-op each time (counts asserted, times printed)."""
    from testclusters import kubernetes as lk

    if not lk.status()["ready"]:
        print("error: the local Kubernetes cluster is not running: python3 scripts/local_cluster.py up kubernetes",
              file=sys.stderr)
        return 1
    if not lk.up_to_date():
        print("error: the running local Kubernetes cluster was started with other pins, images or Stages: "
              "`up` would restart it, so --check does not run it", file=sys.stderr)
        return 1
    cluster_json = Path(lk.status()["state_dir"]) / "cluster.json"
    before = lk.status()["pids"]
    ready_at = json.loads(cluster_json.read_text(encoding="utf-8")).get("ready_at")
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            log = Path(tmp) / f"calls-{i}.jsonl"
            log.write_text("")
            wall = _timed("up", {**os.environ, "TAO_CALL_LOG": str(log)})
            runs = len([ln for ln in log.read_text(encoding="utf-8").splitlines() if ln.strip()])
            now = lk.status()["pids"]
            restarted = sorted(name for name, pid in now.items() if pid != before.get(name))
            print(f"no-op up {i + 1}: {wall:.2f} s, processes run {runs}, daemons with a new pid {len(restarted)}")
            if runs:
                bad.append(f"up {i + 1} ran {runs} processes")
            if restarted:
                bad.append(f"up {i + 1} changed the pid of {', '.join(restarted)}")
    if not all(before.values()):
        bad.append("a daemon of the ready cluster had no pid: " + ", ".join(k for k, v in before.items() if not v))
    if json.loads(cluster_json.read_text(encoding="utf-8")).get("ready_at") != ready_at:
        bad.append("the cluster was started again (ready_at changed)")
    from checks import verdict

    return verdict(bad, f"{n} no-op ups of the shared cluster ran nothing and restarted nothing")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2, help="start/stop cycles (with --check: no-op ups)")
    parser.add_argument("--check", action="store_true", help="no-op ups of the running shared cluster (see above)")
    args = parser.parse_args()
    sys.path[:0] = [str(BANK / "scripts"), str(BANK), str(BANK / "benchmarks")]  # taobank, testclusters, checks.py
    if args.check:
        return check(args.n)
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
