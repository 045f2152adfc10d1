#!/usr/bin/env python3
"""Cost of one `tao_k8s.py status` sweep over N active Kubernetes records (N = 1, 10, 100).

Needs the local cluster (`scripts/local_cluster.py up kubernetes`). For each N it
creates N records and N keep-running Jobs (0 GPUs) in a scratch namespace,
runs the sweep, and prints the kubectl invocations and wall time per sweep,
next to a naive per-job poll (one `kubectl get job` + one `kubectl get pods`
per record) for comparison. Everything it creates is deleted afterwards.
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

import testclusters.kubernetes as lk  # noqa: E402

NS = "tao-bench"


def sh(argv: list[str], env: dict, stdin: str | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(argv[:4])} failed: {proc.stderr.strip()[-300:]}")
    return proc


def setup(n: int, env: dict) -> list[str]:
    from taobank import records
    from taobank.platforms.kubernetes.render import render_manifests

    ids, objs = [], []
    for _ in range(n):
        rec = records.open_record("kubernetes", "busybox", "dino", "train", "A", "/results",
                                  backend={"namespace": NS, "context": ""})
        ids.append(rec["id"])
        objs += render_manifests({"image": "busybox", "command": "true", "gpus": 0, "no_results": True,
                                  "pod_annotations": {lk.KEEP_RUNNING_ANNOTATION: "true"}},
                                 job_id=rec["id"], namespace=NS)
    from taobank.platforms.kubernetes.kubectl import json_objects

    items = json_objects(sh(["kubectl", "-n", NS, "create", "-f", "-", "-o", "json"], env,
                            json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})).stdout)
    for job in items:
        jid = job["metadata"]["labels"]["tao-job-id"]
        records.mark(jid, "PENDING", backend_ref=f"{NS}/{job['metadata']['name']}",
                     backend={"uid": job["metadata"]["uid"], "namespace": NS, "name": job["metadata"]["name"]})
    return ids


def sweep(env: dict, log: Path) -> tuple[int, float]:
    log.write_text("")
    t0 = time.perf_counter()
    sh([sys.executable, str(BANK / "scripts" / "tao_k8s.py"), "status", "--json"], {**env, "TAO_CALL_LOG": str(log)})
    wall = time.perf_counter() - t0
    calls = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return sum(1 for c in calls if c and c[0] == "kubectl"), wall


def naive(ids: list[str], env: dict) -> tuple[int, float]:
    t0 = time.perf_counter()
    for jid in ids:
        sh(["kubectl", "-n", NS, "get", "job", jid, "-o", "json"], env)
        sh(["kubectl", "-n", NS, "get", "pods", "-l", f"tao-job-id={jid}", "-o", "json"], env)
    return 2 * len(ids), time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100")
    parser.add_argument("--no-naive", action="store_true", help="skip the per-job comparison")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every sweep took exactly one kubectl call")
    args = parser.parse_args()
    if not lk.status().get("ready"):
        print("error: local Kubernetes cluster is not running: python3 scripts/local_cluster.py up kubernetes",
              file=sys.stderr)
        return 1
    env = {**os.environ, **lk.env()}
    env.pop("TAO_K8S_CONTEXT", None)
    end = time.time() + 120
    while True:  # a namespace left Terminating by an earlier run must go first
        subprocess.run(["kubectl", "create", "namespace", NS], env=env, capture_output=True)
        phase = subprocess.run(["kubectl", "get", "namespace", NS, "-o", "jsonpath={.status.phase}"], env=env,
                               capture_output=True, text=True).stdout
        if phase == "Active":
            break
        if time.time() > end:
            print(f"error: namespace {NS} is {phase or 'missing'}: try again later", file=sys.stderr)
            return 1
        time.sleep(2)
    bad = []
    print(f"{'N':>5} {'sweep kubectl calls':>20} {'sweep wall s':>13} {'naive calls':>12} {'naive wall s':>13}")
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            with tempfile.TemporaryDirectory() as state:
                env["TAO_STATE_DIR"] = os.environ["TAO_STATE_DIR"] = state
                ids = setup(n, env)
                sweep(env, Path(state) / "warm.jsonl")  # first sweep moves records to RUNNING
                calls, wall = sweep(env, Path(state) / "calls.jsonl")
                ncalls, nwall = (0, 0.0) if args.no_naive else naive(ids, env)
                print(f"{n:>5} {calls:>20} {wall:>13.2f} {ncalls:>12} {nwall:>13.2f}", flush=True)
                if calls != 1:
                    bad.append(f"N={n}: {calls} kubectl calls")
                sh(["kubectl", "-n", NS, "delete", "jobs,pods", "-l", "tao-job-id", "--wait=false"], env)
    finally:
        subprocess.run(["kubectl", "delete", "namespace", NS, "--wait=false"], env=env, capture_output=True)
    if args.check and bad:
        print("error: a status sweep must take one kubectl call: " + "; ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
