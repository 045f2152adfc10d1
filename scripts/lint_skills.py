#!/usr/bin/env python3
"""Lint every skills/*/SKILL.md (and its references/), the plugin manifests and the pins.

  lint_skills.py [--root DIR] [--skill NAME]... [--rules] [--json]

Prints one line per problem, 'file:line: rule: message', and exits 1 if
there is any. --rules lists the rules. --root lints another checkout (tests
lint planted copies this way).
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
    parser = BankParser(prog="lint_skills.py", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=BANK_ROOT, help="bank checkout to lint (default: this bank)")
    parser.add_argument("--skill", action="append", metavar="NAME", help="only this skill's per-skill rules (repeatable; bank-wide rules still run)")
    parser.add_argument("--rules", action="store_true", help="print the rules and exit")
    parser.add_argument("--json", action="store_true", help="print problems as JSON")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)

    from devtools.skill_lint import RULES, lint

    if args.rules:
        for rule, text in RULES.items():
            print(f"{rule}: {text}")
        return 0
    if not (args.root / "skills").is_dir():
        raise TaoError(f"{args.root} has no skills/ folder: pass the bank root with --root", exit_code=2)
    problems = lint(args.root, only=args.skill)
    if args.json:
        print_json([p.__dict__ for p in problems])
    else:
        for p in problems:
            print(p)
        if not problems:
            print("lint_skills: all skills pass")
    return 1 if problems else 0


if __name__ == "__main__":
    run_main(main)
