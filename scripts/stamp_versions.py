#!/usr/bin/env python3
"""Rewrite literal pins marked '# versions-key: KEY' from versions.yaml (or --check them)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The dev tooling lives beside scripts/ (devtools/), outside the runtime package taobank.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from devtools.stamp import DEFAULT_PATHS, RULE
from taobank.cli.entry import BankParser
from taobank.cli.entry import print_json, run_main


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    ap = BankParser(
        prog="stamp_versions.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A line holding a copied pin carries a marker comment '# versions-key: KEY' "
        "(or '// versions-key: KEY', '<!-- versions-key: KEY -->'). This tool sets the pin "
        "literal on each such line to versions.yaml's value; --check only lists drifted lines "
        "as 'file:line KEY expected ... found ...' and exits 1 if there is any.\n\n" + RULE,
    )
    ap.add_argument("paths", nargs="*", help=f"files or folders (default: {' '.join(DEFAULT_PATHS)})")
    ap.add_argument("--check", action="store_true", help="report drift, change nothing, exit 1 on drift")
    ap.add_argument("--json", action="store_true", help="print the drift list as JSON")
    return ap


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)

    from devtools.stamp import stamp

    drifts = stamp(args.paths or DEFAULT_PATHS, check=args.check)
    if args.json:
        print_json([d.__dict__ for d in drifts])
    else:
        for d in drifts:
            print(("drift: " if args.check or d.problem else "stamped: ") + str(d))
    unfixable = [d for d in drifts if d.problem]
    if args.check and drifts or unfixable:
        return 1
    return 0


if __name__ == "__main__":
    run_main(main)
