"""What a skill costs an agent each time it triggers: bytes, lines and estimated tokens of every SKILL.md.

A platform skill (``tao-run-on-*``: it drives a cluster, so it carries a quick path, a job spec and
every verb) may load :data:`PLATFORM_MAX_BYTES`; every other skill :data:`OTHER_MAX_BYTES`. Details
belong in ``references/``, read only when needed. ``scripts/skill_budget.py`` prints the table; the
skill lint's ``budget`` rule fails CI over a limit.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PLATFORM_PREFIX = "tao-run-on-"
PLATFORM_MAX_BYTES = 12_000
OTHER_MAX_BYTES = 6_000
#: Tokens are estimated, not counted (no tokenizer dependency): English prose and shell average about
#: four bytes per token in current LLM tokenizers; the limits are set in bytes, which are exact.
BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class SkillCost:
    """One SKILL.md's size against its limit."""

    skill: str
    path: str
    bytes: int
    lines: int
    tokens: int
    limit: int

    @property
    def over(self) -> bool:
        return self.bytes > self.limit


def is_platform(skill: str) -> bool:
    """A platform skill runs jobs on one kind of cluster (tao-run-on-kubernetes, -slurm, -docker, ...)."""
    return skill.startswith(PLATFORM_PREFIX)


def limit_of(skill: str) -> int:
    return PLATFORM_MAX_BYTES if is_platform(skill) else OTHER_MAX_BYTES


def cost(root: Path, skill_md: Path) -> SkillCost:
    data = skill_md.read_bytes()
    skill = skill_md.parent.name
    return SkillCost(skill, skill_md.relative_to(root).as_posix(), len(data), len(data.splitlines()),
                     -(-len(data) // BYTES_PER_TOKEN), limit_of(skill))


def costs(root: Path) -> list[SkillCost]:
    """Every discovered skill (skills/<skill>/SKILL.md), sorted by name."""
    return [cost(root, p) for p in sorted(root.glob("skills/*/SKILL.md"))]
