#!/usr/bin/env python3
"""Print each skill's bytes, lines and estimated tokens; exit 1 if a SKILL.md is over its byte limit.

  skill_budget.py [--root DIR] [--json]

Limits: a platform skill (tao-run-on-*) 12,000 bytes, every other skill 6,000
(devtools/skill_budget.py). Tokens are estimated at 4 bytes each. Move details
into references/ (read only when needed) to get under a limit.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The dev tooling lives beside scripts/ (devtools/), outside the runtime package taobank.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from taobank import BANK_ROOT
from taobank.cli.entry import BankParser
from taobank.cli.entry import print_json, run_main
from taobank.errors import TaoError


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    parser = BankParser(prog="skill_budget.py", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=BANK_ROOT, help="bank checkout (default: this bank)")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)

    from devtools.skill_budget import costs

    found = costs(args.root)
    if not found:
        raise TaoError(f"{args.root} has no skills/<skill>/SKILL.md: pass the bank root with --root", exit_code=2)
    if args.json:
        print_json([{**c.__dict__, "over": c.over} for c in found])
    else:
        width = max(len(c.skill) for c in found)
        print(f"{'SKILL':<{width}}  {'BYTES':>6}  {'LIMIT':>6}  {'LINES':>5}  {'~TOKENS':>7}")
        for c in found:
            flag = "  OVER" if c.over else ""
            print(f"{c.skill:<{width}}  {c.bytes:>6}  {c.limit:>6}  {c.lines:>5}  {c.tokens:>7}{flag}")
    over = [c for c in found if c.over]
    for c in over:
        print(f"error: {c.path} is {c.bytes} bytes, over its {c.limit}: move details into references/", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    run_main(main)
