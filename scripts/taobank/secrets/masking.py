"""Masking: a text with every value the lint flags replaced by :data:`MASK` (what the record store and the log
savers pass free text through)."""
from __future__ import annotations


from .scanner import MASK, scan_all


def redact_text(text: str) -> str:
    """``text`` with every value lint flags masked (allowance markers do not apply here). Every span any rule
    found is masked, also one that overlaps a finding of another rule (it may reach further)."""
    lines, _, hits = scan_all(text)
    spans: dict[int, list[tuple[int, int]]] = {}
    for h in hits:
        for ln, s, e in [(h.line, h.start, h.end), *h.extra]:
            if e > s:
                spans.setdefault(ln, []).append((s, e))
    if not spans:
        return text
    raw = text.splitlines(keepends=True)
    for ln, ss in spans.items():
        line = raw[ln]
        body = line.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
        nl = line[len(body):]
        parts, pos = [], 0
        for s, e in _merge(ss):
            parts += [body[pos:s], MASK]
            pos = e
        raw[ln] = "".join(parts) + body[pos:] + nl
    return "".join(raw)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out
