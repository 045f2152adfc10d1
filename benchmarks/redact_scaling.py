#!/usr/bin/env python3
"""Redaction time against input size: the scan must stay linear (saved logs and messages reach it).

For each input shape, times ``redact_text`` at doubling sizes and prints the time and
the growth factor per doubling (linear ~2x, quadratic ~4x). With --baseline REV (default:
the last revision before the linear scan) the old rules run on the same inputs in the
same run, and the old/new ratio is printed; the baseline only runs up to --baseline-max
lines because it is quadratic (3,000 same-indent ``value:`` lines took ~17 s).

The ``line:`` shapes are one line of SIZE x 40 bytes: runs of ``a=``, ``--a ``, ``"a":``,
``:``, ``=`` and quotes, and keys whose values are rejected (``TOKEN=<``). They were linear
but with a constant of ~48 us a byte (1.2 MB of ``a=a=...`` took 58 s), because a value was
matched again from every position of a long run; ``ordinary`` is a plain line to compare.

--check (CI, at small sizes: --min 100 --max 800) prints the same table without the baseline and
asserts work COUNTS, never times: per shape and size, the calls redact makes (its own functions and the
regex/C calls they make, counted with sys.setprofile) grow at most 2.5x per doubling (linear ~2x,
quadratic ~4x), and the values vetted stay within a linear bound of the input (at most one per two
bytes, at most 2 x bytes + 8192 characters), which a scan restarting at every position breaks.

Usage: python3 benchmarks/redact_scaling.py [--baseline e24a604] [--baseline-max 3000] [--max 24000]
       [--only line:]   (shapes whose name starts with this)   [--check]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BANK / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from secret_lint_corpus import baseline  # noqa: E402
from taobank import redact  # noqa: E402

SHAPES = {
    "value-lines": lambda n: "".join(f"  value: v{i}\n" for i in range(n)),  # the shape
    "env-list": lambda n: "env:\n" + "".join(f"- name: VAR_{i}\n  value: v{i}\n" for i in range(n // 2)),
    "data-nested": lambda n: "kind: Secret\n" + "".join("  " * (i % 40) + "data:\n" for i in range(n)),
    "pem-begins": lambda n: "".join("-----BEGIN RSA PRIVATE KEY-----\n" for _ in range(n)),
    "cred-keys-nested": lambda n: "".join("  " * (i % 64) + "token:\n" for i in range(n)),  # each a bare key
    "anchors-nested": lambda n: "".join("  " * (i % 64) + f"a{i}: &x{i} |\n" for i in range(n)),
    "log": lambda n: "".join(f"2026-12-03 10:00:{i % 60:02d} step {i} loss 0.{i % 97} lr 1e-4 "
                             f"--token-budget {i} rank {i % 8}\n" for i in range(n)),
    "one-long-line": lambda n: "a-" * (n * 20) + "\n",
}


def _one_line(unit: str):
    """A shape: one line of ``unit`` repeated to SIZE x 40 bytes."""
    return lambda n: (unit * (n * 40 // len(unit) + 1))[: n * 40] + "\n"


LINE_UNITS = {"ordinary": "step 100 loss=0.231 lr: 1e-4 --epochs 80 name=run7 /data/x.json ",
              "a=": "a=", "--a": "--a ", '"a":': '"a":', ":": ":", "=": "=", '"': '"', "'": "'",
              "TOKEN=<": "TOKEN=<", "--token=$": "--token=$", "?sig=$": "?sig=$", "-Da=": "-Da=",
              "docker login": "docker login ", "htpasswd -b": "htpasswd -b ",
              "BEGIN": "-----BEGIN RSA PRIVATE KEY-----"}
SHAPES.update({f"line:{name}": _one_line(unit) for name, unit in LINE_UNITS.items()})


def _time(mod, text: str, reps: int = 1) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        mod.redact_text(text)
        best = min(best, time.perf_counter() - t0)
    return best


#: --check: the most the call count may grow per doubling of the input (linear ~2x, quadratic ~4x)
MAX_GROWTH = 2.5


def counts(mod, text: str) -> tuple[int, int, int]:
    """(calls, values vetted, characters vetted) of one ``mod.redact_text(text)``: deterministic work counts.

    calls: every call of a function of the rules' modules and every C call (regex searches...) made from one.
    """
    seen = {"vetted": 0, "chars": 0}
    # the rules' modules: ``mod`` alone, or since taobank.secrets the package it delegates to
    package = mod.__name__.rsplit(".", 1)[0] if "." in mod.__name__ else None
    holder = sys.modules.get(f"{package}.secrets.scanner", mod) if package else mod
    files = {mod.redact_text.__code__.co_filename} | {
        m.__file__ for name, m in list(sys.modules.items())
        if package and name.startswith(f"{package}.secrets.") and getattr(m, "__file__", None)}
    real = getattr(holder, "_value_ok", None)  # rules older than the linear scan have none

    def counting(rule, value):
        seen["vetted"] += 1
        seen["chars"] += len(value)
        return real(rule, value)

    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call") and frame.f_code.co_filename in files:
            calls += 1

    if real is not None:
        holder._value_ok = counting
    sys.setprofile(profile)
    try:
        mod.redact_text(text)
    finally:
        sys.setprofile(None)
        if real is not None:
            holder._value_ok = real
    return calls, seen["vetted"], seen["chars"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default="e24a604", metavar="REV", help="old rules to compare with ('' for none)")
    ap.add_argument("--baseline-max", type=int, default=3000, help="largest size the baseline runs (default 3000)")
    ap.add_argument("--min", type=int, default=750, help="smallest size in lines (default 750)")
    ap.add_argument("--max", type=int, default=24000, help="largest size in lines (default 24000)")
    ap.add_argument("--only", default="", metavar="PREFIX", help="only the shapes whose name starts with PREFIX")
    ap.add_argument("--check", action="store_true",
                    help="no baseline; exit 1 unless the work counts grow linearly (see above)")
    args = ap.parse_args()
    old = baseline(args.baseline) if args.baseline and not args.check else None
    bad: list[str] = []
    sizes = []
    n = args.min
    while n <= args.max:
        sizes.append(n)
        n *= 2
    print(f"{'shape':<19}{'size':>7}{'new s':>10}{'x/doubling':>12}{'old s':>10}{'x/doubling':>12}{'old/new':>9}"
          + (f"{'calls':>10}{'x/doubling':>12}{'vetted':>8}{'chars':>9}" if args.check else ""))
    for name, make in SHAPES.items():
        if not name.startswith(args.only):
            continue
        prev_new = prev_old = prev_calls = None
        for n in sizes:
            text = make(n)
            t_new = _time(redact, text, reps=3)
            t_old = _time(old, text) if old is not None and n <= args.baseline_max else None
            grow_new = f"{t_new / prev_new:.1f}" if prev_new else "-"
            grow_old = f"{t_old / prev_old:.1f}" if t_old and prev_old else "-"
            row = (f"{name:<19}{n:>7}{t_new:>10.4f}{grow_new:>12}"
                   f"{(f'{t_old:.3f}' if t_old is not None else '-'):>10}{grow_old:>12}"
                   f"{(f'{t_old / t_new:.0f}' if t_old is not None else '-'):>9}")
            if args.check:
                calls, vetted, chars = counts(redact, text)
                growth = calls / prev_calls if prev_calls else None
                row += f"{calls:>10}{(f'{growth:.2f}' if growth else '-'):>12}{vetted:>8}{chars:>9}"
                if growth is not None and growth > MAX_GROWTH:
                    bad.append(f"{name} at {n}: {growth:.2f}x the calls of half the size")
                if vetted > len(text) // 2 + 1 or chars > 2 * len(text) + 8192:
                    bad.append(f"{name} at {n}: {vetted} values ({chars} characters) vetted in {len(text)} bytes")
                prev_calls = calls
            print(row)
            prev_new, prev_old = t_new, t_old
    if args.check:
        from checks import verdict

        return verdict(bad, "every shape's work counts grow linearly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
