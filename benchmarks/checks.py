"""The end of every benchmark's --check: one ``error:`` line per broken count on stderr and exit 1, else its
``check:`` line (the benchmarks import this from their own folder)."""
from __future__ import annotations

import sys


def verdict(bad: list[str], ok: str | None = None) -> int:
    """Exit status of a check that found ``bad``; ``ok`` is printed as ``check: ok`` when nothing is."""
    for line in bad:
        print(f"error: {line}", file=sys.stderr)
    if bad:
        return 1
    if ok:
        print(f"check: {ok}")
    return 0
