"""Plugin packaging as data: one name and version (versions.yaml) in every manifest,
plugin.json a closed Agent Plugins 1.0.0 manifest, skills discovered by convention,
two declared components (Claude Code's SessionStart hook, the MCP server in Claude Code's manifest and in
Agent Plugins' mcp.json), and the two ways the
bank path reaches an agent's shells (the Claude Code hook, the Codex config line).
What the real clients make of these files is tested in tests/clients/."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.plugin_manifests import (
    AGENT_MCP_SCHEMA,
    AGENT_PLUGINS_FIELDS,
    AGENT_PLUGINS_SCHEMA,
    CODEX_SHORT_DESCRIPTION,
    SESSION_HOOK,
    SHORT_DESCRIPTION_MAX,
    skill_dirs,
)
from devtools.skill_lint import BANK_LINE
from taobank import pins

BANK = Path(__file__).resolve().parents[2]
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
COMPONENT_KEYS = {"skills", "hooks", "commands", "agents", "mcpServers", "lspServers", "outputStyles", "monitors"}


def load(rel: str) -> dict:
    return json.loads((BANK / rel).read_text(encoding="utf-8"))


ROOT = load("plugin.json")
CLAUDE = load(".claude-plugin/plugin.json")
MARKET = load(".claude-plugin/marketplace.json")
CODEX = load(".codex-plugin/plugin.json")
CODEX_MARKET = load(".agents/plugins/marketplace.json")
AGENT_MCP = load("mcp.json")
NAME = pins.resolve("bank.name")
VERSION = str(pins.resolve("bank.version"))


def test_root_manifest_is_agent_plugins_1_0_0_with_only_its_keys():
    assert ROOT["$schema"] == AGENT_PLUGINS_SCHEMA
    assert list(ROOT) == [k for k in AGENT_PLUGINS_FIELDS if k in ROOT], "unknown key or order differs"
    assert re.fullmatch(r"(?!.*(?:--|\.\.))[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?", ROOT["name"]) and len(ROOT["name"]) <= 64
    assert (ROOT["name"], ROOT["version"]) == (NAME, VERSION) == ("tao-skill-bank", VERSION)
    assert ROOT["license"] == "Apache-2.0" and 0 < len(ROOT["description"]) <= 1024


def test_license_file_is_the_apache_2_0_text_the_manifests_claim():
    text = (BANK / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


def test_one_version_everywhere_and_the_changelog_names_it():
    assert {CLAUDE["version"], MARKET["metadata"]["version"], MARKET["plugins"][0]["version"], CODEX["version"], ROOT["version"]} == {VERSION}
    entries = re.findall(r"^## (\d+\.\d+\.\d+)", (BANK / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert entries[0] == VERSION and len(entries) == len(set(entries))


def test_skills_sit_directly_under_skills_where_every_client_looks():
    on_disk = sorted(p.parent.relative_to(BANK).as_posix() for p in BANK.rglob("SKILL.md"))
    assert on_disk == skill_dirs(BANK) == [f"skills/{n}" for n in ("tao-data-io", "tao-run-on-docker", "tao-run-on-kubernetes", "tao-run-on-slurm", "tao-setup", "tao-setup-nvidia-gpu-host")]


@pytest.mark.parametrize("manifest", [CLAUDE, MARKET["plugins"][0], CODEX], ids=["claude", "claude-marketplace-entry", "codex"])
def test_client_manifests_agree_with_the_root(manifest):
    for key in ("name", "version", "description", "license", "author", "keywords"):
        assert manifest[key] == ROOT[key], key
    assert KEBAB.match(manifest["name"])


def test_claude_components_are_declared_in_one_place():
    (entry,) = MARKET["plugins"]
    assert MARKET["name"] == NAME and MARKET["owner"] == ROOT["author"]
    assert entry["source"] == "./"
    # Default strict mode: the plugin's own manifest is the authority; the entry adds no components.
    assert "strict" not in entry and not COMPONENT_KEYS & set(entry)
    assert set(CLAUDE) & COMPONENT_KEYS == {"hooks", "mcpServers"}, "skills are discovered under skills/, not listed"


def test_the_mcp_server_is_declared_for_claude_code_and_agent_plugins():
    """One server, scripts/tao_mcp.py, started with python3 from the plugin's root as each client spells it."""
    assert CLAUDE["mcpServers"] == {"tao": {"command": "python3", "args": ["${CLAUDE_PLUGIN_ROOT}/scripts/tao_mcp.py"]}}
    assert AGENT_MCP == {"$schema": AGENT_MCP_SCHEMA, "mcpServers": {
        "tao": {"type": "stdio", "command": "python3", "args": ["${PLUGIN_ROOT}/scripts/tao_mcp.py"]}}}
    assert (BANK / "scripts" / "tao_mcp.py").is_file()


