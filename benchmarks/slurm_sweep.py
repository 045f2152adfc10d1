#!/usr/bin/env python3
"""SLURM skill load figures: SSH connections and remote commands per submit and
per status sweep, and wall time, for N = 1, 10, 100 jobs on the local cluster.

  python3 benchmarks/slurm_sweep.py [--sizes 1,10,100] [--cli-sizes 1,10] [--no-naive-submit]

The default sizes take about 5 minutes on the local cluster (the naive baseline
at N=100 is ~500 ssh sessions); every job runs `true` and is scancel-ed at the end.

Counts come from the bank's own call log (taobank.run.CALLS: every ssh argv)
classified by taobank.platforms.slurm.ssh.classify_argv: "connect" = a new SSH
connection (ControlMaster opened), "command" = one remote command over it,
"control" = local ``ssh -O check``/``-G`` calls that open no connection.

Baseline, measured in the same run on the same jobs: the naive way peers did
it (see shared pitfalls): a new SSH session per remote command
(``ControlMaster=no``, ``ControlPath=none``; every other option -- host, key,
known_hosts, ssh_config -- taken from the bank's own ``Connection.options``)
and, for the sweep, one ``squeue -h -j ID`` plus one ``sacct -j ID`` per job.
Figures are printed as ratios naive/bank.

--check (CI: tests/e2e/slurm/test_benchmark_slurm_sweep.py, at a small N) exits 1
unless the counts hold: in-process, N submits open ONE SSH connection (after at
most one attempt per listed login host) and make SUBMIT_COMMANDS remote commands
each, and a status sweep from a closed master opens one connection and runs one
command; the CLI (one process per verb) connects once for all its submits (the
ControlPersist master is shared; no attempt at all once the host is remembered),
and its status sweep reuses that master (no connect) for one command; the naive
baseline made 2 x N sessions, none failing in ssh. Times are never asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BANK / "scripts"), str(BANK), str(BANK / "benchmarks")]  # taobank, testclusters, checks.py

from taobank import records  # noqa: E402
from taobank import run as runmod  # noqa: E402
from testclusters import slurm as local_slurm  # noqa: E402
from taobank.platforms.slurm import ssh  # noqa: E402
from taobank.core import platform  # noqa: E402
from taobank.platforms.slurm import submit as slurm_submit  # noqa: E402

#: remote commands of one submit of SPEC: the preflight (paths, and the partition's node sizes before a record opens),
#: stage, find by name (a lost sbatch answer is never resubmitted), sbatch
SUBMIT_COMMANDS = 4
SPEC = {"network_arch": "bench", "action": "noop", "num_gpus": 0, "cpus_per_task": 1, "time_hours": 0.25,
        "command": ["true"]}


def counts(calls: list[list[str]]) -> dict[str, int]:
    out = {"connect": 0, "command": 0, "control": 0}
    for argv in calls:
        kind = ssh.classify_argv(argv)
        if kind in out:
            out[kind] += 1
    return out


_CONTROL_OPTS = ("ControlMaster=", "ControlPath=", "ControlPersist=")


def plain_options(opts: list[str]) -> list[str]:
    """The bank's ssh options with its multiplexing removed: one new session per call."""
    out: list[str] = []
    i = 0
    while i < len(opts):
        if opts[i] == "-o" and i + 1 < len(opts) and opts[i + 1].startswith(_CONTROL_OPTS):
            i += 2
            continue
        out.append(opts[i])
        i += 1
    return out + ["-o", "ControlMaster=no", "-o", "ControlPath=none"]


class NaiveConnection(ssh.Connection):
    """Same hosts/key/known_hosts/config as the bank, but no shared master (baseline only)."""

    def options(self, host: ssh.Host) -> list[str]:
        return plain_options(super().options(host))


