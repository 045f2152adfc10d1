"""plugin_session_env.py --codex: one line sets TAO_SKILL_BANK_PATH for every shell Codex runs,
by editing ~/.codex/config.toml without breaking what is already there. (The real Codex reading
the result is tested in tests/clients/test_codex.py.)"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[2]
SCRIPT = BANK / "scripts" / "plugin_session_env.py"
_spec = importlib.util.spec_from_file_location("plugin_session_env", SCRIPT)
pse = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pse)


def policy(config: Path) -> dict:
    return tomllib.loads(config.read_text(encoding="utf-8"))["shell_environment_policy"]["set"]


def test_new_config_gets_the_table(tmp_path):
    config = tmp_path / "config.toml"
    assert pse.set_codex_env(config, "/opt/bank") is True
    assert config.read_text() == '[shell_environment_policy.set]\nTAO_SKILL_BANK_PATH = "/opt/bank"\n'
    assert config.stat().st_mode & 0o777 == 0o600
    assert pse.set_codex_env(config, "/opt/bank") is False


def test_existing_tables_and_keys_are_kept(tmp_path):
    config = tmp_path / "config.toml"
    before = 'model = "o3"\n\n[shell_environment_policy]\ninherit = "all"\n\n[plugins."tao-skill-bank@tao-skill-bank"]\nenabled = true\n'
    config.write_text(before)
    config.chmod(0o640)
    pse.set_codex_env(config, "/opt/bank")
    data = tomllib.loads(config.read_text())
    assert data["model"] == "o3" and data["shell_environment_policy"]["inherit"] == "all"
    assert data["plugins"]["tao-skill-bank@tao-skill-bank"]["enabled"] is True
    assert policy(config) == {"TAO_SKILL_BANK_PATH": "/opt/bank"}
    assert config.read_text().startswith(before) and config.stat().st_mode & 0o777 == 0o640


def test_existing_set_table_gets_the_key_and_a_new_path_replaces_the_old(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[shell_environment_policy.set]\nFOO = "bar"\n\n[features]\nhooks = true\n')
    pse.set_codex_env(config, "/opt/bank-0.1.0")
    pse.set_codex_env(config, "/opt/bank-0.2.0")
    assert policy(config) == {"FOO": "bar", "TAO_SKILL_BANK_PATH": "/opt/bank-0.2.0"}
    assert tomllib.loads(config.read_text())["features"] == {"hooks": True}
    assert config.read_text().count("TAO_SKILL_BANK_PATH") == 1


@pytest.mark.parametrize("path", ['/home/a "quoted" dir', "/home/back\\slash", "/home/ünïcode/bank", "/tmp/tab\there"])
def test_any_path_round_trips(tmp_path, path):
    config = tmp_path / "config.toml"
    pse.set_codex_env(config, path)
    assert policy(config)["TAO_SKILL_BANK_PATH"] == path


@pytest.mark.parametrize("text", [
    'shell_environment_policy.set.FOO = "bar"\n',
    'shell_environment_policy = { inherit = "all" }\n',
    '[shell_environment_policy]\nset = { FOO = "bar" }\n',
])
def test_an_inline_definition_is_left_alone_with_the_line_to_add(tmp_path, text):
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(pse.ConfigError, match=r"add TAO_SKILL_BANK_PATH = \"/opt/bank\" to it by hand"):
        pse.set_codex_env(config, "/opt/bank")
    assert config.read_text() == text


def test_a_broken_config_is_not_written(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[features\n")
    with pytest.raises(pse.ConfigError, match="would not be valid TOML"):
        pse.set_codex_env(config, "/opt/bank")
    assert config.read_text() == "[features\n"


def bank_copy(tmp_path: Path) -> Path:
    root = tmp_path / "clone"
    shutil.copytree(BANK / "scripts", root / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(BANK / "versions.yaml", root / "versions.yaml")
    return root


def run(root: Path, codex_home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, CODEX_HOME=str(codex_home))
    return subprocess.run([sys.executable, str(root / "scripts/plugin_session_env.py"), "--codex"], env=env, capture_output=True, text=True, timeout=60)


def test_codex_mode_needs_the_installed_copy_first(tmp_path):
    name, version = pse.bank_identity(BANK)
    proc = run(bank_copy(tmp_path), tmp_path / "codex")
    assert proc.returncode == 1 and proc.stdout == ""
    want = f"error: Codex has no installed copy of {name} {version} at {tmp_path / 'codex'}/plugins/cache/{name}/{name}/{version}: run 'codex plugin add {name}@{name}' first\n"
    assert proc.stderr == want
    assert not (tmp_path / "codex" / "config.toml").exists()


def test_codex_mode_points_at_the_installed_copy_of_this_version(tmp_path):
    name, version = pse.bank_identity(BANK)
    home = tmp_path / "codex"
    installed = home / "plugins" / "cache" / name / name / version
    installed.mkdir(parents=True)
    (installed / "versions.yaml").write_text("bank: {}\n")
    root = bank_copy(tmp_path)
    first, again = run(root, home), run(root, home)
    assert first.returncode == 0 and first.stdout == f"set: TAO_SKILL_BANK_PATH={installed} for Codex shells ({home / 'config.toml'})\n"
    assert again.returncode == 0 and again.stdout.startswith("already set: ")
    assert policy(home / "config.toml") == {"TAO_SKILL_BANK_PATH": str(installed)}