def test_codex_manifest_and_marketplace():
    assert sorted(p.name for p in (BANK / ".codex-plugin").iterdir()) == ["plugin.json"]
    assert CODEX["skills"] == "./skills/"
    ui = CODEX["interface"]
    assert ui["shortDescription"] == CODEX_SHORT_DESCRIPTION and len(ui["shortDescription"]) <= SHORT_DESCRIPTION_MAX < len(ROOT["description"])
    assert ui["displayName"] and ui["developerName"] == ROOT["author"]["name"]
    (entry,) = CODEX_MARKET["plugins"]
    assert CODEX_MARKET["name"] == NAME and entry["name"] == NAME
    assert entry["source"] == {"source": "local", "path": "./"} and entry["policy"]["installation"] == "AVAILABLE"


def test_sync_check_passes_on_the_bank():
    proc = subprocess.run([sys.executable, str(BANK / "scripts/sync_plugin_manifests.py"), "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_sync_rewrites_a_drifted_manifest_and_check_names_it(tmp_path):
    root = tmp_path / "bank"
    shutil.copytree(BANK, root, ignore=shutil.ignore_patterns(".git", "__pycache__", ".hypothesis", "testclusters"))
    p = root / ".claude-plugin/marketplace.json"
    p.write_text(p.read_text().replace('"source": "./"', '"source": "./",\n      "strict": false'))
    script = [sys.executable, str(root / "scripts/sync_plugin_manifests.py")]
    check = subprocess.run(script + ["--check"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 1
    assert re.fullmatch(r"\.claude-plugin/marketplace.json:\d+: plugins\[0\]\.strict unexpected \(value false\): run scripts/sync_plugin_manifests.py\n", check.stdout)
    proc = subprocess.run(script, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "wrote .claude-plugin/marketplace.json\n", proc.stdout + proc.stderr
    assert p.read_text() == (BANK / ".claude-plugin/marketplace.json").read_text()


def test_sync_writes_the_mcp_declaration_and_check_names_a_missing_one(tmp_path):
    root = tmp_path / "bank"
    shutil.copytree(BANK, root, ignore=shutil.ignore_patterns(".git", "__pycache__", ".hypothesis", "testclusters"))
    (root / "mcp.json").unlink()
    claude = root / ".claude-plugin/plugin.json"
    claude.write_text(json.dumps({k: v for k, v in json.loads(claude.read_text()).items() if k != "mcpServers"}))
    script = [sys.executable, str(root / "scripts/sync_plugin_manifests.py")]
    check = subprocess.run(script + ["--check"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 1
    assert "mcp.json:1: missing: run scripts/sync_plugin_manifests.py" in check.stdout
    assert re.search(r"\.claude-plugin/plugin.json:\d+: mcpServers missing, expected", check.stdout), check.stdout
    proc = subprocess.run(script, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and sorted(proc.stdout.split()) == sorted(
        "wrote .claude-plugin/plugin.json wrote mcp.json".split()), proc.stdout + proc.stderr
    for rel in ("mcp.json", ".claude-plugin/plugin.json"):
        assert (root / rel).read_text() == (BANK / rel).read_text()


# ------------------------------------------------------------------ the SessionStart hook

def hook_command(plugin_root: Path) -> str:
    (group,) = CLAUDE["hooks"]["SessionStart"]
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
    snippet = f". {shlex_quote(env_file)}\n{BANK_LINE}\nprintf '%s' \"$BANK\"\n"
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
