"""Fixtures shared by the docs tests."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[2]
#: what a copy leaves out: caches, and test code the lint never reads (each case copies the bank: fewer files, faster)
_IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".hypothesis", "out", ".venv", "testclusters",
                                 "tests", "benchmarks")


@pytest.fixture()
def bank_copy(tmp_path) -> Path:
    """A copy of the bank (skills, scripts, manifests) a test may break on purpose."""
    root = tmp_path / "bank"
    shutil.copytree(BANK, root, ignore=_IGNORE, symlinks=True)
    return root
