"""Plugin packaging: plugin.json is the source of truth, the Claude Code and Codex
manifests agree with it, every skill is listed, and the SessionStart hook makes
TAO_SKILL_BANK_PATH visible to later shells without the user exporting anything."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from taobank import pins
from taobank.plugin_manifests import SESSION_HOOK, skill_dirs
from taobank.skill_lint import BANK_CHECK_LINE, BANK_LINE

BANK = Path(__file__).resolve().parents[2]
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def load(rel: str) -> dict:
    return json.loads((BANK / rel).read_text(encoding="utf-8"))


ROOT = load("plugin.json")
CLAUDE = load(".claude-plugin/plugin.json")
MARKET = load(".claude-plugin/marketplace.json")
CODEX = load(".codex-plugin/plugin.json")


def test_root_manifest_is_complete_and_follows_versions_yaml():
    assert ROOT["name"] == pins.resolve("bank.name") == "tao-skill-bank"
    assert ROOT["version"] == str(pins.resolve("bank.version"))
    assert ROOT["license"] == "Apache-2.0"
    assert 0 < len(ROOT["description"]) <= 1024
    assert ROOT["skills"] == skill_dirs(BANK)


def test_skill_dirs_are_every_skill_on_disk():
    on_disk = sorted(str(p.parent.relative_to(BANK)) for p in BANK.glob("skills/*/*/SKILL.md"))
    assert skill_dirs(BANK) == on_disk
    assert {"skills/core/tao-setup", "skills/core/tao-data-io", "skills/platform/tao-setup-nvidia-gpu-host"} <= set(on_disk)


@pytest.mark.parametrize("manifest", [CLAUDE, MARKET["plugins"][0], CODEX], ids=["claude", "marketplace-entry", "codex"])
def test_derived_manifests_agree_with_the_root(manifest):
    for key in ("name", "version", "description", "license"):
        assert manifest[key] == ROOT[key], key
    assert KEBAB.match(manifest["name"])


def test_marketplace_lists_every_skill_and_each_exists():
    assert KEBAB.match(MARKET["name"])
    assert MARKET["owner"]["name"]
    assert MARKET["metadata"]["version"] == ROOT["version"]
    (entry,) = MARKET["plugins"]
    assert entry["source"] == "./"
    # strict false: the entry is the whole component definition (nested skill folders need
    # explicit paths), so .claude-plugin/plugin.json must not declare components itself.
    assert entry["strict"] is False
    assert not {"skills", "hooks", "commands", "agents", "mcpServers"} & set(CLAUDE)
    assert entry["skills"] == [f"./{s}" for s in ROOT["skills"]]
    for path in entry["skills"]:
        assert path.startswith("./") and ".." not in path
        assert (BANK / path / "SKILL.md").is_file(), path


def test_codex_manifest_shape():
    assert sorted(p.name for p in (BANK / ".codex-plugin").iterdir()) == ["plugin.json"]
    assert CODEX["skills"] == "./skills/"
    assert CODEX["interface"]["displayName"]


def test_sync_check_passes_on_the_bank():
    proc = subprocess.run([sys.executable, str(BANK / "scripts/sync_plugin_manifests.py"), "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_sync_refuses_a_version_that_differs_from_versions_yaml(tmp_path):
    root = tmp_path / "bank"
    shutil.copytree(BANK, root, ignore=shutil.ignore_patterns(".git", "__pycache__", ".hypothesis", "testclusters"))
    p = root / "plugin.json"
    p.write_text(p.read_text().replace(f'"version": "{ROOT["version"]}"', '"version": "0.0.9"'))
    proc = subprocess.run([sys.executable, str(root / "scripts/sync_plugin_manifests.py")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: plugin.json version '0.0.9' differs from versions.yaml bank.version '{ROOT['version']}': edit plugin.json"


# ------------------------------------------------------------------ the SessionStart hook

def hook_command(plugin_root: Path) -> str:
    (entry,) = MARKET["plugins"]
    (group,) = entry["hooks"]["SessionStart"]
    (hook,) = group["hooks"]
    assert hook["type"] == "command" and hook["command"] == SESSION_HOOK
    # Claude Code substitutes ${CLAUDE_PLUGIN_ROOT} and also exports it to the hook.
    return hook["command"].replace("${CLAUDE_PLUGIN_ROOT}", str(plugin_root))


def plugin_copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(BANK / "scripts", root / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(BANK / "skills", root / "skills")
    shutil.copy(BANK / "versions.yaml", root / "versions.yaml")
    return root


@pytest.mark.parametrize("name", ["plain", "my bank's dir"])
def test_session_hook_exports_the_bank_path_for_later_shells(tmp_path, name):
    root = plugin_copy(tmp_path, name)
    env_file = tmp_path / "session-env.sh"
    env = {k: v for k, v in os.environ.items() if k not in ("TAO_SKILL_BANK_PATH", "CLAUDE_SKILL_DIR")}
    env.update(CLAUDE_ENV_FILE=str(env_file), CLAUDE_PLUGIN_ROOT=str(root))
    for _ in range(2):  # startup and resume: the line is written once
        proc = subprocess.run(["bash", "-c", hook_command(root)], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    assert len(env_file.read_text().splitlines()) == 1
    # A later Bash tool call sources the env file, then runs a skill snippet.
    snippet = f". {shlex_quote(env_file)}\n{BANK_LINE}\n{BANK_CHECK_LINE}\nprintf '%s' \"$BANK\"\n"
    env.pop("CLAUDE_ENV_FILE")
    out = subprocess.run(["bash", "-c", snippet], env=env, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout == str(root)


def shlex_quote(p: Path) -> str:
    import shlex

    return shlex.quote(str(p))


def test_session_hook_without_env_file_does_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_ENV_FILE"}
    proc = subprocess.run(["bash", "-c", hook_command(BANK)], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""


def test_session_hook_with_unwritable_env_file_warns_and_succeeds(tmp_path):
    env = dict(os.environ, CLAUDE_ENV_FILE=str(tmp_path / "no" / "such" / "dir" / "env.sh"))
    proc = subprocess.run(["bash", "-c", hook_command(BANK)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stderr.startswith("warning: cannot write ") and "export TAO_SKILL_BANK_PATH=" in proc.stderr


def test_print_gives_an_export_line_for_standalone_shells(tmp_path):
    root = plugin_copy(tmp_path, "clone with space")
    out = subprocess.run(
        ["bash", "-c", f'eval "$(python3 {shlex_quote(root / "scripts/plugin_session_env.py")} --print)"; printf %s "$TAO_SKILL_BANK_PATH"'],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 0 and out.stdout == str(root)