def naive_sweep(conn: ssh.Connection, slurm_ids: list[str]) -> dict:
    """One squeue and one sacct per job, each over its own new SSH session."""
    host = conn.connect()  # the login host the bank found (no failover cost charged to the baseline)
    base = plain_options(conn.options(host)) + ["--", host.host]
    calls = failed = 0
    t0 = time.perf_counter()
    for jid in slurm_ids:
        for cmd in (["squeue", "-h", "-j", jid], ["sacct", "-j", jid]):
            res = runmod.run(base + [shlex.join(cmd)], check=False, timeout=60, what="naive " + cmd[0])
            calls += 1
            failed += res.returncode == 255  # ssh itself failed: the figure would be wrong
    wall = time.perf_counter() - t0
    return {"connections": calls, "commands": calls, "wall_s": wall, "ssh_failures": failed}


def naive_submit(n: int) -> dict:
    """The bank's submit verb over a connection that opens a new session per remote command."""
    conn = NaiveConnection()
    start = len(runmod.CALLS)
    t0 = time.perf_counter()
    recs = [slurm_submit.submit(SPEC, conn=conn) for _ in range(n)]
    wall = time.perf_counter() - t0
    c = counts(runmod.CALLS[start:])
    sids = [r["backend"]["slurm_job_id"] for r in recs]
    # every non-control ssh call is its own session: the connect probe and each command
    return {"connections": c["connect"] + c["command"], "commands": c["command"], "wall_s": wall, "slurm_ids": sids}


def in_process(n: int) -> dict:
    conn = ssh.Connection()
    conn.close()  # start cold: the first submit opens the one connection
    conn = ssh.Connection()
    start = len(runmod.CALLS)
    opened0 = ssh.STATS["connections"]
    t0 = time.perf_counter()
    ids = [slurm_submit.submit(SPEC, conn=conn)["id"] for _ in range(n)]
    opened = ssh.STATS["connections"] - opened0
    t_submit = time.perf_counter() - t0
    sub = counts(runmod.CALLS[start:])
    time.sleep(2)
    conn.close()  # sweep from cold too: the bank pays for opening its one connection, like the baseline
    start = len(runmod.CALLS)
    t0 = time.perf_counter()
    views = platform.refresh([records.load(i) for i in ids], retry=False)  # the core opens its one connection
    t_status = time.perf_counter() - t0
    st = counts(runmod.CALLS[start:])
    done = sum(v.state == "COMPLETE" for v in views)
    sids = [records.load(v.id)["backend"]["slurm_job_id"] for v in views]
    return {"slurm_ids": sids, "submit_commands": sub["command"], "submit_wall_s": t_submit,
            "submit_new_sessions": sub["connect"], "n": n, "submit_connect_attempts": sub["connect"], "submit_connections": opened,
            "submit_commands_per_job": sub["command"] / n,
            "submit_wall_s_per_job": t_submit / n, "status_connections": st["connect"],
            "status_commands": st["command"], "status_wall_s": t_status, "complete_after_sweep": done}


def cli(n: int, tmp: Path) -> dict:
    """Separate processes (what an agent runs): the ControlPersist master is shared across them."""
    spec = tmp / "bench.json"
    spec.write_text(json.dumps(SPEC))
    log = tmp / f"calls-{n}.jsonl"
    env = dict(os.environ, TAO_CALL_LOG=str(log))
    ssh.Connection().close()
    exe = [sys.executable, str(BANK / "scripts" / "tao_slurm.py")]
    t0 = time.perf_counter()
    ids = []
    for _ in range(n):
        out = subprocess.run(exe + ["submit", "--spec", str(spec), "--json"], env=env, capture_output=True, text=True,
                             check=True)
        ids.append(json.loads(out.stdout)["id"])
    t_submit = time.perf_counter() - t0
    sub = counts([json.loads(x) for x in log.read_text().splitlines()])
    log.write_text("")
    t0 = time.perf_counter()
    subprocess.run(exe + ["status", *ids, "--json"], env=env, capture_output=True, text=True, check=True)
    t_status = time.perf_counter() - t0
    st = counts([json.loads(x) for x in log.read_text().splitlines()])
    return {"slurm_ids": [r["backend"]["slurm_job_id"] for r in (records.load(i) for i in ids)],
            "n": n, "submit_connect_attempts": sub["connect"], "submit_connections": "-",
            "submit_commands_per_job": sub["command"] / n,
            "submit_wall_s_per_job": t_submit / n, "status_connections": st["connect"],
            "status_commands": st["command"], "status_wall_s": t_status}


def table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    cols = ["n", "submit_connect_attempts", "submit_connections", "submit_commands_per_job", "submit_wall_s_per_job",
            "status_connections", "status_commands", "status_wall_s"]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols))


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b else "-"


def compare(title: str, rows: list[tuple[int, dict, dict]]) -> None:
    print(f"\n{title}")
    cols = ["n", "bank_conn", "bank_cmds", "bank_wall_s", "naive_conn", "naive_cmds", "naive_wall_s",
            "conn_ratio", "cmds_ratio", "wall_ratio"]
    print(" | ".join(cols))
    for n, b, v in rows:
        print(" | ".join([str(n), str(b["connections"]), str(b["commands"]), f"{b['wall_s']:.2f}",
                          str(v["connections"]), str(v["commands"]), f"{v['wall_s']:.2f}",
                          ratio(v["connections"], b["connections"]), ratio(v["commands"], b["commands"]),
                          ratio(v["wall_s"], b["wall_s"])]))


def check(rows: list[dict], sweeps: list[tuple[int, dict, dict]], crow: list[dict], hosts: int) -> list[str]:
    """What the counts of a run say against the claims above ([] when they all hold)."""
    bad = []
    for r in rows:
        n = r["n"]
        if r["submit_connections"] != 1:
            bad.append(f"in-process, {n} submits opened {r['submit_connections']} SSH connections (want 1)")
        if not 1 <= r["submit_connect_attempts"] <= hosts:
            bad.append(f"in-process, {n} submits made {r['submit_connect_attempts']} connect attempts "
                       f"(want 1 to {hosts}, one per listed host at most)")
        if r["submit_commands"] != SUBMIT_COMMANDS * n:
            bad.append(f"in-process, {n} submits ran {r['submit_commands']} remote commands "
                       f"(want {SUBMIT_COMMANDS} each)")
        if (r["status_connections"], r["status_commands"]) != (1, 1):
            bad.append(f"in-process status of {n} jobs: {r['status_connections']} connections, "
                       f"{r['status_commands']} commands (want 1 and 1)")
    for n, _, naive in sweeps:
        if naive["ssh_failures"] or naive["connections"] != 2 * n:
            bad.append(f"naive sweep of {n} jobs: {naive['connections']} sessions, {naive['ssh_failures']} failed in ssh "
                       f"(want {2 * n}, none failed)")
    for r in crow:
        n, first = r["n"], (1 if rows else hosts)  # after the in-process rows the working host is remembered
        if not 1 <= r["submit_connect_attempts"] <= first:
            bad.append(f"CLI, {n} submits (one process each) made {r['submit_connect_attempts']} connect attempts "
                       f"(want {'1' if first == 1 else f'1 to {first}'}: later processes reuse the master)")
        if r["submit_commands_per_job"] != SUBMIT_COMMANDS:
            bad.append(f"CLI submits ran {r['submit_commands_per_job']:g} remote commands each (want {SUBMIT_COMMANDS})")
        if (r["status_connections"], r["status_commands"]) != (0, 1):
            bad.append(f"CLI status of {n} jobs: {r['status_connections']} connect attempts, "
                       f"{r['status_commands']} commands (want 0 and 1: the master persists)")
    return bad


