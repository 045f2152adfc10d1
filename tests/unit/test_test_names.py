"""pytest imports test files by basename (rootdir-relative packages are not used): two test files with the
same name in different folders stop the whole run at collection."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_name_is_unique_across_the_tree():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
