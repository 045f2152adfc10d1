#!/usr/bin/env python3
"""Start, stop and inspect the local clusters (Docker, Kubernetes, SLURM).

  local_cluster.py up kubernetes|slurm     start (idempotent), wait for readiness
  local_cluster.py down kubernetes|slurm   stop every process it started, by PID
  local_cluster.py status kubernetes|slurm [--json]
  local_cluster.py env kubernetes|slurm    print export lines for a skill user
"""
from __future__ import annotations

import argparse
import importlib
import shlex
import sys
from pathlib import Path

# The clusters are test infrastructure kept beside scripts/ (testclusters/), not in taobank.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from taobank.cli.entry import BankParser
from taobank.cli.entry import print_json, run_main
from testclusters import PLATFORMS


def _module(platform: str):
    return importlib.import_module(f"testclusters.{platform}")


def _print_env(env: dict[str, str]) -> None:
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    parser = BankParser(prog="local_cluster.py", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["up", "down", "status", "env"])
    parser.add_argument("platform", choices=PLATFORMS + ("k8s",))
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    mod = _module("kubernetes" if args.platform == "k8s" else args.platform)
    if args.action == "up":
        env = mod.up()
        if args.json:
            print_json(env)
        else:
            _print_env(env)
    elif args.action == "down":
        mod.down()
    elif args.action == "env":
        env = mod.env()
        print_json(env) if args.json else _print_env(env)
    else:
        st = mod.status()
        if args.json:
            print_json(st)
        else:
            for key, value in st.items():
                print(f"{key}: {value}")
        return 0 if st.get("ready") else 1
    return 0


if __name__ == "__main__":
    run_main(main)
