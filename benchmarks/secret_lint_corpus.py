#!/usr/bin/env python3
"""The secret lint against its corpora: caught / missed / false positives, and whether redaction holds.

tests/fixtures/secret_corpus/ holds texts with fake credentials (secrets.yaml) and
clean texts, the bank's own files among them (clean.yaml). Prints, for the current
rules and (with --baseline REV) for the rules of another git revision in the same run:

  caught      secret texts with at least one finding
  redacted    secret texts whose planted values are all gone after redact
  relint      secret texts whose redacted form lints clean (redact removes what lint flags)
  false pos.  clean texts with a finding

The placement corpus (tests/fixtures/secret_corpus/placements.py, built in memory) writes
~70 distinct secrets in every YAML, shell, JSON and sbatch style they turn up in (plain,
quoted, folded, literal, anchored, tagged, flow, env list, flags, exports, Secret and
ConfigMap data...), and non-secrets -- digests, ids, paths, versions, tokenizer entries,
references -- the same ways. For it this prints recall, false positives, "leaked" (flagged
texts in which redact left a 6+ character piece of a secret value visible) and "objects"
(YAML/JSON texts that lint_objects, the submit-time lint, flags once parsed).

--list prints the ids of the missed and false-positive texts (never their values).
--store writes the figures to figures.json (what tests/unit/test_secret_corpus.py holds as the floor).
--sample K reads every K-th text of each corpus (CI runs a small N).
--check exits 1 when the figures fall below figures.json: caught, redacted, relint-clean, placements caught
and objects no lower, false positives and leaks no higher; on a sample, its misses, leaks and false
positives no more than the whole corpus may have. Counts only, never times.
Usage: python3 benchmarks/secret_lint_corpus.py [--baseline e24a604] [--list] [--store] [--sample K] [--check]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
CORPUS = BANK / "tests" / "fixtures" / "secret_corpus"
sys.path.insert(0, str(BANK / "scripts"))
sys.path.insert(0, str(CORPUS))
sys.path.insert(0, str(BANK / "benchmarks"))  # checks.py

import placements  # noqa: E402
import yaml  # noqa: E402
from generate import load  # noqa: E402
from taobank import redact  # noqa: E402

#: placements whose text is YAML or JSON (what the Kubernetes submit lints as objects once parsed)
_OBJECT_STYLES = tuple(k for k in placements.PLACEMENTS if k.startswith(("yaml-", "k8s-", "json", "compose-")))


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


def _published(mod) -> set[str]:
    """6-character pieces of what the rules publish anyway (``github_pat_``, ``PRIVATE KEY``): no part of a secret."""
    text = " ".join(r.description + " " + " ".join(r.patterns) for r in mod.RULES)
    return {text[i:i + 6] for i in range(len(text) - 5)}


def leaked_pieces(hidden: list[str], text: str, published: set[str]) -> list[str]:
    """The 6+ character pieces of the ``hidden`` values still visible in ``text``."""
    return [h[i:i + 6] for h in hidden for i in range(len(h) - 5) if h[i:i + 6] in text and h[i:i + 6] not in published]


def _lints_as_objects(mod, text: str) -> bool:
    try:
        objs = [o for o in yaml.safe_load_all(text) if o is not None]
    except yaml.YAMLError:
        return False
    return bool(mod.lint_objects(objs, "objects"))


def placement_figures(mod, sample: int = 1) -> dict:
    """The placement-corpus figures of one redact module (of every ``sample``-th text)."""
    secrets, clean = placements.secret_entries()[::sample], placements.clean_entries()[::sample]
    published = _published(mod)
    missed, leaked, not_objects, fps = [], [], [], []
    objects = 0
    for e in secrets:
        if not mod.lint_text(e.text, e.id):
            missed.append(e.id)
        elif leaked_pieces(e.sensitive, mod.redact_text(e.text), published):
            leaked.append(e.id)
        if e.style in _OBJECT_STYLES:
            objects += 1
            if not _lints_as_objects(mod, e.text):
                not_objects.append(e.id)
    fps = [e.id for e in clean if mod.lint_text(e.text, e.id)]
    n, c = len(secrets), len(clean)
    return {"secrets": n, "distinct_secrets": len(placements.secrets()), "styles": len(placements.PLACEMENTS),
            "clean": c, "caught": n - len(missed), "missed": len(missed), "recall": round((n - len(missed)) / n, 4),
            "leaked": len(leaked), "false_positives": len(fps), "false_positive_rate": round(len(fps) / c, 4),
            "objects": objects, "objects_caught": objects - len(not_objects),
            "missed_ids": missed, "leaked_ids": leaked, "false_positive_ids": fps, "not_objects_ids": not_objects}


def baseline(rev: str):
    """The redact module of git revision ``rev``, loaded beside the current one: the package of that revision is
    unpacked under a name of its own (the rules span several modules since taobank.secrets)."""
    import importlib
    import io
    import re
    import tarfile
    import tempfile

    tar = subprocess.run(["git", "-C", str(BANK), "archive", rev, "scripts/taobank"], capture_output=True,
                         check=True).stdout
    root = Path(tempfile.mkdtemp(prefix="redact-baseline-"))
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(root)  # our own repository's files
    name = "taobank_" + re.sub(r"\W", "_", rev)
    (root / "scripts" / "taobank").rename(root / name)
    sys.path.insert(0, str(root))
    return importlib.import_module(f"{name}.redact")


def regressions(now: dict, placed: dict, stored: dict) -> list[str]:
    """How ``now`` and ``placed`` (figures, maybe of a sample) fall below the ``stored`` floor; [] when they do not."""
    sp = stored["placements"]
    whole = now["secrets"] >= stored["secrets"] and now["clean"] >= stored["clean"]
    if whole:  # the whole corpus: what the floor says, count for count
        pairs = [("caught", now["caught"] >= stored["caught"], now["missed_ids"]),
                 ("redacted", now["redacted"] >= stored["redacted"], now["not_redacted_ids"]),
                 ("relint_clean", now["relint_clean"] >= stored["relint_clean"], now["relint_ids"])]
    else:  # a sample may not miss more than the whole corpus may
        pairs = [("caught", now["missed"] <= stored["secrets"] - stored["caught"], now["missed_ids"]),
                 ("redacted", now["secrets"] - now["redacted"] <= stored["secrets"] - stored["redacted"],
                  now["not_redacted_ids"]),
                 ("relint_clean", now["secrets"] - now["relint_clean"] <= stored["secrets"] - stored["relint_clean"],
                  now["relint_ids"])]
    pairs.append(("false_positives", now["false_positives"] <= stored["false_positives"], now["false_positive_ids"]))
    pairs += [("placements caught", placed["missed"] <= sp["secrets"] - sp["caught"], placed["missed_ids"]),
              ("placements leaked", placed["leaked"] <= sp["leaked"], placed["leaked_ids"]),
              ("placements false_positives", placed["false_positives"] <= sp["false_positives"],
               placed["false_positive_ids"]),
              ("placements objects", placed["objects"] - placed["objects_caught"] <= sp["objects"] - sp["objects_caught"],
               placed["not_objects_ids"])]
    return [f"{name} below figures.json: {' '.join(ids) or '-'}" for name, ok, ids in pairs if not ok]


def _row(label: str, f: dict) -> str:
    n, c = f["secrets"], f["clean"]
    return (f"{label:<10} caught {f['caught']}/{n} ({100 * f['caught'] / n:.1f}%)  missed {f['missed']}  "
            f"redacted {f['redacted']}/{n}  relint-clean {f['relint_clean']}/{n}  "
            f"false positives {f['false_positives']}/{c} ({100 * f['false_positives'] / c:.1f}%)")


def _placement_row(label: str, f: dict) -> str:
    return (f"{label:<10} placements: caught {f['caught']}/{f['secrets']} ({100 * f['recall']:.2f}%, "
            f"{f['distinct_secrets']} secrets x {f['styles']} styles)  leaked {f['leaked']}  "
            f"false positives {f['false_positives']}/{f['clean']} ({100 * f['false_positive_rate']:.2f}%)  "
            f"as objects {f['objects_caught']}/{f['objects']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", metavar="REV", help="also measure the rules of this git revision")
    ap.add_argument("--list", action="store_true", help="print the ids of missed / false-positive texts")
    ap.add_argument("--store", action="store_true", help="write the current figures to figures.json")
    ap.add_argument("--sample", type=int, default=1, metavar="K", help="every K-th text of each corpus (default 1)")
    ap.add_argument("--check", action="store_true", help="exit 1 below the figures.json floor")
    args = ap.parse_args()
    if args.sample < 1 or (args.store and args.sample != 1):
        ap.error("--sample must be >= 1, and 1 with --store")
    secrets, clean = corpus()
    secrets, clean = secrets[::args.sample], clean[::args.sample]
    now = figures(redact, secrets, clean)
    placed = placement_figures(redact, args.sample)
    if args.baseline:
        old = baseline(args.baseline)
        print(_row(args.baseline, figures(old, secrets, clean)))
        print(_placement_row(args.baseline, placement_figures(old, args.sample)))
    print(_row("current", now))
    print(_placement_row("current", placed))
    if args.list:
        for key in ("missed_ids", "not_redacted_ids", "relint_ids", "false_positive_ids"):
            print(f"{key}: {' '.join(now[key]) or '-'}")
        for key in ("missed_ids", "leaked_ids", "false_positive_ids", "not_objects_ids"):
            print(f"placements {key}: {' '.join(placed[key]) or '-'}")
    if args.store:
        keep = {k: v for k, v in now.items() if not k.endswith("_ids")}
        keep["placements"] = {k: v for k, v in placed.items() if not k.endswith("_ids")}
        (CORPUS / "figures.json").write_text(json.dumps(keep, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"stored in {CORPUS / 'figures.json'}")
    if args.check:
        from checks import verdict

        return verdict(regressions(now, placed, json.loads((CORPUS / "figures.json").read_text(encoding="utf-8"))),
                       f"{now['secrets']} + {now['clean']} corpus texts and {placed['secrets']} + {placed['clean']} "
                       "placements at or above figures.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
