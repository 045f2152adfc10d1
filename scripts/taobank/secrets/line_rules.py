"""The line rules' scan: a rule's regex only finds where a value starts (``--token ``, ``HF_TOKEN=``), and the
value is cut from the line's runs of value characters, each found once, so no long line is rescanned from
every position (linear in the line's length)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from .findings import Hit
from .names import may_name_secret
from .rules import RULES, Rule, V, VCHARS
from .values import MASK, is_reference, is_whole_reference, named_value_ok


@dataclass(frozen=True)
class _Pattern:
    """A compiled line pattern. One built around ``V`` is split there: ``rx`` ends where the value starts
    and ``tail`` (if any) must follow the value, which :func:`_value_at` cuts from the line's runs. So the
    regex engine never walks a value, and a long run is walked once, not from every position in it."""

    rx: re.Pattern[str]
    tail: re.Pattern[str] | None = None
    split: bool = False
    named: bool = False  # a ``name`` group: checked before the value is cut


#: Where a value can start: a quote or a value character (never ``{``/``[``, a flow mapping or sequence).
_VSTART = r"(?=[\"']|" + VCHARS + ")"


def _compile(pattern: str, flags: int) -> _Pattern:
    named = "(?P<name>" in pattern
    if V not in pattern:
        return _Pattern(re.compile(pattern, flags), named=named)
    head, tail = pattern.split(V)
    return _Pattern(re.compile(head + _VSTART, flags), re.compile(tail, flags) if tail else None, True, named)


class _Lazy:
    """A rule's patterns, compiled the first time a line holds one of the rule's needles: a short text (a
    record's metadata value, a message) wakes few of the rules, and compiling every pattern up front was most
    of a helper's start-up."""

    __slots__ = ("_patterns", "_flags", "_compiled")

    def __init__(self, patterns: tuple[str, ...], flags: int) -> None:
        self._patterns, self._flags = patterns, flags
        self._compiled: tuple[_Pattern, ...] | None = None

    def __iter__(self) -> Iterator[_Pattern]:
        if self._compiled is None:
            self._compiled = tuple(_compile(p, self._flags) for p in self._patterns)
        return iter(self._compiled)


_COMPILED = tuple((r, r.needles, _Lazy(r.patterns, r.flags)) for r in RULES if r.patterns)


def _value_ok(rule: Rule, v: str) -> bool:
    """True when the matched value is a literal this rule reports."""
    if rule.reference == "any" and is_reference(v):
        return False
    if rule.reference == "whole" and is_whole_reference(v):
        return False
    if rule.reference == "never" and (not v or MASK in v):
        return rule.name == "private-key"  # an empty one-line body: the block lines decide below
    return rule.check is None or rule.check(v)


_QUOTED = re.compile(r"\"(?:[^\"\\\n]|\\.){0,4096}\"|'[^'\n]{0,4096}'|\\\"[^\"\n]{0,4096}(?<=\\)\"")
#: A run of value characters; a ")" inside a word is one of them (``ab*)cd``), one that ends a call, a group or
#: a subshell is not (``f(x=None):``, ``(x=ab)``).
_RUN = re.compile("(?:" + VCHARS + r"|\)(?=[A-Za-z0-9]))*")
_MAX_VALUE = 4096


class _Runs:
    """The end of the run of value characters around a position, each run walked once (the last one is kept:
    one pattern's matches come in line order)."""

    def __init__(self, line: str) -> None:
        self.line, self.start, self.end = line, 0, 0

    def end_of(self, pos: int) -> int:
        if not self.start <= pos < self.end:
            run = _RUN.match(self.line, pos)
            assert run is not None  # the pattern matches the empty string too
            self.start, self.end = pos, run.end()
        return self.end


def _value_at(line: str, pos: int, runs: _Runs) -> tuple[int, bool] | None:
    """(end, quoted) of the value starting at ``pos``: a quoted string, or a whole run of value characters
    of at most ``_MAX_VALUE`` (a longer run, or one followed by ``(``/``[``, a call, is no value)."""
    if line[pos] in "\"'" or line.startswith('\\"', pos):
        m = _QUOTED.match(line, pos)
        return (m.end(), True) if m else None
    end = runs.end_of(pos)
    if end - pos > _MAX_VALUE or line[end:end + 1] in ("(", "["):
        return None
    return end, False


def _cut(pat: _Pattern, m: re.Match[str], line: str, runs: _Runs, rejected_end: int
         ) -> tuple[int, int, int, bool] | None:
    """(start, end, end of the match, a bare run) of the value match ``m`` points at; None when no value
    starts there, the tail does not follow, or the value is a suffix of a run already rejected (same run,
    same verdict: ``TOKEN=<TOKEN=<...``)."""
    if not pat.split:
        return m.start("v"), m.end("v"), m.end(), False
    start = m.end()
    cut = _value_at(line, start, runs)
    if cut is None or (not cut[1] and cut[0] == rejected_end):
        return None
    end, quoted = cut
    tail = pat.tail.match(line, end) if pat.tail else None
    if pat.tail and not tail:
        return None
    return start, end, (tail.end() if tail else end), not quoted


def _pattern_hits(rule: Rule, pat: _Pattern, i: int, line: str, hits: list[Hit]) -> None:
    """The hits of one pattern on one line. A rejected match (NAME="...;AccountKey=x" with NAME no
    credential) must not hide what it spans, so the search goes on from inside it."""
    m = pat.rx.search(line)
    if m is None:  # most lines: one search, nothing more
        return
    runs, rejected_end, search = _Runs(line), -1, pat.rx.search
    while m is not None:
        pos = m.start() + 1
        if pat.named and not may_name_secret(m.group("name")):  # checked before any value is cut
            m = search(line, pos)
            continue
        cut = _cut(pat, m, line, runs, rejected_end)
        if cut is not None:
            start, end, after, bare = cut
            value = line[start:end]
            if (not pat.named or named_value_ok(m.group("name"), value)) and _value_ok(rule, value):
                hits.append(Hit(rule.name, i, start, end))
                pos = max(after, pos)
            elif bare:
                rejected_end = end
        m = search(line, pos) if pos <= len(line) else None


def line_hits(lines: list[str]) -> list[Hit]:
    hits: list[Hit] = []
    for i, line in enumerate(lines):
        low = line.lower()
        for rule, needles, pats in _COMPILED:
            if not any(n in low for n in needles):
                continue
            for pat in pats:
                _pattern_hits(rule, pat, i, line, hits)
    return hits
