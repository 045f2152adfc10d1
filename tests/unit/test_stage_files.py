"""stage_files.py: entries from an annotation list never land outside --dest (pitfall:
joining '../' paths onto the destination)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

BANK = Path(__file__).resolve().parents[2]
SCRIPT = BANK / "scripts/stage_files.py"
sys.path.insert(0, str(BANK / "scripts"))
import stage_files  # noqa: E402
from taobank.errors import TaoError  # noqa: E402


@pytest.fixture()
def tree(tmp_path):
    src = tmp_path / "src"
    (src / "images" / "a").mkdir(parents=True)
    (src / "images" / "a" / "1.jpg").write_text("one")
    (src / "images" / "2.jpg").write_text("two")
    (tmp_path / "secret.txt").write_text("outside")
    return src, tmp_path / "dest"


def stage(src: Path, dest: Path, entries: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--list", "-", "--src", str(src), "--dest", str(dest), *extra],
        input=entries, capture_output=True, text=True, timeout=60,
    )


def all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_copies_keep_the_relative_layout(tree):
    src, dest = tree
    proc = stage(src, dest, "images/a/1.jpg\n\nimages/2.jpg\n", "--json")
    assert proc.returncode == 0, proc.stderr
    assert all_files(dest) == ["images/2.jpg", "images/a/1.jpg"]
    assert (dest / "images/a/1.jpg").read_text() == "one"
    assert len(json.loads(proc.stdout)["copied"]) == 2


def test_dry_run_copies_nothing(tree):
    src, dest = tree
    proc = stage(src, dest, "images/2.jpg\n", "--dry-run")
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[-1] == "1 file(s) would copy"
    assert not dest.exists()


@pytest.mark.parametrize(
    "entry,why",
    [
        ("../secret.txt", "is absolute or climbs with '..'"),
        ("images/../../secret.txt", "is absolute or climbs with '..'"),
        ("/etc/passwd", "is absolute or climbs with '..'"),
        ("images\\..\\..\\secret.txt", "is absolute or climbs with '..'"),
    ],
)
def test_escaping_entries_are_refused_before_any_copy(tree, entry, why):
    src, dest = tree
    proc = stage(src, dest, f"images/2.jpg\n{entry}\n")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: entry 2 {entry!r} {why}")
    assert not dest.exists()  # nothing copied, not even the good first entry


def test_symlink_out_of_src_is_refused(tree):
    src, dest = tree
    os.symlink(src.parent / "secret.txt", src / "images" / "link.jpg")
    proc = stage(src, dest, "images/link.jpg\n")
    assert proc.returncode == 1
    assert "resolves outside --src" in proc.stderr


def test_symlink_in_dest_pointing_out_is_refused(tree, tmp_path):
    src, dest = tree
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dest.mkdir()
    os.symlink(elsewhere, dest / "images")
    proc = stage(src, dest, "images/2.jpg\n")
    assert proc.returncode == 1
    assert "would land outside --dest" in proc.stderr
    assert list(elsewhere.iterdir()) == []


def test_missing_source_file_is_named(tree):
    src, dest = tree
    proc = stage(src, dest, "images/nope.jpg\n")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: entry 1 'images/nope.jpg': ") and "is not a file" in proc.stderr


_SEG = st.sampled_from(["..", ".", "a", "b", "", "images", "2.jpg", "/", "\\", "..\\"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_SEG, min_size=1, max_size=6).map("/".join))
def test_any_entry_that_plans_stays_inside_dest(tmp_path_factory, entry):
    root = tmp_path_factory.mktemp("p")
    src, dest = root / "src", root / "dest"
    (src / "images").mkdir(parents=True)
    (src / "images" / "2.jpg").write_text("x")
    (src / "a").mkdir()
    (src / "a" / "b").write_text("y")
    try:
        pairs = stage_files.plan([entry], src, dest)
    except TaoError:
        return
    for source, target in pairs:
        assert dest.resolve() in target.parents
        assert src.resolve() in source.parents
