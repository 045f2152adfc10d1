#!/usr/bin/env python3
"""Write every plugin manifest from versions.yaml (name, version) and plugin.json (the rest).

  sync_plugin_manifests.py            stamp plugin.json, write .claude-plugin/*.json,
                                      .codex-plugin/plugin.json, .agents/plugins/marketplace.json
  sync_plugin_manifests.py --check    exit 1 listing every difference, write nothing

plugin.json is the Agent Plugins 1.0.0 manifest (closed schema): edit its
description, author, license or keywords there; edit the name or version in
versions.yaml (bank.name, bank.version) and add a CHANGELOG.md entry.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The dev tooling lives beside scripts/ (devtools/), outside the runtime package taobank.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from devtools.plugin_manifests import differences, write
from taobank import BANK_ROOT
from taobank.cli.entry import BankParser
from taobank.cli.entry import run_main
from taobank.errors import TaoError


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    parser = BankParser(prog="sync_plugin_manifests.py", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report differences (exit 1 if any)")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    diffs = differences(BANK_ROOT)
    if args.check:
        for rel, line, msg in diffs:
            print(f"{rel}:{line}: {msg}")
        return 1 if diffs else 0
    blocking = [d for d in diffs if "run scripts/sync_plugin_manifests.py" not in d[2]]
    if blocking:
        rel, line, msg = blocking[0]
        raise TaoError(f"{rel}:{line}: {msg}")
    for rel in write(BANK_ROOT):
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    run_main(main)
