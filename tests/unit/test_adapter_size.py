"""Issue 31: the adapters together stay smaller than the core they plug into.

What every platform shares belongs above the contract, written once; an adapter holds only what differs. A
line count cannot prove that, but it rots visibly: when the adapters outgrow the core, something shared was
written per platform again. Counted as ``cat FILES | wc -l`` counts (the CLI package is not the core).
"""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "scripts" / "taobank"
ADAPTERS = ("platforms/kubernetes", "platforms/slurm", "platforms/docker")
#: Modules that answer a problem only one platform has (no counterpart could be shared), not counted. Each
#: needs its reason; code two platforms could share never belongs here.
PLATFORM_ONLY = {
    "platforms/kubernetes/verdicts.py": "a Job deleted by its TTL takes its verdict along (sacct and the engine keep theirs)",
}


def _lines(files: list[Path]) -> int:
    return sum(f.read_bytes().count(b"\n") for f in files)


def test_the_adapters_together_are_smaller_than_the_core():
    adapters = [f for name in ADAPTERS for f in sorted((PACKAGE / name).glob("*.py"))
                if f.relative_to(PACKAGE).as_posix() not in PLATFORM_ONLY]
    assert all((PACKAGE / m).is_file() for m in PLATFORM_ONLY)
    core = sorted(PACKAGE.glob("*.py")) + [f for sub in ("progress", "records", "secrets", "core", "campaign") for f in sorted((PACKAGE / sub).glob("*.py"))]
    assert len(adapters) > 30 and len(core) > 40  # the globs found the package
    a, c = _lines(adapters), _lines(core)
    assert a < c, (f"the adapters ({a} lines) outgrew the core ({c} lines): move what they share up into the core "
                   "or a leaf module (taobank/*.py) instead of writing it per platform")
