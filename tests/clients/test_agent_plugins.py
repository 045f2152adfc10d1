"""plugin.json is a valid Agent Plugins 1.0.0 manifest and an Agent Plugins client finds
every skill, as checked by skillsaw (a real validator, pinned in requirements-dev.txt);
its Claude Code and Codex manifest rules pass too. Planted breaks fail the same checks."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from client_harness import skill_names

SKILLS = skill_names()
#: skillsaw rule families that judge packaging (the content rules, such as token budgets, are not ours here).
PACKAGING = ("agent-plugin-", "codex-", "marketplace-", "plugin-")


def skillsaw(root: Path, *args: str) -> dict:
    exe = shutil.which("skillsaw")
    if not exe:
        pytest.fail("skillsaw not found: python3 -m pip install -r requirements-dev.txt", pytrace=False)
    proc = subprocess.run([exe, "lint", "--format", "json", *args, str(root)], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def packaging_violations(report: dict) -> list[str]:
    return [f"{v['rule_id']}: {v.get('file_path')}: {v['message']}" for v in report["violations"] if v["rule_id"].startswith(PACKAGING)]


def test_detected_as_every_package_kind_with_every_skill_and_no_error(bank):
    report = skillsaw(bank)
    assert {"agent-plugin", "codex-plugin", "codex-marketplace", "marketplace"} <= set(report["stats"]["repo_types"])
    assert report["summary"]["errors"] == 0, report["violations"]
    assert packaging_violations(report) == []
    assert report["stats"]["skills"] == len(SKILLS)


def test_an_agent_plugins_client_discovers_every_skill(bank):
    report = skillsaw(bank, "--type", "agent-plugin")
    assert report["stats"]["skills"] == len(SKILLS) and report["stats"]["plugins"] == 1
    assert report["summary"]["errors"] == 0 and packaging_violations(report) == []


def test_nested_skills_are_not_discovered(bank):
    (bank / "skills" / "core").mkdir()
    for name in SKILLS:
        (bank / "skills" / name).rename(bank / "skills" / "core" / name)
    assert skillsaw(bank, "--type", "agent-plugin")["stats"]["skills"] == 0


def test_a_key_outside_the_closed_schema_is_reported(bank):
    p = bank / "plugin.json"
    data = json.loads(p.read_text())
    data["skills"] = [f"skills/{s}" for s in SKILLS]
    p.write_text(json.dumps(data))
    found = packaging_violations(skillsaw(bank, "--type", "agent-plugin"))
    assert any(v.startswith("agent-plugin-json-valid: ") and "skills" in v for v in found), found


def test_a_wrong_schema_is_an_error(bank):
    p = bank / "plugin.json"
    p.write_text(p.read_text().replace("/schemas/1.0.0/", "/schemas/9.0.0/"))
    report = skillsaw(bank, "--type", "agent-plugin")
    assert report["summary"]["errors"] >= 1 and any(v.startswith("agent-plugin-json-valid: ") for v in packaging_violations(report))
