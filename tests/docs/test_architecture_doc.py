"""docs/architecture.md follows the code: the hooks it lists exist, every platform and layer is named."""
from __future__ import annotations

import re
from pathlib import Path

from taobank.core import platform
from taobank import registry, states

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _contract_block() -> str:
    text = DOC.read_text()
    section = text.split("## The platform contract", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def test_every_hook_the_doc_lists_is_a_platform_method():
    names = set()
    for line in _contract_block().splitlines():
        names |= set(re.findall(r"\b([a-z_]+)(?=\(| /| ->|\s{2,}|$)", line.split("  ")[0]))
    names = {n for n in names if n not in {"recs", "spec", "opts", "rec", "plans", "gate", "batch", "plan", "context"}}
    assert names, "the contract block lists no hook"
    missing = sorted(n for n in names if not hasattr(platform.Platform, n))
    assert not missing, f"docs/architecture.md lists hooks Platform does not have: {missing}"


def test_every_abstract_hook_is_in_the_doc():
    block = _contract_block()
    abstract = sorted(getattr(platform.Platform, "__abstractmethods__", ()))
    assert abstract
    assert not [n for n in abstract if n not in block], "a hook every adapter must fill in is missing from the doc"


def test_the_doc_names_every_platform_and_the_layers():
    text = DOC.read_text()
    for name in registry.names():
        assert f"{name}/" in text, name
    for layer in ("mcp", "cli", "campaign", "adapters", "core", "state", "leaves"):
        assert f'{layer}["' in text, layer
    assert "```mermaid" in text


def test_the_add_a_platform_steps_are_what_the_toy_platform_needed():
    """tests/support/toyplatform is made by the doc's steps alone: each file it has is one the steps name (and the
    registry line), so a step the toy did not need, or a file the steps forgot, fails here."""
    section = DOC.read_text().split("## Adding a fourth platform", 1)[1].split("\n## ", 1)[0]
    toy = Path(__file__).resolve().parents[1] / "support" / "toyplatform"
    made = sorted(p.name.replace("toy", "<name>") for p in toy.iterdir() if p.is_file())
    assert made == ["<name>-job-spec.schema.json", "__init__.py", "adapter.py", "flags.py"]
    for name in made:
        assert f"`{name}`" in section or name in section, name
    assert "`PACKAGES`" in section and "scripts/taobank/platforms/<name>/" in section
