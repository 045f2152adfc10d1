#!/usr/bin/env python3
"""Copy files named by relative paths from a source root to a destination root, refusing escapes.

  stage_files.py --list FILE|- --src DIR --dest DIR [--dry-run] [--json]

Annotation files name images by relative path; a '../' or absolute entry
joined onto the destination would write outside it. Every entry must stay
inside --src (symlinks resolved) and inside --dest; the first one that does
not stops the run with exit 1 before anything is copied.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path, PurePosixPath

from taobank import fsio
from taobank.cli.entry import BankParser
from taobank.cli.entry import print_json, run_main
from taobank.errors import TaoError

#: Largest --list file: a million relative paths fit.
MAX_LIST_BYTES = 64 * 1024 * 1024


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def plan(entries: list[str], src: Path, dest: Path) -> list[tuple[Path, Path]]:
    """(source, target) pairs for ``entries``; TaoError on the first entry that escapes."""
    src_root, dest_root = src.resolve(), dest.resolve()
    if not src_root.is_dir():
        raise TaoError(f"--src {src} is not a folder: give the folder the list's paths are relative to")
    if dest_root.exists() and not dest_root.is_dir():
        raise TaoError(f"--dest {dest} exists and is not a folder: give a folder (it is created if missing)")
    if _inside(dest_root, src_root) or _inside(src_root, dest_root):
        raise TaoError(f"--dest {dest} and --src {src} overlap (one is inside the other): copy to a separate folder")
    pairs = []
    for n, raw in enumerate(entries, 1):
        rel = raw.strip()
        if not rel:
            continue
        what = f"entry {n} {rel!r}"
        if "\x00" in rel:
            raise TaoError(f"{what} holds a NUL byte: fix the list")
        p = PurePosixPath(rel.replace("\\", "/"))
        if p.is_absolute() or ".." in p.parts:
            raise TaoError(f"{what} is absolute or climbs with '..': list paths relative to --src, inside it")
        source = (src_root / p).resolve()
        if not _inside(source, src_root):
            raise TaoError(f"{what} resolves outside --src {src_root} (symlink?): refusing")
        target = (dest_root / p).resolve()
        if not _inside(target, dest_root):
            raise TaoError(f"{what} would land outside --dest {dest_root} (symlink?): refusing")
        if not source.is_file():
            raise TaoError(f"{what}: {source} is not a file: fix the list or --src")
        pairs.append((source, target))
    return pairs


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    parser = BankParser(prog="stage_files.py", description=__doc__.splitlines()[0])
    parser.add_argument("--list", required=True, help="file with one relative path per line, or - for stdin")
    parser.add_argument("--src", required=True, type=Path, help="source root the paths are relative to")
    parser.add_argument("--dest", required=True, type=Path, help="destination root (created if missing)")
    parser.add_argument("--dry-run", action="store_true", help="check and print, copy nothing")
    parser.add_argument("--json", action="store_true", help="print the copies as JSON")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if not args.src.is_dir():
        raise TaoError(f"--src {args.src} is not a directory")
    if args.list == "-":
        try:
            text = sys.stdin.read()
        except UnicodeDecodeError:
            raise TaoError("--list - (stdin) is not UTF-8 text: pass one relative path per line") from None
    else:  # the one rule for files a flag names: a regular file under a size cap (a FIFO is refused, not waited on)
        text = fsio.read_text(args.list, "--list file", max_bytes=MAX_LIST_BYTES) or ""
    pairs = plan(text.splitlines(), args.src, args.dest)
    if not args.dry_run:
        for source, target in pairs:
            target.parent.mkdir(parents=True, exist_ok=True)
            # Re-check after mkdir: a symlinked parent created meanwhile must not redirect the copy.
            if not _inside(target.parent.resolve(), args.dest.resolve()):
                raise TaoError(f"{target} would land outside --dest: refusing")
            if target.is_symlink():
                os.unlink(target)
            shutil.copy2(source, target)
    if args.json:
        print_json({"dry_run": args.dry_run, "copied": [{"src": str(s), "dest": str(t)} for s, t in pairs]})
    else:
        verb = "would copy" if args.dry_run else "copied"
        for source, target in pairs:
            print(f"{verb} {source} -> {target}")
        print(f"{len(pairs)} file(s) {verb}")
    return 0


if __name__ == "__main__":
    run_main(main)
