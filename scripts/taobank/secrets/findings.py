"""What a scan reports: a :class:`Finding` (rule, file, line -- never the value) and the spans a rule hit."""
from __future__ import annotations

from dataclasses import dataclass, field

from .rules import DESCRIPTIONS


@dataclass
class Finding:
    """One lint finding; it never holds the offending value."""

    rule: str
    file: str
    line: int
    allowed: str | None = None  # the allowance reason when a marker allowed it

    @property
    def description(self) -> str:
        return DESCRIPTIONS.get(self.rule, self.rule)

    def __str__(self) -> str:
        if self.allowed is not None:
            return f"{self.file}:{self.line}: allowed {self.rule} ({self.allowed})"
        return f"{self.file}:{self.line}: {self.rule}: {self.description}"

    def to_dict(self) -> dict[str, object]:
        return {"rule": self.rule, "file": self.file, "line": self.line, "allowed": self.allowed,
                "description": self.description}


@dataclass
class Hit:
    rule: str
    line: int  # 0-based
    start: int
    end: int
    extra: list[tuple[int, int, int]] = field(default_factory=list)  # more (line, start, end) spans to mask
