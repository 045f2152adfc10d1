#!/usr/bin/env python3
"""Rewrite the Claude Code and Codex plugin manifests from plugin.json and skills/.

  sync_plugin_manifests.py            write .claude-plugin/*.json, .codex-plugin/plugin.json
                                      and plugin.json's "skills" list
  sync_plugin_manifests.py --check    exit 1 listing every difference, write nothing

plugin.json at the bank root is the source of truth (name, version,
description, license); its version must equal versions.yaml bank.version.
"""
from __future__ import annotations

import argparse

from taobank import BANK_ROOT, pins
from taobank.cli import run_main
from taobank.errors import TaoError
from taobank.plugin_manifests import differences, load_json, write


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="sync_plugin_manifests.py", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report differences (exit 1 if any)")
    args = parser.parse_args(argv)
    if args.check:
        diffs = differences(BANK_ROOT)
        for rel, msg in diffs:
            print(f"{rel}:1: {msg}")
        return 1 if diffs else 0
    version = str(pins.resolve("bank.version"))
    have = load_json(BANK_ROOT / "plugin.json").get("version")
    if have != version:
        raise TaoError(f"plugin.json version {have!r} differs from versions.yaml bank.version {version!r}: edit plugin.json")
    for rel in write(BANK_ROOT):
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    run_main(main)