def cleanup(slurm_ids: list[str]) -> None:
    """scancel whatever is still queued (the jobs run ``true``; most have ended already)."""
    if not slurm_ids:
        return
    conn = ssh.Connection()
    for i in range(0, len(slurm_ids), 200):
        conn.remote(["scancel", *slurm_ids[i:i + 200]], check=False, what="scancel")
    left = conn.remote(["squeue", "-h", "-u", conn.user or "", "-o", "%i", "-j", ",".join(slurm_ids)], check=False,
                       what="squeue").stdout.split()
    print(f"\ncleanup: scancel {len(slurm_ids)} jobs; still queued afterwards: {len(left)}")


def use_cluster(*, check: bool) -> bool:
    """The local SLURM cluster's settings in os.environ; a check (CI: the e2e fixtures run the cluster) never
    starts it and says so in one line when it is not ready."""
    if check:
        st = local_slurm.status()
        if not st["ready"]:
            print(f"error: the local SLURM cluster is not ready ({st.get('problem')}): "
                  "python3 scripts/local_cluster.py up slurm", file=sys.stderr)
            return False
    os.environ.update(local_slurm.env() if check else local_slurm.up())
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,10,100")
    ap.add_argument("--cli-sizes", default="1,10")
    ap.add_argument("--no-naive-submit", action="store_true", help="skip the naive submit baseline (sweep only)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the connection and command counts hold")
    args = ap.parse_args()
    if not use_cluster(check=args.check):
        return 1
    with tempfile.TemporaryDirectory(prefix="tao-slurm-bench-") as tmp:
        os.environ["TAO_STATE_DIR"] = str(Path(tmp) / "state")
        all_ids: list[str] = []
        rows, sweeps, submits = [], [], []
        try:
            for n in (int(x) for x in args.sizes.split(",") if x):
                row = in_process(n)
                all_ids += row["slurm_ids"]
                rows.append(row)
                conn = ssh.Connection()
                naive = naive_sweep(conn, row["slurm_ids"])
                if naive["ssh_failures"]:
                    print(f"WARNING: {naive['ssh_failures']} naive ssh calls failed at n={n}", file=sys.stderr)
                sweeps.append((n, {"connections": row["status_connections"], "commands": row["status_commands"],
                                   "wall_s": row["status_wall_s"]}, naive))
                if not args.no_naive_submit:
                    nsub = naive_submit(n)
                    all_ids += nsub["slurm_ids"]
                    submits.append((n, {"connections": row["submit_connections"], "commands": row["submit_commands"],
                                        "wall_s": row["submit_wall_s"]}, nsub))
            table("in-process verbs (one Connection object)", rows)
            compare("status sweep of N jobs: bank (one command: one squeue + one sacct for all) vs naive "
                    "(squeue -h -j ID + sacct -j ID per job, new SSH session each); ratios = naive/bank", sweeps)
            if submits:
                compare("submit of N jobs: bank (one ControlMaster connection for all) vs naive (same submit verb, "
                        "new SSH session per remote command); ratios = naive/bank", submits)
            crow = [cli(int(n), Path(tmp)) for n in args.cli_sizes.split(",") if n]
            all_ids += [i for r in crow for i in r["slurm_ids"]]
            table("CLI, one process per verb (ControlPersist master shared)", crow)
        finally:
            cleanup(all_ids)
    print("\nconnect_attempts = ssh connection attempts (the local cluster lists a refusing address first, so a fresh\n"
          "state dir pays one refused attempt before the working host is remembered); connections = SSH connections\n"
          "opened (ControlMaster); commands = remote commands over it (a submit: test -e preflight, stage, sbatch);\n"
          "status = one remote command holding exactly one squeue and one sacct for all N jobs, measured from a\n"
          "closed master (bank_conn 1 = the connection it opens). Naive = the same options without multiplexing,\n"
          "run right after the bank on the same jobs and login host; ratios = naive/bank.")
    if args.check:
        from checks import verdict

        return verdict(check(rows, sweeps, crow, len(ssh.Connection().hosts)),
                       f"every SSH count as expected (in-process N = {', '.join(str(r['n']) for r in rows)}; "
                       f"CLI N = {', '.join(str(r['n']) for r in crow)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
