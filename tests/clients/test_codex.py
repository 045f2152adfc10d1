"""The real Codex CLI (pinned in versions.yaml) adds the bank as a local marketplace,
installs the plugin with every skill, shows the short description, and after the one
documented line gives every shell it runs TAO_SKILL_BANK_PATH; a nested layout makes
the same checks fail."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from client_harness import (
    NAME,
    PLUGIN_ID,
    VERSION,
    AppServer,
    codex,
    codex_model_visible_skills,
    codex_plugin_skills,
    ok,
    run,
    skill_names,
)

from devtools.plugin_manifests import CODEX_MARKET, CODEX_SHORT_DESCRIPTION
from devtools.skill_lint import BANK_LINE

SKILLS = skill_names()


def install(env: dict[str, str], bank: Path, cwd: Path) -> dict:
    added = json.loads(ok(codex(env, "plugin", "marketplace", "add", "--json", bank, cwd=cwd)).stdout)
    assert added["marketplaceName"] == NAME and Path(added["installedRoot"]) == bank
    result = json.loads(ok(codex(env, "plugin", "add", "--json", PLUGIN_ID, cwd=cwd)).stdout)
    assert result["pluginId"] == PLUGIN_ID and result["version"] == VERSION
    return result


def test_marketplace_add_and_plugin_add_install_every_skill(bank, env, tmp_path):
    installed = Path(install(env, bank, tmp_path)["installedPath"])
    assert installed == Path(env["CODEX_HOME"]) / "plugins" / "cache" / NAME / NAME / VERSION
    assert codex_plugin_skills(env, tmp_path) == SKILLS
    assert codex_model_visible_skills(env, tmp_path) == SKILLS
    listed = json.loads(ok(codex(env, "plugin", "list", "--json", cwd=tmp_path)).stdout)["installed"]
    assert [(p["pluginId"], p["enabled"], p["version"]) for p in listed] == [(PLUGIN_ID, True, VERSION)]


def test_the_marketplace_file_codex_documents_is_the_one_read(bank, env, tmp_path):
    (bank / ".claude-plugin" / "marketplace.json").unlink()
    with AppServer(env, tmp_path) as server:
        plugin = server.call("plugin/read", {"pluginName": NAME, "marketplacePath": str(bank / CODEX_MARKET)})["plugin"]
    assert plugin["marketplaceName"] == NAME
    assert plugin["summary"]["interface"]["shortDescription"] == CODEX_SHORT_DESCRIPTION
    assert plugin["summary"]["localVersion"] == VERSION
    assert sorted(s["name"].split(":", 1)[1] for s in plugin["skills"]) == SKILLS
    install(env, bank, tmp_path)
    assert codex_plugin_skills(env, tmp_path) == SKILLS


def test_one_line_gives_every_codex_shell_the_bank(bank, env, tmp_path):
    installed = Path(install(env, bank, tmp_path)["installedPath"])
    snippet = f"{BANK_LINE}\nprintf '%s\\n' \"$BANK\"\npython3 \"$BANK/scripts/resolve_versions_key.py\" bank.version\n"
    before = run(["codex", "sandbox", "--", "bash", "-c", snippet], env, tmp_path)
    assert before.returncode == 1 and before.stdout.startswith("MISSING: TAO skill bank not found"), before.stdout + before.stderr
    line = ok(run(["bash", "-c", f"python3 {shlex.quote(str(bank))}/scripts/plugin_session_env.py --codex"], env, tmp_path))
    assert line.stdout.startswith(f"set: TAO_SKILL_BANK_PATH={installed} ")
    after = ok(run(["codex", "sandbox", "--", "bash", "-c", snippet], env, tmp_path))
    assert after.stdout.splitlines() == [str(installed), VERSION]
    # Codex keeps the setting when it rewrites its config.
    ok(codex(env, "plugin", "add", PLUGIN_ID, cwd=tmp_path))
    assert ok(run(["codex", "sandbox", "--", "bash", "-c", snippet], env, tmp_path)).stdout.splitlines()[0] == str(installed)


def test_nested_skills_install_but_load_nothing(bank, env, tmp_path):
    (bank / "skills" / "core").mkdir()
    for name in SKILLS:
        (bank / "skills" / name).rename(bank / "skills" / "core" / name)
    install(env, bank, tmp_path)
    assert codex_plugin_skills(env, tmp_path) == []
    assert codex_model_visible_skills(env, tmp_path) == []
