#!/usr/bin/env python3
"""Sweeps on the local clusters: what one N-trial sweep costs against N single submits, measured in one run.

  python3 benchmarks/sweep.py [--platforms slurm,kubernetes] [--sizes 10,100] [--baseline-sizes 10,100] [--check]

For each platform and N it runs the helpers as an agent does (one process per verb) with the bank's call log
(TAO_CALL_LOG: every ssh and kubectl argv) and counts, for each verb:
  calls        SLURM: remote commands over ssh (ssh.classify_argv "command"); Kubernetes: kubectl calls
  connections  SLURM: ssh connection attempts ("connect": the ControlMaster's ``true`` probe; later processes
               reuse the persisting master); Kubernetes: one per kubectl call (each is its own process)
  wall_s       wall time of the verb's process(es)
The sweep: one ``submit --sweep bench.i=0,...,N-1`` and one ``status --sweep``. The baseline, same run, same
spec: N plain submits and N ``status ID`` (one per job, as a user without sweeps polls them). Ratios are
baseline/sweep. Each trial runs ``true`` (SLURM: no GPU; Kubernetes: busybox on the kwok nodes, 0 GPUs), and
everything made is cancelled or deleted at the end: the sweep with ``cancel --sweep`` (also counted), the single
jobs with one scancel / one kubectl delete.

--check (CI: tests/e2e/*/test_benchmark_sweep_*.py, at a small N) exits 1 unless: a sweep submit takes at most
3 remote commands (SLURM) or 3 kubectl calls (Kubernetes: the gates' ONE read of the Kueue queues, nodes and
pods (a cluster found without Kueue: nodes and pods, Kueue's absence remembered a while), ONE create of the sweep's Indexed Job, suspended, which is its
server check, and ONE server-side apply of the trial table it owns and of the Job released), not above ONE single
submit's; ``status --sweep`` at most 2 calls (Kubernetes: 1, the trials keep no
status files here, + ONE ``kubectl logs`` saving the output of the trials that ended since the last look); ``cancel --sweep`` stops every active trial in one scancel / ONE kubectl call (the delete of
the Indexed Job). Times are never asserted. ``--max-concurrent K`` (default: all) is the sweep's K.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BANK / "scripts"), str(BANK), str(BANK / "benchmarks")]  # taobank, testclusters, checks.py

from taobank import pins  # noqa: E402
from taobank.platforms.slurm import ssh  # noqa: E402

SLURM_SPEC = {"network_arch": "bench", "action": "noop", "num_gpus": 0, "cpus_per_task": 1, "time_hours": 0.25,
              "command": ["true"]}
#: a trial: sleeps long enough to be cancelled while it runs (its key=value words become sh's $1..)
TRIAL = ["sh", "-c", "sleep 30", "tao"]
WRITES = ("create", "apply", "patch", "delete", "replace")


# ------------------------------------------------------------------ running the helpers and counting
class Runner:
    """One platform's helper run as a user runs it, every call it makes logged and counted per verb."""

    def __init__(self, platform: str, env: dict[str, str], tmp: Path) -> None:
        self.platform, self.env, self.tmp = platform, env, tmp
        self.log = tmp / f"calls-{platform}.jsonl"
        self.env["TAO_CALL_LOG"] = str(self.log)
        helper = "tao_slurm.py" if platform == "slurm" else "tao_k8s.py"
        self.exe = [sys.executable, str(BANK / "scripts" / helper)]
        self.jobs = [sys.executable, str(BANK / "scripts" / "tao_jobs.py")]

    def submit_args(self, command: list[str]) -> list[str]:
        """The submit of one bench job running ``command`` (a trial's key=value words are appended to it)."""
        if self.platform == "slurm":
            spec = self.tmp / f"bench-{len(command)}.json"
            spec.write_text(json.dumps({**SLURM_SPEC, "command": command}))
            return ["submit", "--spec", str(spec)]
        import testclusters.kubernetes as lk

        return ["submit", "--image", str(pins.resolve("images.busybox")), "--network-arch", "bench", "--action",
                "noop", "--gpus", "0", "--no-results", "--no-input-check", "--node-selector",
                f"{lk.FAKE_NODE_LABEL}=true", "--command", shlex.join(command)]

    def run(self, argv: list[str]) -> str:
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise SystemExit(f"error: {' '.join(argv[1:4])} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
        return proc.stdout

    def measure(self, argvs: list[list[str]]) -> tuple[dict, list[str]]:
        """Run each argv in turn; (counts of all their calls, their outputs)."""
        self.log.write_text("")
        t0 = time.perf_counter()
        outs = [self.run(a) for a in argvs]
        wall = time.perf_counter() - t0
        calls = [json.loads(x) for x in self.log.read_text().splitlines() if x.strip()]
        return {**self.count(calls), "wall_s": wall}, outs

    def count(self, calls: list[list[str]]) -> dict:
        if self.platform == "slurm":
            kinds = [ssh.classify_argv(c) for c in calls]
            return {"calls": kinds.count("command"), "connections": kinds.count("connect"), "writes": 0}
        kube = [c for c in calls if Path(c[0]).name == "kubectl"]
        return {"calls": len(kube), "connections": len(kube),
                "writes": sum(1 for c in kube if _verb(c) in WRITES and "--dry-run=server" not in c)}


def _verb(argv: list[str]) -> str:
    rest = argv[1:]
    while rest and rest[0] in ("--context", "-n", "--namespace"):
        rest = rest[2:]
    return rest[0] if rest else ""


#: the sweep's --max-concurrent (None: every trial at once)
MAX_CONCURRENT: int | None = None


def one_platform(platform: str, n: int, baseline: int, tmp: Path) -> dict:
    """The sweep of ``n`` trials, then ``baseline`` single submits (0: none), in one state dir."""
    os.environ["TAO_STATE_DIR"] = str(tmp / f"state-{platform}-{n}")
    env = dict(os.environ)
    r = Runner(platform, env, tmp)
    if platform == "slurm":  # the working login host remembered, the master closed: the sweep and the
        conn = ssh.Connection()  # baseline below each start cold and pay for one connection
        conn.connect()
        conn.close()
    values = ",".join(str(i) for i in range(n))
    k = ["--max-concurrent", str(MAX_CONCURRENT)] if MAX_CONCURRENT else []
    sub, (out,) = r.measure([r.exe + r.submit_args(TRIAL) + ["--sweep", f"bench.i={values}", *k, "--json"]])
    done = json.loads(out)
    sweep_id, trial_ids = done["sweep"], [j["id"] for j in done["jobs"]]
    row: dict = {"platform": platform, "n": n, "sweep_submit": sub, "trials": len(trial_ids)}
    try:
        row["sweep_status"], (seen,) = r.measure([r.jobs + ["status", "--sweep", sweep_id, "--json"]])
        row["before_cancel"] = [t["state"] for t in json.loads(seen)]
    finally:  # the trials still run (they sleep): one cancel --sweep stops them all
        row["sweep_cancel"], _ = r.measure([r.jobs + ["cancel", "--sweep", sweep_id, "--json"]])
        row["cancel_log"] = [json.loads(x) for x in r.log.read_text().splitlines() if x.strip()]
        row["after_cancel"] = [j["state"] for j in json.loads(r.run(r.jobs + ["list", "--sweep", sweep_id, "--json"]))]
    if not baseline:
        return row
    try:
        if platform == "slurm":
            ssh.Connection().close()
        bsub, outs = r.measure([r.exe + r.submit_args(["true"]) + ["--json"] for _ in range(baseline)])
        singles = [json.loads(o)["id"] for o in outs]
        one, _ = r.measure([r.exe + r.submit_args(["true"]) + ["--json"]])  # one more: what ONE submit costs
        bst, _ = r.measure([r.jobs + ["status", i, "--json"] for i in singles])
        row.update(single_submits=bsub, single_status=bst, one_submit=one, baseline_n=baseline)
    finally:
        cleanup(platform, env, json.loads(r.run(r.jobs + ["list", "--json"])), trial_ids)
    return row


def cleanup(platform: str, env: dict, listed: list[dict], trial_ids: list[str]) -> None:
    """Stop the single jobs this run made (the sweep was cancelled with cancel --sweep): one call per 200."""
    single = [j for j in listed if j["id"] not in set(trial_ids)]
    if platform == "slurm":
        refs = [j["backend_ref"].split(":", 1)[1] for j in single if (j.get("backend_ref") or "").startswith("slurm:")]
        conn = ssh.Connection()
        for i in range(0, len(refs), 200):
            conn.remote(["scancel", *refs[i:i + 200]], check=False, what="scancel")
        return
    ns = env.get("TAO_K8S_NAMESPACE") or "default"
    ids = [j["id"] for j in single]
    for i in range(0, len(ids), 100):
        subprocess.run(["kubectl", "-n", ns, "delete", "jobs,secrets", "-l", f"tao-job-id in ({','.join(ids[i:i + 100])})",
                        "--wait=false", "--ignore-not-found"], env=env, capture_output=True, timeout=120)


# ------------------------------------------------------------------ report and check
def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b else "-"


def report(rows: list[dict]) -> None:
    cols = ["platform", "n", "verb", "sweep_calls", "sweep_conn", "sweep_wall_s", "single_calls", "single_conn",
            "single_wall_s", "calls_ratio", "conn_ratio", "wall_ratio"]
    print(" | ".join(cols))
    for r in rows:
        for verb, s, b in (("submit", r["sweep_submit"], r.get("single_submits")),
                           ("status", r["sweep_status"], r.get("single_status"))):
            cells = [r["platform"], str(r["n"]), verb, str(s["calls"]), str(s["connections"]), f"{s['wall_s']:.2f}"]
            if b:
                cells += [str(b["calls"]), str(b["connections"]), f"{b['wall_s']:.2f}", ratio(b["calls"], s["calls"]),
                          ratio(b["connections"], s["connections"]), ratio(b["wall_s"], s["wall_s"])]
            else:
                cells += ["-"] * 6
            print(" | ".join(cells))
        c = r["sweep_cancel"]
        print(" | ".join([r["platform"], str(r["n"]), "cancel --sweep", str(c["calls"]), str(c["connections"]),
                          f"{c['wall_s']:.2f}"] + ["-"] * 6))
    print("\nsweep = one `submit --sweep` of N trials / one `status --sweep`; single = N plain submits / N `status ID`\n"
          "(one process each); calls = remote commands (SLURM) or kubectl calls; conn = ssh connection attempts\n"
          "(SLURM: later processes reuse the persisting master) or kubectl processes; ratios = single/sweep.")


def check(rows: list[dict]) -> list[str]:
    """The claims of the docstring against the counts ([] when they all hold)."""
    bad = []
    for r in rows:
        p, n, sub, st = r["platform"], r["n"], r["sweep_submit"], r["sweep_status"]
        if r["trials"] != n:
            bad.append(f"{p} N={n}: the sweep made {r['trials']} trials")
        if p == "slurm" and sub["calls"] > 3:
            bad.append(f"slurm N={n}: submit --sweep ran {sub['calls']} remote commands (want at most 3)")
        if p == "kubernetes" and (sub["calls"] > 3 or sub["writes"] != 2):
            bad.append(f"kubernetes N={n}: submit --sweep took {sub['calls']} kubectl calls, {sub['writes']} writing "
                       "(want at most 3, two of them writes: the Indexed Job created suspended, then ONE apply of "
                       "its trial table and the Job released)")
        one = r.get("one_submit")
        if one and sub["calls"] > one["calls"]:
            bad.append(f"{p} N={n}: submit --sweep took {sub['calls']} calls, more than one single submit's "
                       f"{one['calls']}")
        # Kubernetes: 1, + ONE logs call saving the trials that ended since the last look
        want = 1 + any(s == "COMPLETE" for s in r.get("before_cancel", [])) if p == "kubernetes" else 2
        if st["calls"] > want:
            bad.append(f"{p} N={n}: status --sweep took {st['calls']} calls (want at most {want})")
        log = r["cancel_log"]
        if set(r["after_cancel"]) - {"CANCELED", "COMPLETE"} or len(r["after_cancel"]) != n:
            bad.append(f"{p} N={n}: after cancel --sweep the trials are {sorted(set(r['after_cancel']))}")
        if p == "slurm":
            stops = sum(1 for a in log if ssh.classify_argv(a) == "command" and ("scancel" in a[-1]))
            if stops > 1 or (n > 1 and "CANCELED" in r["after_cancel"] and stops != 1):
                bad.append(f"slurm N={n}: cancel --sweep ran {stops} remote commands with scancel (want 1)")
        else:
            kube = [a for a in log if Path(a[0]).name == "kubectl"]
            if n > 1 and (len(kube) != 1 or _verb(kube[0]) != "delete"):
                bad.append(f"kubernetes N={n}: cancel --sweep took {len(kube)} kubectl calls "
                           f"({', '.join(_verb(a) for a in kube)}; want one delete of the sweep's Indexed Job)")
    return bad


def use_clusters(platforms: list[str], *, check_only: bool) -> dict[str, str] | None:
    """The clusters' env; a check never starts a cluster (the e2e fixtures do) and says so in one line."""
    env: dict[str, str] = {}
    for p in platforms:
        if p == "slurm":
            from slurm_sweep import use_cluster

            if not use_cluster(check=check_only):
                return None
        else:
            import testclusters.kubernetes as lk

            if not lk.status().get("ready"):
                print("error: the local Kubernetes cluster is not running: python3 scripts/local_cluster.py up "
                      "kubernetes", file=sys.stderr)
                return None
            env.update(lk.env())
    os.environ.update(env)
    os.environ.pop("TAO_K8S_CONTEXT", None)
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platforms", default="slurm,kubernetes")
    ap.add_argument("--sizes", default="10,100")
    ap.add_argument("--baseline-sizes", default=None, help="N of the single-submit baseline per size (default: N)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the call counts hold")
    ap.add_argument("--max-concurrent", type=int, default=None, help="the sweep's K (default: every trial at once)")
    args = ap.parse_args()
    global MAX_CONCURRENT
    MAX_CONCURRENT = args.max_concurrent
    platforms = [p.strip() for p in args.platforms.split(",") if p.strip()]
    if set(platforms) - {"slurm", "kubernetes"}:
        ap.error("--platforms takes slurm and/or kubernetes")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    base = [int(x) for x in args.baseline_sizes.split(",")] if args.baseline_sizes else sizes
    if len(base) != len(sizes):
        ap.error("--baseline-sizes needs one value per --sizes value")
    if use_clusters(platforms, check_only=args.check) is None:
        return 1
    # a private ControlMaster folder (short: a socket path stays under ~104 bytes): this run closes its masters
    # and must never close the one other SLURM users of this machine share
    control = Path(tempfile.mkdtemp(prefix="tao-ssh-sw-", dir="/tmp"))
    os.environ["TAO_SSH_CONTROL_DIR"] = str(control)
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="tao-sweep-bench-") as tmp:
            for p in platforms:
                for n, b in zip(sizes, base):
                    rows.append(one_platform(p, n, b, Path(tmp)))
    finally:
        if "slurm" in platforms:
            ssh.Connection().close()
        shutil.rmtree(control, ignore_errors=True)
    report(rows)
    if args.check:
        from checks import verdict

        return verdict(check(rows), "every sweep count as expected (" + "; ".join(
            f"{r['platform']} N={r['n']}: submit {r['sweep_submit']['calls']}, status {r['sweep_status']['calls']}, "
            f"cancel {r['sweep_cancel']['calls']}" for r in rows) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
