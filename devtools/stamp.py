"""Keep literal pins copied into skills and templates equal to versions.yaml.

A line that carries a pin ends with a marker comment naming its key::

    IMAGE="${IMAGE:-nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt}"  # versions-key: images.tao_toolkit.pyt
    | TAO image | `nvcr.io/...:7.1.0-pyt` | <!-- versions-key: images.tao_toolkit.pyt -->

Which literal on the line is the pin is :data:`RULE` (``stamp_versions.py --help``
prints it). Everything else on the line is left as it is.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from taobank import BANK_ROOT, pins
from taobank.errors import TaoError

RULE = """\
Which literal is the pin: take the text before the marker, minus the comment
opener (#, //, <!--);
  1. if it holds a quoted span ("...", '...' or `...`), the LAST such span;
  2. otherwise the last whitespace-separated word, after its first '=' when it
     has one (KEY=value, --flag=value), without a trailing ',' or ';';
  3. inside that, when it is a shell default ${NAME:-value} (or -, :=, =),
     only value.
Everything else on the line is left as it is. A marker with an unknown key or
no literal before it is reported and fails --check."""

MARKER = re.compile(r"(?:#|//|<!--)[ \t]*versions-key:[ \t]*(?P<key>[A-Za-z0-9_.-]+)[ \t]*(?:-->)?")
_QUOTED = re.compile(r"\"([^\"\n]*)\"|'([^'\n]*)'|`([^`\n]*)`")
_SHELL_DEFAULT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=]([^}]*)\}")

#: What ``stamp_versions.py`` scans when given no paths.
DEFAULT_PATHS = ("skills", "templates", "docs", "README.md")
_SUFFIXES = {".md", ".sh", ".yaml", ".yml", ".tmpl", ".j2", ".json", ".txt", ".py", ".sbatch", ""}


@dataclass
class Drift:
    """A marked line whose literal differs from versions.yaml (or cannot be read)."""

    file: str
    line: int
    key: str
    expected: str | None
    found: str | None
    problem: str = ""

    def __str__(self) -> str:
        if self.problem:
            return f"{self.file}:{self.line} {self.key}: {self.problem}"
        return f"{self.file}:{self.line} {self.key} expected {self.expected!r} found {self.found!r}"


def literal_span(line: str, marker_start: int) -> tuple[int, int] | None:
    """(start, end) of the pin literal in ``line`` before ``marker_start``, per :data:`RULE`."""
    before = line[:marker_start]
    quoted = list(_QUOTED.finditer(before))
    if quoted:
        m = quoted[-1]
        group = next(i for i in (1, 2, 3) if m.group(i) is not None)
        start, end = m.start(group), m.end(group)
    else:
        words = list(re.finditer(r"\S+", before))
        if not words:
            return None
        w = words[-1]
        start, end = w.start(), w.end()
        word = w.group()
        if "=" in word:
            start += word.index("=") + 1
        while end > start and line[end - 1] in ",;":
            end -= 1
    inner = _SHELL_DEFAULT.search(line, start, end)
    if inner and inner.start() == start and inner.end() == end:
        start, end = inner.start(1), inner.end(1)
    return (start, end) if end > start else None


def _stamp_text(text: str, rel: str) -> tuple[str, list[Drift]]:
    out, drifts = [], []
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        m = MARKER.search(line)
        if not m:
            out.append(line)
            continue
        key = m.group("key")
        try:
            expected = pins.format_value(pins.resolve(key))
        except TaoError as exc:
            if exc.exit_code == 2:
                raise
            drifts.append(Drift(rel, n, key, None, None, f"unknown key ({exc})"))
            out.append(line)
            continue
        span = literal_span(line, m.start())
        if span is None:
            drifts.append(Drift(rel, n, key, expected, None, "no literal before the marker"))
            out.append(line)
            continue
        found = line[span[0]:span[1]]
        if found != expected:
            drifts.append(Drift(rel, n, key, expected, found))
            line = line[:span[0]] + expected + line[span[1]:]
        out.append(line)
    return "".join(out), drifts


def iter_files(paths: Iterable[str | Path], root: Path = BANK_ROOT) -> list[Path]:
    """Files under ``paths`` (relative to ``root``) that may carry markers.

    A missing default path is skipped (a fork may drop docs/); a missing path the
    user named is an error, so a typo never passes --check by checking nothing.
    """
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        path = path if path.is_absolute() else root / path
        if not path.exists() and p not in DEFAULT_PATHS:
            raise TaoError(f"{p} does not exist: pass files or folders of the bank (default: {' '.join(DEFAULT_PATHS)})",
                           exit_code=2)
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(f for f in sorted(path.rglob("*")) if f.is_file() and f.suffix in _SUFFIXES
                         and "__pycache__" not in f.parts)
    return files


def stamp(paths: Iterable[str | Path] = DEFAULT_PATHS, *, check: bool = False, root: Path = BANK_ROOT) -> list[Drift]:
    """Rewrite drifted literals (or, with ``check``, only report them). Returns every drift."""
    # Parse versions.yaml once up front: a missing parser or a broken pin file is one
    # error, not an "unknown key" drift on every marked line.
    pins.load()
    all_drifts: list[Drift] = []
    for f in iter_files(paths, root):
        try:
            with open(f, encoding="utf-8", newline="") as fh:
                text = fh.read()
        except (UnicodeDecodeError, OSError):
            continue
        if "versions-key:" not in text:
            continue
        try:
            rel = str(f.relative_to(root))
        except ValueError:
            rel = str(f)
        new, drifts = _stamp_text(text, rel)
        all_drifts.extend(drifts)
        if not check and new != text:
            with open(f, "w", encoding="utf-8", newline="") as fh:
                fh.write(new)
    return all_drifts
