"""The bank line (devtools.skill_lint.BANK_LINE, shown in skills/tao-setup/SKILL.md and once at the top of every
skill's first block), run as an agent's shell runs it: with and without TAO_SKILL_BANK_PATH / CLAUDE_SKILL_DIR, as
Claude Code substitutes ${CLAUDE_SKILL_DIR} into the skill text, and with a wrong path (one actionable line, exit 1,
nothing after it runs)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from devtools.skill_lint import BANK_LINE, SHELLCHECK_EXCLUDE, code_blocks

BANK = Path(__file__).resolve().parents[2]
AFTER = '\ncd "$BANK" && pwd -P\necho after\n'


def run(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("TAO_SKILL_BANK_PATH", "CLAUDE_SKILL_DIR")}
    return subprocess.run(["bash", "-c", script], env={**base, **env}, capture_output=True, text=True, timeout=30, cwd=cwd)


def test_tao_skill_bank_path_wins(tmp_path):
    """Claude Code's hook and Codex's config line both set TAO_SKILL_BANK_PATH: it wins over the skill folder."""
    out = run(BANK_LINE + AFTER, tmp_path, TAO_SKILL_BANK_PATH=str(BANK), CLAUDE_SKILL_DIR=str(tmp_path))
    assert (out.returncode, out.stdout, out.stderr) == (0, f"{BANK.resolve()}\nafter\n", "")


def test_skill_folder_fallback(tmp_path):
    """Claude Code without the hook: CLAUDE_SKILL_DIR in the environment, two folders below the bank."""
    out = run(BANK_LINE + AFTER, tmp_path, CLAUDE_SKILL_DIR=str(BANK / "skills/tao-run-on-docker"))
    assert (out.returncode, out.stdout) == (0, f"{BANK.resolve()}\nafter\n"), out.stderr


def test_claude_code_text_substitution(tmp_path):
    """Claude Code replaces ${CLAUDE_SKILL_DIR} in the skill's text before the model copies the block."""
    line = BANK_LINE.replace("${CLAUDE_SKILL_DIR}", str(BANK / "skills/tao-setup"))
    out = run(line + AFTER, tmp_path)
    assert (out.returncode, out.stdout) == (0, f"{BANK.resolve()}\nafter\n"), out.stderr


@pytest.mark.parametrize("env", [{}, {"TAO_SKILL_BANK_PATH": "/nonexistent/tao-skill-bank"}, {"CLAUDE_SKILL_DIR": "/tmp"}],
                         ids=["codex-without-config-line", "wrong-path", "skill-outside-a-bank"])
def test_no_bank_is_one_actionable_line_and_stops(tmp_path, env):
    out = run(BANK_LINE + AFTER, tmp_path, **env)
    assert out.returncode == 1 and out.stderr == ""
    (line,) = out.stdout.splitlines()
    assert line.startswith("MISSING: TAO skill bank not found at '") and "export TAO_SKILL_BANK_PATH=" in line, line
    assert "tao-setup" in line
    if env.get("TAO_SKILL_BANK_PATH"):
        assert "/nonexistent/tao-skill-bank" in line


def test_a_folder_without_versions_yaml_is_not_a_bank(tmp_path):
    fake = tmp_path / "not-a-bank"
    (fake / "scripts").mkdir(parents=True)
    out = run(BANK_LINE + AFTER, tmp_path, TAO_SKILL_BANK_PATH=str(fake))
    assert out.returncode == 1 and out.stdout.count("\n") == 1 and str(fake) in out.stdout


def test_a_later_block_runs_after_the_first_in_one_shell(tmp_path):
    """What every SKILL.md relies on: its first block's bank line, then any later block in the same shell."""
    text = (BANK / "skills/tao-setup/SKILL.md").read_text(encoding="utf-8")
    later = next(b for b in code_blocks(text) if any("check_host.py" in ln for ln in b.lines))
    script = BANK_LINE + "\n" + later.lines[0].replace("--platform kubernetes", "--help") + "\n"
    out = run(script, tmp_path, TAO_SKILL_BANK_PATH=str(BANK))
    assert out.returncode == 0 and "--platform" in out.stdout, out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (the skill lint needs it too)")
def test_the_line_passes_shellcheck(tmp_path):
    script = tmp_path / "line.sh"
    script.write_text("#!/bin/bash\n" + BANK_LINE + "\n" + 'echo "$BANK"\n')
    out = subprocess.run(["shellcheck", "-s", "bash", "-e", SHELLCHECK_EXCLUDE, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout
    # and with nothing excluded: it must not lean on the exclusions
    out = subprocess.run(["shellcheck", "-s", "bash", str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout
