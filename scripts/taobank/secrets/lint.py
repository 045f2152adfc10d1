"""The lint: every rule over a text, overlapping spans resolved (the earlier rule wins), ``lint-ok`` allowances
honoured; findings name the rule and ``file:line``, never the value. ``lint_objects`` lints manifests as sent."""
from __future__ import annotations

import bisect
import json
import re
from typing import Any, Iterable, Iterator

from .findings import Finding, Hit
from .line_rules import line_hits
from .rules import ORDER, RULES, RULE_NAMES
from .structure_rules import env_hits, flag_item_hits, private_key_bodies, secret_hits, yaml_hits
from .values import has_random_piece


_ALLOW = re.compile(r"lint-ok:[ \t]*(?P<rule>[A-Za-z0-9_-]*)(?:[ \t]+(?P<reason>.*?))?[ \t]*(?:-->)?[ \t]*$")


def _scan(text: str) -> tuple[list[str], list[Hit]]:
    lines, kept, _ = scan_all(text)
    return lines, kept


def scan_all(text: str) -> tuple[list[str], list[Hit], list[Hit]]:
    """(lines, the hits that become findings -- one per span --, every hit)."""
    lines = text.splitlines()
    hits = line_hits(lines) + flag_item_hits(lines) + env_hits(lines) + yaml_hits(lines) + secret_hits(lines)
    hits = private_key_bodies(lines, hits)
    hits.sort(key=lambda h: (h.line, ORDER[h.rule], h.start))
    kept: list[Hit] = []
    spans: dict[int, _Spans] = {}
    for h in hits:  # overlapping spans on one line: the earlier rule wins
        if spans.setdefault(h.line, _Spans()).add(h):
            kept.append(h)
    return lines, kept, hits


class _Spans:
    """The kept spans of one line, disjoint and sorted: a new one is checked against its two neighbours
    (not against every kept one: a long line can hold many findings)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.rules: set[str] = set()

    def add(self, h: Hit) -> bool:
        """Keep ``h`` unless it overlaps a kept span (or is a second zero-width finding of its rule)."""
        if h.start == h.end and h.rule in self.rules:
            return False
        k = bisect.bisect_left(self.starts, h.start)
        if k > 0 and self.ends[k - 1] > h.start:
            return False
        if k < len(self.starts) and self.starts[k] < h.end and h.start < self.ends[k]:
            return False
        self.starts.insert(k, h.start)
        self.ends.insert(k, h.end)
        self.rules.add(h.rule)
        return True


def scan(text: str, filename: str = "<stdin>") -> list[Finding]:
    """Every finding, allowed ones included (``Finding.allowed`` holds the reason)."""
    lines, hits = _scan(text)
    allow: dict[int, tuple[str, str]] = {}
    out: list[Finding] = []
    for i, line in enumerate(lines):
        if "lint-ok:" not in line:
            continue
        m = _ALLOW.search(line)
        if not m:
            continue
        rule, reason = m.group("rule"), (m.group("reason") or "").strip()
        if rule not in RULE_NAMES or rule == "bad-allowance" or not reason:
            out.append(Finding("bad-allowance", filename, i + 1))
        else:
            allow[i] = (rule, reason)
    seen = set()
    for h in hits:
        key = (h.rule, h.line)
        if key in seen:
            continue
        seen.add(key)
        a = allow.get(h.line)
        out.append(Finding(h.rule, filename, h.line + 1, a[1] if a and a[0] == h.rule else None))
    out.sort(key=lambda f: (f.line, ORDER[f.rule]))
    return out


def lint_text(text: str, filename: str = "<stdin>", *, include_allowed: bool = False) -> list[Finding]:
    """Findings that fail the lint (and, with ``include_allowed``, the allowed ones too)."""
    return [f for f in scan(text, filename) if include_allowed or f.allowed is None]


def _strings(obj: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for n, v in enumerate(obj):
            yield from _strings(v, f"{path}[{n}]")


def lint_objects(objs: Iterable[Any], what: str = "<objects>") -> list[Finding]:
    """Lint manifest objects as they are sent, never a line-folded dump of them.

    The objects are serialised as indented JSON (no line is ever folded, keys and values
    stay on one line) and every string in them is linted on its own as well, so a script
    held in ``args`` is read line by line however it would have been quoted. Findings of
    the JSON carry its line; those of a string name the object path (``what doc[0].spec...``).
    """
    objs = list(objs)
    findings = lint_text(json.dumps(objs, indent=2, ensure_ascii=False, default=str), what)
    for n, obj in enumerate(objs):
        for path, s in _strings(obj, f"doc[{n}]"):
            if s.strip():
                findings.extend(lint_text(s, f"{what} {path}"))
    return findings


def rules_markdown() -> str:
    """The rule list as a Markdown table (docs/secret-lint.md embeds exactly this)."""
    rows = ["| rule | catches |", "|---|---|"] + [f"| `{r.name}` | {r.description} |" for r in RULES]
    return "\n".join(rows) + "\n"


def looks_like_secret(text: str) -> bool:
    """True when ``text`` is, or holds, what may be a credential: a shape the lint knows (``hf_...``,
    ``AKIA...``, ``ghp_...``) or a long random-looking word. Such text is never printed, not even in an
    error that says it is no valid name (a token pasted where a name belongs)."""
    return bool(text.strip()) and (has_random_piece(text) or bool(lint_text(text, "value")))
