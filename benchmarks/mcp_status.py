#!/usr/bin/env python3
"""The MCP server's start-up and a `tools/call status` of N jobs, against their baselines in the same run.

Start-up: spawning scripts/tao_mcp.py until its `initialize` answer, next to `python3 -c pass` and to a bare
low-level server of the mcp SDK (plain imports: what any server on the SDK pays), median of --runs. Status (needs the local engine, `scripts/local_cluster.py up docker`; --no-status skips it): N
`sleep` jobs submitted through tao_docker.py, then one `status` through the running server next to one
`tao_jobs.py status --json`, each with its engine calls (TAO_CALL_LOG) and wall time. Every job it starts is
removed. --check: exit 1 unless each status took exactly one engine call, the CLI's and the tool's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BANK / "scripts"), str(BANK)]

from tests.support.mcp_client import INIT, Session  # noqa: E402

HELPER = str(BANK / "scripts" / "tao_docker.py")
JOBS = str(BANK / "scripts" / "tao_jobs.py")


#: The least any server on the SDK pays: a low-level Server that answers initialize, plain imports.
SDK_FLOOR = """
import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

async def serve():
    server = Server("floor", version="1")
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(serve)
"""


def _until_initialized(argv: list[str]) -> float:
    """Seconds from spawning ``argv`` to its answer to ``initialize`` (the process is then closed)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}) + "\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]
    answer = proc.stdout.readline()  # type: ignore[union-attr]
    took = time.perf_counter() - t0
    proc.stdin.close()  # type: ignore[union-attr]
    proc.wait(timeout=30)
    assert '"result"' in answer, answer
    return took


def startup(runs: int) -> tuple[float, float, float]:
    """Median seconds of `python3 -c pass`, of the bare SDK server (:data:`SDK_FLOOR`) and of tao_mcp.py,
    each until its `initialize` answer, interleaved so that the machine's load falls on all three alike."""
    bare, floor, server = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t0)
        floor.append(_until_initialized([sys.executable, "-c", SDK_FLOOR]))
        server.append(_until_initialized([sys.executable, str(BANK / "scripts" / "tao_mcp.py")]))
    return statistics.median(bare), statistics.median(floor), statistics.median(server)


def sh(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(argv[:4])} failed: {proc.stderr.strip()[-300:]}")
    return proc


def engine_calls(log: Path, since: int) -> int:
    lines = log.read_text().splitlines()[since:] if log.exists() else []
    return sum(1 for x in lines if x.strip() and json.loads(x)[:1] == ["docker"])


def log_length(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def status_of(n: int, image: str, env: dict, log: Path) -> tuple[int, float, int, float]:
    """(CLI engine calls, CLI seconds, tool engine calls, tool seconds) for one status of n running jobs."""
    ids = [sh([sys.executable, HELPER, "submit", "--quiet", "--image", image, "--gpus", "0", "--", "sleep", "600"],
              env).stdout.strip() for _ in range(n)]
    try:
        sh([sys.executable, JOBS, "status", "--json"], env)  # the first sweep moves the records to RUNNING
        since = log_length(log)
        t0 = time.perf_counter()
        views = json.loads(sh([sys.executable, JOBS, "status", "--json"], env).stdout)
        cli_s = time.perf_counter() - t0
        cli_calls = engine_calls(log, since)
        with Session(env) as mcp:
            mcp.request("tools/list")  # the server is warm, as it is in an agent's session
            since = log_length(log)
            t0 = time.perf_counter()
            answer = mcp.ok("status")
            tool_s = time.perf_counter() - t0
            tool_calls = engine_calls(log, since)
        assert len(answer) == len(views) == n and all(v["state"] == "RUNNING" for v in answer), answer  # type: ignore[arg-type]
        return cli_calls, cli_s, tool_calls, tool_s
    finally:
        subprocess.run(["docker", "rm", "--force", *ids], env=env, capture_output=True, timeout=300)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="start-ups measured (median)")
    parser.add_argument("--sizes", default="1,20,100", help="jobs per status (comma-separated)")
    parser.add_argument("--no-status", action="store_true", help="only the start-up (no engine needed)")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every status took one engine call")
    args = parser.parse_args()
    bare, floor, server = startup(args.runs)
    print(f"start-up to initialize answered: {server:.2f} s, python3 -c pass {bare:.3f} s: {server / bare:.1f}x; "
          f"a bare mcp SDK server {floor:.2f} s: {server / floor:.2f}x of it (median of {args.runs})", flush=True)
    if args.no_status:
        return 0
    import testclusters.docker as ld

    if not ld.status().get("ready"):
        print("error: the local Docker engine is not running: python3 scripts/local_cluster.py up docker", file=sys.stderr)
        return 1
    bad = []
    print(f"{'N':>4} {'cli calls':>10} {'cli s':>7} {'tool calls':>11} {'tool s':>7} {'cli/tool':>9}")
    for n in (int(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "calls.jsonl"
            env = {**os.environ, **ld.env(), "TAO_STATE_DIR": f"{tmp}/state", "TAO_DOCKER_RESULTS_DIR": tmp,
                   "TAO_CALL_LOG": str(log)}
            cli_calls, cli_s, tool_calls, tool_s = status_of(n, ld.IMAGE, env, log)
        print(f"{n:>4} {cli_calls:>10} {cli_s:>7.2f} {tool_calls:>11} {tool_s:>7.2f} {cli_s / tool_s:>8.2f}x", flush=True)
        if (cli_calls, tool_calls) != (1, 1):
            bad.append(f"N={n}: {cli_calls} CLI and {tool_calls} tool engine calls")
    if args.check and bad:
        print("error: a status must take one engine call: " + "; ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
