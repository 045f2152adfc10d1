#!/usr/bin/env python3
"""SLURM skill load figures: SSH connections and remote commands per submit and
per status sweep, and wall time, for N = 1, 10, 100 jobs on the local cluster.

  python3 benchmarks/slurm_sweep.py [--sizes 1,10,100] [--cli-sizes 1,10]

Counts come from the bank's own call log (taobank.run.CALLS: every ssh argv)
classified by taobank.slurm.ssh.classify_argv: "connect" = a new SSH
connection (ControlMaster opened), "command" = one remote command over it,
"control" = local ``ssh -O check``/``-G`` calls that open no connection.
Prints figures; asserts nothing (tests assert behaviour).
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
sys.path.insert(0, str(BANK / "scripts"))

from taobank import run as runmod  # noqa: E402
from taobank.local import slurm as local_slurm  # noqa: E402
from taobank.slurm import ssh, verbs  # noqa: E402

SPEC = {"network_arch": "bench", "action": "noop", "num_gpus": 0, "cpus_per_task": 1, "time_hours": 0.25,
        "command": ["true"]}


def counts(calls: list[list[str]]) -> dict[str, int]:
    out = {"connect": 0, "command": 0, "control": 0}
    for argv in calls:
        kind = ssh.classify_argv(argv)
        if kind in out:
            out[kind] += 1
    return out


def in_process(n: int) -> dict:
    conn = ssh.Connection()
    conn.close()  # start cold: the first submit opens the one connection
    conn = ssh.Connection()
    start = len(runmod.CALLS)
    opened0 = ssh.STATS["connections"]
    t0 = time.perf_counter()
    ids = [verbs.submit(SPEC, conn=conn)["id"] for _ in range(n)]
    opened = ssh.STATS["connections"] - opened0
    t_submit = time.perf_counter() - t0
    sub = counts(runmod.CALLS[start:])
    time.sleep(2)
    start = len(runmod.CALLS)
    t0 = time.perf_counter()
    recs = verbs.status(ids, conn=conn, retry=False)
    t_status = time.perf_counter() - t0
    st = counts(runmod.CALLS[start:])
    done = sum(r["state"] == "COMPLETE" for r in recs)
    return {"n": n, "submit_connect_attempts": sub["connect"], "submit_connections": opened,
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
    return {"n": n, "submit_connect_attempts": sub["connect"], "submit_connections": "-",
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,10,100")
    ap.add_argument("--cli-sizes", default="1,10")
    args = ap.parse_args()
    for key, value in local_slurm.up().items():
        os.environ[key] = value
    with tempfile.TemporaryDirectory(prefix="tao-slurm-bench-") as tmp:
        os.environ["TAO_STATE_DIR"] = str(Path(tmp) / "state")
        rows = [in_process(int(n)) for n in args.sizes.split(",") if n]
        table("in-process verbs (one Connection object)", rows)
        crow = [cli(int(n), Path(tmp)) for n in args.cli_sizes.split(",") if n]
        table("CLI, one process per verb (ControlPersist master shared)", crow)
    print("\nconnect_attempts = ssh connection attempts (the local cluster lists a refusing address first, so a fresh\n"
          "state dir pays one refused attempt before the working host is remembered); connections = SSH connections\n"
          "opened (ControlMaster); commands = remote commands over it (a submit: test -e preflight, stage, sbatch);\n"
          "status = one remote command holding exactly one squeue and one sacct for all N jobs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
