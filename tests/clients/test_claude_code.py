"""The real Claude Code CLI (pinned in versions.yaml) installs the bank from a local
marketplace and loads every skill and the SessionStart hook; a planted broken
manifest makes the same checks fail."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from client_harness import (
    NAME,
    PLUGIN_ID,
    VERSION,
    claude,
    claude_installed,
    claude_inventory,
    claude_session,
    ok,
    run,
    skill_names,
)

from devtools.plugin_manifests import SESSION_HOOK
from devtools.skill_lint import BANK_LINE

SKILLS = skill_names()


def install(env: dict[str, str], bank: Path, cwd: Path) -> None:
    ok(claude(env, "plugin", "marketplace", "add", bank, cwd=cwd))
    ok(claude(env, "plugin", "install", PLUGIN_ID, cwd=cwd))


def test_the_count_is_taken_from_disk():
    assert len(SKILLS) >= 5 and len(SKILLS) == len(set(SKILLS))


def test_marketplace_install_loads_every_skill_and_the_hook(bank, env, tmp_path):
    install(env, bank, tmp_path)
    entry = claude_installed(env, tmp_path)
    assert entry["enabled"] is True and not entry.get("errors"), entry
    assert entry["version"] == VERSION
    inv = claude_inventory(ok(claude(env, "plugin", "details", PLUGIN_ID, cwd=tmp_path)).stdout)
    assert sorted(inv["Skills"]) == SKILLS
    assert inv["Hooks"] == ["SessionStart"]
    cached = Path(env["CLAUDE_CONFIG_DIR"]) / "plugins" / "cache" / NAME / NAME / VERSION
    assert sorted(p.parent.name for p in cached.glob("skills/*/SKILL.md")) == SKILLS


def test_a_session_runs_the_hook_and_offers_every_skill(bank, env, tmp_path):
    install(env, bank, tmp_path)
    hook_lines, listed = claude_session(env, tmp_path)
    assert listed == SKILLS
    # The hook points at the folder Claude Code runs the plugin from (a local marketplace: the clone).
    entry = claude_installed(env, tmp_path)
    assert entry["readFromFolder"] == str(bank)
    assert hook_lines == [f"export TAO_SKILL_BANK_PATH={bank}"]
    # What a later Bash tool call does: source the hook's output, then run a skill snippet.
    snippet = "\n".join(hook_lines) + f"\n{BANK_LINE}\npython3 \"$BANK/scripts/resolve_versions_key.py\" bank.version\n"
    assert ok(run(["bash", "-c", snippet], env, tmp_path)).stdout == f"{VERSION}\n"


def test_plugin_dir_details_list_every_skill_and_the_hook(bank, env, tmp_path):
    out = ok(claude(env, "--plugin-dir", bank, "plugin", "details", NAME, cwd=tmp_path)).stdout
    assert out.startswith(f"{NAME} {VERSION}\n"), out[:200]
    inv = claude_inventory(out)
    assert sorted(inv["Skills"]) == SKILLS and inv["Hooks"] == ["SessionStart"]


@pytest.mark.parametrize("target", [".", ".claude-plugin/plugin.json", ".claude-plugin/marketplace.json"])
def test_validate_strict_passes_with_no_warning(bank, env, tmp_path, target):
    proc = claude(env, "plugin", "validate", "--strict", "--json", bank / target, cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["success"] is True, proc.stdout
    assert report["manifest"]["errors"] == [] and report["manifest"]["warnings"] == []
    if target == ".":
        assert sorted(s.split(":", 1)[1] for s in report["provides"]["skills"]) == SKILLS
        assert [(h["event"], h["command"]) for h in report["provides"]["hooks"]] == [("SessionStart", SESSION_HOOK)]


# ------------------------------------------------------------------ the checks fail on broken manifests

def test_conflicting_manifests_are_caught(bank, env, tmp_path):
    # 0.1.0's layout: the marketplace entry declares components with strict false while the
    # plugin has its own; Claude Code installs it, then refuses to load it.
    market = bank / ".claude-plugin/marketplace.json"
    data = json.loads(market.read_text())
    data["plugins"][0].update(strict=False, skills=[f"./skills/{s}" for s in SKILLS])
    market.write_text(json.dumps(data))
    install(env, bank, tmp_path)
    entry = claude_installed(env, tmp_path)
    assert any("conflicting manifests" in e for e in entry.get("errors", [])), entry
    details = claude(env, "plugin", "details", PLUGIN_ID, cwd=tmp_path)
    assert details.returncode != 0 and "not found" in details.stdout + details.stderr
    assert claude_session(env, tmp_path) == ([], [])


def test_nested_skills_load_nothing(bank, env, tmp_path):
    (bank / "skills" / "core").mkdir()
    for name in SKILLS:
        (bank / "skills" / name).rename(bank / "skills" / "core" / name)
    inv = claude_inventory(ok(claude(env, "--plugin-dir", bank, "plugin", "details", NAME, cwd=tmp_path)).stdout)
    assert inv["Skills"] == []
