#!/usr/bin/env python3
"""Print the value of a dotted key of versions.yaml (the bank's only pin file).

Exit 1: unknown key (the nearest keys are suggested). Exit 2: no versions.yaml.
"""
from __future__ import annotations

import argparse

from taobank.cli.entry import BankParser
from taobank.cli.entry import print_json, run_main


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    ap = BankParser(
        prog="resolve_versions_key.py",
        description="Print the value of a dotted versions.yaml key, e.g. images.tao_toolkit.pyt. "
        "Scalars print as YAML spells them (true/false, 3.8); a section prints as JSON. "
        "The file is <bank>/versions.yaml or $TAO_VERSIONS_FILE.",
    )
    ap.add_argument("key", nargs="?", help="dotted key, e.g. slurm.defaults.num_gpus")
    ap.add_argument("--json", action="store_true", help="print the value as JSON")
    ap.add_argument("--list", action="store_true", help="print every leaf key with its value")
    return ap


def main(argv: list[str]) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)

    from taobank import pins

    if args.list:
        flat = pins.flatten()
        if args.json:
            print_json(flat)
        else:
            for k, v in flat.items():
                print(f"{k}={pins.format_value(v)}")
        return 0
    if not args.key:
        ap.error("give a KEY (or --list)")
    value = pins.resolve(args.key)
    if args.json:
        print_json(value)
    else:
        print(pins.format_value(value))
    return 0


if __name__ == "__main__":
    run_main(main)
