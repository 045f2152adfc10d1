"""README "Installing": every command block runs as written, in a fresh HOME, with the
pinned CLIs on PATH; only <repo-url> is replaced (by a local git repository holding
the working tree). Each block must leave the bank usable from that client."""
from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from client_harness import (
    BANK,
    NAME,
    VERSION,
    claude_installed,
    claude_inventory,
    client_env,
    codex_plugin_skills,
    copy_bank,
    ok,
    run,
    skill_names,
)

from devtools.skill_lint import BANK_LINE

SKILLS = skill_names()
SECTION = (BANK / "README.md").read_text(encoding="utf-8").split("\n## Installing\n", 1)[1].split("\n## ", 1)[0]
BLOCKS = [m.group(1) for m in re.finditer(r"```bash\n(.*?)```", SECTION, re.S)]


def block(first_word: str) -> str:
    (found,) = [b for b in BLOCKS if b.split()[0] == first_word]
    return found


def test_the_section_has_one_block_per_install_path():
    assert [b.split()[:2] for b in BLOCKS] == [["git", "clone"], ["claude", "plugin"], ["codex", "plugin"], ["export", "TAO_SKILL_BANK_PATH=~/tao-skill-bank"]]


@pytest.fixture()
def user(tmp_path) -> tuple[dict[str, str], Path]:
    """A fresh HOME after the README's clone block, cloned from a repository of the working tree."""
    src = copy_bank(tmp_path / "upstream")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(src)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(git + args, check=True, capture_output=True, timeout=120)
    home = tmp_path / "home"
    env = client_env(home)
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    clone = block("git").replace("<repo-url>", str(src))
    ok(run(["bash", "-euo", "pipefail", "-c", clone], env, home))
    assert (home / "tao-skill-bank" / "versions.yaml").is_file()
    return env, home


def test_claude_code_block(user):
    env, home = user
    out = ok(run(["bash", "-euo", "pipefail", "-c", block("claude")], env, home)).stdout
    inv = claude_inventory(out)
    assert sorted(inv["Skills"]) == SKILLS and inv["Hooks"] == ["SessionStart"]
    entry = claude_installed(env, home)
    assert entry["enabled"] is True and not entry.get("errors") and entry["version"] == VERSION


def test_codex_block(user):
    env, home = user
    ok(run(["bash", "-euo", "pipefail", "-c", block("codex")], env, home))
    assert codex_plugin_skills(env, home) == SKILLS
    installed = home / ".codex" / "plugins" / "cache" / NAME / NAME / VERSION
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert config["shell_environment_policy"]["set"]["TAO_SKILL_BANK_PATH"] == str(installed)


def test_plain_shell_block(user):
    env, home = user
    script = block("export") + f"\n{BANK_LINE}\nprintf '%s\\n' \"$BANK\"\n"
    out = ok(run(["bash", "-euo", "pipefail", "-c", script], env, home)).stdout
    assert "OK: python3 " in out and out.splitlines()[-1] == str(home / "tao-skill-bank")
