#!/usr/bin/env python3
"""The secret lint against its corpus: caught / missed / false positives, and whether redaction holds.

tests/fixtures/secret_corpus/ holds texts with fake credentials (secrets.yaml) and
clean texts, the bank's own files among them (clean.yaml). Prints, for the current
rules and (with --baseline REV) for the rules of another git revision in the same run:

  caught      secret texts with at least one finding
  redacted    secret texts whose planted values are all gone after redact
  relint      secret texts whose redacted form lints clean (redact removes what lint flags)
  false pos.  clean texts with a finding

--list prints the ids of the missed and false-positive texts (never their values).
--store writes the figures to figures.json (what tests/unit/test_secret_corpus.py holds as the floor).
Usage: python3 benchmarks/secret_lint_corpus.py [--baseline e24a604] [--list] [--store]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import types
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
CORPUS = BANK / "tests" / "fixtures" / "secret_corpus"
sys.path.insert(0, str(BANK / "scripts"))
sys.path.insert(0, str(CORPUS))

from generate import load  # noqa: E402
from taobank import redact  # noqa: E402


def corpus() -> tuple[list[dict], list[dict]]:
    """(secret entries, clean entries) with the bank files read in."""
    clean = []
    for e in load("clean.yaml"):
        if "file" in e:
            e = {"id": e["id"], "text": (BANK / e["file"]).read_text(encoding="utf-8")}
        clean.append(e)
    return load("secrets.yaml"), clean


def figures(mod, secrets: list[dict], clean: list[dict]) -> dict:
    """The corpus figures of one redact module."""
    missed, not_redacted, relint, fps = [], [], [], []
    for e in secrets:
        if not mod.lint_text(e["text"], e["id"]):
            missed.append(e["id"])
        red = mod.redact_text(e["text"])
        if any(s in red for s in e["secrets"]):
            not_redacted.append(e["id"])
        if mod.lint_text(red, e["id"]):
            relint.append(e["id"])
    for e in clean:
        if mod.lint_text(e["text"], e["id"]):
            fps.append(e["id"])
    n, c = len(secrets), len(clean)
    return {"secrets": n, "clean": c, "caught": n - len(missed), "missed": len(missed),
            "redacted": n - len(not_redacted), "relint_clean": n - len(relint), "false_positives": len(fps),
            "missed_ids": missed, "not_redacted_ids": not_redacted, "relint_ids": relint, "false_positive_ids": fps}


def baseline(rev: str):
    """The redact module of git revision ``rev``, loaded beside the current one."""
    src = subprocess.run(["git", "-C", str(BANK), "show", f"{rev}:scripts/taobank/redact.py"], capture_output=True,
                         text=True, check=True).stdout
    mod = types.ModuleType(f"redact_{rev}")
    mod.__dict__["__name__"] = mod.__name__
    sys.modules[mod.__name__] = mod  # dataclasses look the module up
    exec(compile(src, f"{rev}:redact.py", "exec"), mod.__dict__)
    return mod


def _row(label: str, f: dict) -> str:
    n, c = f["secrets"], f["clean"]
    return (f"{label:<10} caught {f['caught']}/{n} ({100 * f['caught'] / n:.1f}%)  missed {f['missed']}  "
            f"redacted {f['redacted']}/{n}  relint-clean {f['relint_clean']}/{n}  "
            f"false positives {f['false_positives']}/{c} ({100 * f['false_positives'] / c:.1f}%)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", metavar="REV", help="also measure the rules of this git revision")
    ap.add_argument("--list", action="store_true", help="print the ids of missed / false-positive texts")
    ap.add_argument("--store", action="store_true", help="write the current figures to figures.json")
    args = ap.parse_args()
    secrets, clean = corpus()
    now = figures(redact, secrets, clean)
    if args.baseline:
        print(_row(args.baseline, figures(baseline(args.baseline), secrets, clean)))
    print(_row("current", now))
    if args.list:
        for key in ("missed_ids", "not_redacted_ids", "relint_ids", "false_positive_ids"):
            print(f"{key}: {' '.join(now[key]) or '-'}")
    if args.store:
        keep = {k: v for k, v in now.items() if not k.endswith("_ids")}
        (CORPUS / "figures.json").write_text(json.dumps(keep, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"stored in {CORPUS / 'figures.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
