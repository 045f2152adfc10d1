#!/usr/bin/env python3
"""Lint files for inline credentials, or print text with secret values masked.

  redact_secrets.py lint FILE...   exit 1 naming rule and file:line (never the value)
  redact_secrets.py redact [FILE]  print FILE (or stdin) with values masked
  redact_secrets.py rules          list the rule names

Allow a reviewed line with a marker on it: '# lint-ok: RULE REASON'.
"""
from __future__ import annotations

import argparse
import sys

from taobank import fsio
from taobank.cli.entry import BankParser
from taobank.cli.entry import print_json, run_main
from taobank.errors import TaoError


#: Largest input: manifests, scripts and saved logs are far smaller (a device or FIFO is never read).
MAX_BYTES = 64 * 1024 * 1024


def _read(path: str) -> str:
    if path == "-":
        text = sys.stdin.read(MAX_BYTES + 1)
        if len(text) > MAX_BYTES:
            raise TaoError(f"stdin is larger than {MAX_BYTES} bytes: lint it in parts", exit_code=2)
        return text
    data = fsio.read_regular(path, "file", max_bytes=MAX_BYTES) or b""
    return data.decode("utf-8", errors="replace")


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    ap = BankParser(prog="redact_secrets.py", description=__doc__.split("\n\n")[0],
                    epilog="A line is allowed by a marker naming the rule and a reason, e.g. "
                    "'# lint-ok: credential-assignment fixed password of the local test cluster'; "
                    "lint lists every allowance it honoured.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("lint", help="check files (- for stdin) for inline credentials")
    p.add_argument("files", nargs="+")
    p.add_argument("--json", action="store_true", help="print findings as JSON")
    p = sub.add_parser("redact", help="print the input with every secret value masked")
    p.add_argument("file", nargs="?", default="-")
    p = sub.add_parser("rules", help="list the lint rules")
    p.add_argument("--json", action="store_true")
    return ap


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)

    from taobank import redact

    if args.cmd == "rules":
        rules = [{"name": r.name, "description": r.description} for r in redact.RULES]
        if args.json:
            print_json(rules)
        else:
            for r in rules:
                print(f"{r['name']}: {r['description']}")
        return 0
    if args.cmd == "redact":
        sys.stdout.write(redact.redact_text(_read(args.file)))
        return 0
    findings = []
    for path in args.files:
        findings.extend(redact.scan(_read(path), "<stdin>" if path == "-" else path))
    bad = [f for f in findings if f.allowed is None]
    if args.json:
        print_json([f.to_dict() for f in findings])
    else:
        for f in findings:
            print(f)
    if bad:
        print(f"error: {len(bad)} inline credential finding(s): use a reference ($VAR, valueFrom/secretRef, "
              "a file of mode 600) or mark a reviewed line '# lint-ok: RULE REASON'", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    run_main(main)
