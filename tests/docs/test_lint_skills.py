"""lint_skills.py passes on the bank and fails, with one clear line, on each planted break.

Each case copies the bank to a tmp folder, breaks one thing, and lints the
copy (in-process for the fast rules, through the CLI for the rules that call
stamp_versions.py and agentskills).
"""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from devtools import skill_lint
from devtools.skill_lint import BANK_LINE, RULES, lint

BANK = Path(__file__).resolve().parents[2]
LINT = BANK / "scripts" / "lint_skills.py"
SETUP = "skills/tao-setup/SKILL.md"
GPU = "skills/tao-setup-nvidia-gpu-host/SKILL.md"
GPU_SCRIPT = "skills/tao-setup-nvidia-gpu-host/scripts/setup-nvidia-gpu-host.sh"
def run_lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "scripts" / "lint_skills.py")], capture_output=True, text=True, timeout=300)


def lines_of(problems) -> list[str]:
    return [str(p) for p in problems]


def edit(root: Path, rel: str, old: str, new: str) -> None:
    p = root / rel
    text = p.read_text(encoding="utf-8")
    assert old in text, f"planting failed: {old!r} not in {rel}"
    p.write_text(text.replace(old, new, 1), encoding="utf-8")


def line_no(root: Path, rel: str, needle: str) -> int:
    for n, line in enumerate((root / rel).read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return n
    raise AssertionError(f"{needle!r} not in {rel}")


def assert_one(problems, pattern: str) -> None:
    found = [s for s in lines_of(problems) if re.fullmatch(pattern, s)]
    assert found, f"no problem matches {pattern!r}; got:\n" + "\n".join(lines_of(problems))


# ------------------------------------------------------------------ the bank itself

def test_bank_passes_the_full_lint():
    proc = subprocess.run([sys.executable, str(LINT)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all skills pass" in proc.stdout


def test_every_problem_line_has_the_documented_shape(bank_copy):
    edit(bank_copy, SETUP, "name: tao-setup", "name: Tao_Setup")
    proc = run_lint(bank_copy)
    assert proc.returncode == 1
    out = [ln for ln in proc.stdout.splitlines() if ln]
    assert out
    for ln in out:
        m = re.fullmatch(r"(\S+):(\d+): ([a-z-]+): (.+)", ln)
        assert m, ln
        assert m.group(3) in RULES


def test_rules_are_listed():
    proc = subprocess.run([sys.executable, str(LINT), "--rules"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for rule in RULES:
        assert f"{rule}: " in proc.stdout


def test_no_skills_folder_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, str(LINT), "--root", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "no skills/ folder" in proc.stderr


# ------------------------------------------------------------------ frontmatter, name, description, length

def test_unknown_frontmatter_field(bank_copy):
    edit(bank_copy, SETUP, "license: Apache-2.0", "license: Apache-2.0\nversion: 1")
    n = line_no(bank_copy, SETUP, "version: 1")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:{n}: frontmatter: field 'version' is not allowed; .*")


def test_invalid_frontmatter_yaml(bank_copy):
    edit(bank_copy, SETUP, "license: Apache-2.0", "license: [Apache-2.0")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:\d+: frontmatter: invalid YAML: .*")


def test_missing_frontmatter(bank_copy):
    p = bank_copy / SETUP
    p.write_text(p.read_text().replace("---\n", "", 1))
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:1: frontmatter: no YAML frontmatter: .*")


def test_name_differs_from_folder(bank_copy):
    edit(bank_copy, SETUP, "name: tao-setup", "name: tao-setup-x")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:2: name: name 'tao-setup-x' differs from the folder 'tao-setup': .*")


@pytest.mark.parametrize("bad", ["Tao-Setup", "tao--setup", "-tao", "tao_setup", "a" * 65])
def test_name_pattern(bank_copy, bad):
    folder = bank_copy / "skills" / bad
    (bank_copy / "skills/tao-setup").rename(folder)
    edit(bank_copy, f"skills/{bad}/SKILL.md", "name: tao-setup", f"name: {bad}")
    assert_one(lint(bank_copy, external=False), rf"skills/{re.escape(bad)}/SKILL.md:2: name: name '{re.escape(bad)}' must match .*")


def test_description_with_angle_bracket(bank_copy):
    edit(bank_copy, SETUP, "description: First-run", "description: <b>First-run")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:3: description: description contains '<' or '>': .*")


def test_description_too_long(bank_copy):
    edit(bank_copy, SETUP, "description: First-run", "description: " + "x" * 1100 + " First-run")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:3: description: description is \d+ characters; at most 1024")


def test_description_missing(bank_copy):
    p = bank_copy / SETUP
    p.write_text(re.sub(r"(?m)^description: .*\n", "", p.read_text(), count=1))
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:1: description: missing description: .*")


def test_skill_md_too_long(bank_copy):
    p = bank_copy / SETUP
    p.write_text(p.read_text() + "filler\n" * 500)
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:500: length: SKILL.md has \d+ lines; keep it under 500 .*")


# ------------------------------------------------------------------ links, paths, exec bits

def test_broken_relative_link(bank_copy):
    p = bank_copy / SETUP
    p.write_text(p.read_text() + "\nSee [the guide](references/guide.md#top).\n")
    n = line_no(bank_copy, SETUP, "[the guide]")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:{n}: link: link target 'references/guide.md#top' does not exist .*")


def test_existing_link_and_urls_pass(bank_copy):
    refs = bank_copy / "skills/tao-setup/references"
    refs.mkdir(exist_ok=True)
    (refs / "guide.md").write_text("# Guide\n")
    p = bank_copy / SETUP
    p.write_text(p.read_text() + "\nSee [guide](references/guide.md), [web](https://example.com/x) and [top](#top).\n")
    assert not [s for s in lines_of(lint(bank_copy, external=False)) if ": link: " in s]


def test_mentioned_script_missing(bank_copy):
    p = bank_copy / SETUP
    p.write_text(p.read_text() + "\nRun `scripts/no_such_helper.py --help` first.\n")
    n = line_no(bank_copy, SETUP, "no_such_helper")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:{n}: path: scripts/no_such_helper.py does not exist \(looked in .*\)")


def test_bank_prefixed_path_missing(bank_copy):
    edit(bank_copy, SETUP, '"$BANK/scripts/check_host.py" --platform kubernetes', '"$BANK/scripts/check_hosts.py" --platform kubernetes')
    n = line_no(bank_copy, SETUP, "check_hosts.py")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:{n}: path: \$BANK/scripts/check_hosts.py does not exist under the bank root")


def test_skill_relative_scripts_path_resolves(bank_copy):
    # scripts/ is looked up in the bank root, then in the skill folder
    p = bank_copy / GPU
    p.write_text(p.read_text() + "\nThe checker is `scripts/setup-nvidia-gpu-host.sh` in this folder.\n")
    assert not [s for s in lines_of(lint(bank_copy, external=False)) if ": path: " in s]


def test_script_run_directly_needs_exec_bit(bank_copy):
    script = bank_copy / "scripts/check_host.py"
    script.chmod(script.stat().st_mode & ~(stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    probs = lint(bank_copy, external=False)
    n = line_no(bank_copy, SETUP, '"$BANK/scripts/check_host.py" --platform kubernetes')
    assert_one(probs, rf"{SETUP}:{n}: exec-bit: scripts/check_host.py is run directly but is not executable: chmod \+x scripts/check_host.py .*")
    assert_one(probs, r"scripts/check_host.py:1: exec-bit: has a '#!' line but no executable bit: chmod \+x scripts/check_host.py .*")


def test_script_run_through_a_variable_needs_exec_bit(bank_copy):
    script = bank_copy / GPU_SCRIPT
    script.chmod(0o644)
    n = line_no(bank_copy, GPU, '"$GPU_HOST_SETUP" --backend kubernetes --check-only')
    assert_one(lint(bank_copy, external=False), rf"{GPU}:{n}: exec-bit: skills/tao-setup-nvidia-gpu-host/scripts/setup-nvidia-gpu-host.sh is run directly .*")


def test_script_run_through_python3_needs_no_exec_bit(bank_copy):
    script = bank_copy / "scripts/plugin_session_env.py"
    script.chmod(0o644)
    probs = [s for s in lines_of(lint(bank_copy, external=False)) if "exec-bit" in s]
    # only the blanket '#!' rule fires, not a run-site rule for `python3 "$BANK/scripts/..."`
    assert probs == ["scripts/plugin_session_env.py:1: exec-bit: has a '#!' line but no executable bit: chmod +x scripts/plugin_session_env.py (git keeps the bit)"]


def test_git_keeps_the_exec_bit_of_every_script():
    out = subprocess.run(["git", "ls-files", "-s", "scripts", "skills"], cwd=BANK, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        mode, _, _, path = line.split(None, 3)
        p = BANK / path
        if p.suffix in (".py", ".sh") and p.read_bytes()[:2] == b"#!":
            assert mode == "100755", f"{path} is committed without its run bit ({mode})"


# ------------------------------------------------------------------ shellcheck, references, bank-locate

def test_shellcheck_failure_maps_to_the_skill_line(bank_copy):
    p = bank_copy / SETUP
    p.write_text(p.read_text() + "\n```bash\necho ok\ncd /tmp\n```\n")
    n = line_no(bank_copy, SETUP, "cd /tmp")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:{n}: shellcheck: SC2164 \(warning\) col 1: Use 'cd \.\.\. \|\| exit' .*")


def test_sh_blocks_and_references_are_shellchecked(bank_copy):
    refs = bank_copy / "skills/tao-setup/references"
    refs.mkdir(exist_ok=True)
    (refs / "more.md").write_text("# More\n\n```sh\nrm -rf $TARGET/\n```\n")
    assert_one(lint(bank_copy, external=False), r"skills/tao-setup/references/more.md:4: shellcheck: SC2115 .*|skills/tao-setup/references/more.md:4: shellcheck: SC2086 .*")


def test_references_one_level_deep(bank_copy):
    sub = bank_copy / "skills/tao-setup/references/deep"
    sub.mkdir(parents=True)
    (sub / "x.md").write_text("# x\n")
    assert_one(lint(bank_copy, external=False), r"skills/tao-setup/references/deep:1: references-depth: references/ must be one level deep: .*")


def test_bank_line_must_be_canonical(bank_copy):
    edit(bank_copy, GPU, BANK_LINE, 'BANK="${TAO_SKILL_BANK_PATH:-$PWD}"')
    n = line_no(bank_copy, GPU, 'BANK="${TAO_SKILL_BANK_PATH:-$PWD}"')
    assert_one(lint(bank_copy, external=False), rf"{GPU}:{n}: bank-locate: BANK= differs from the canonical bank line; use exactly: .*")


def test_the_old_two_line_guard_is_refused(bank_copy):
    old = BANK_LINE.replace('"; [ -f ', '"\n[ -f ', 1)
    edit(bank_copy, GPU, BANK_LINE, old)
    n = line_no(bank_copy, GPU, 'BANK="${TAO_SKILL_BANK_PATH')
    assert_one(lint(bank_copy, external=False), rf"{GPU}:{n}: bank-locate: BANK= differs from the canonical bank line; .*")


def test_bank_line_once_per_skill(bank_copy):
    p = bank_copy / GPU
    p.write_text(p.read_text() + f"\n```bash\n{BANK_LINE}\necho \"$BANK\"\n```\n")
    n = len(p.read_text().splitlines()) - 2
    assert_one(lint(bank_copy, external=False), rf"{GPU}:{n}: bank-locate: the bank line appears again: a SKILL.md carries it once, .*")


def test_a_reference_relies_on_its_skill_md(bank_copy):
    ref = "skills/tao-setup/references/install.md"
    p = bank_copy / ref
    p.write_text(p.read_text() + f"\n```bash\n{BANK_LINE}\n\"$BANK/scripts/check_host.py\" --platform slurm\n```\n")
    n = len(p.read_text().splitlines()) - 2
    assert_one(lint(bank_copy, external=False), rf"{ref}:{n}: bank-locate: a reference repeats the bank line: .*")


def test_bank_used_before_it_is_set(bank_copy):
    p = bank_copy / GPU
    text = p.read_text().replace(BANK_LINE + "\n", "", 1)
    p.write_text(text)
    n = line_no(bank_copy, GPU, 'GPU_HOST_SETUP="$BANK/')
    assert_one(lint(bank_copy, external=False), rf"{GPU}:{n}: bank-locate: \$BANK used before it is set: .*")


def test_canonical_line_is_in_tao_setup_and_once_in_every_skill():
    assert BANK_LINE + "\n" in (BANK / SETUP).read_text()
    for md in sorted(BANK.glob("skills/*/SKILL.md")):
        text = md.read_text()
        assert text.count("BANK=") == 1 and text.count(BANK_LINE) == 1, md
    for ref in sorted(BANK.glob("skills/*/references/*.md")):
        assert BANK_LINE not in ref.read_text(), ref


# ------------------------------------------------------------------ manifests, stamp, agentskills (CLI)

def test_manifest_version_must_follow_versions_yaml(bank_copy):
    version = json.loads((bank_copy / "plugin.json").read_text())["version"]
    edit(bank_copy, "versions.yaml", f'version: "{version}"', 'version: "9.9.9"')
    probs = lines_of(lint(bank_copy, external=False))
    assert f'plugin.json:4: manifest: version is "{version}", expected "9.9.9" (from versions.yaml bank.version): run scripts/sync_plugin_manifests.py' in probs, probs
    assert any(re.fullmatch(rf"CHANGELOG.md:\d+: manifest: newest entry is {re.escape(version)}, versions.yaml bank.version is 9\.9\.9: .*", s) for s in probs), probs
    # The sync refuses until the bump is documented, then stamps every manifest.
    sync = [sys.executable, str(bank_copy / "scripts/sync_plugin_manifests.py")]
    proc = subprocess.run(sync, capture_output=True, text=True, timeout=60)
    n = line_no(bank_copy, "CHANGELOG.md", f"## {version}")
    assert proc.returncode == 1
    assert proc.stderr == f"error: CHANGELOG.md:{n}: newest entry is {version}, versions.yaml bank.version is 9.9.9: add a '## 9.9.9' entry above it\n"
    edit(bank_copy, "CHANGELOG.md", f"## {version}", f"## 9.9.9 - today\n\n- A change.\n\n## {version}")
    proc = subprocess.run(sync, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not [s for s in lines_of(lint(bank_copy, external=False)) if ": manifest: " in s]
    for rel in ("plugin.json", ".claude-plugin/plugin.json", ".claude-plugin/marketplace.json", ".codex-plugin/plugin.json"):
        assert '"version": "9.9.9"' in (bank_copy / rel).read_text(), rel


def test_derived_manifest_drift(bank_copy):
    p = bank_copy / ".codex-plugin/plugin.json"
    p.write_text(p.read_text().replace('"name": "tao-skill-bank"', '"name": "tao-bank"', 1))
    assert_one(lint(bank_copy, external=False), r"\.codex-plugin/plugin.json:2: manifest: name is \"tao-bank\", expected \"tao-skill-bank\" \(from versions.yaml bank.name\): run scripts/sync_plugin_manifests.py")


def test_root_manifest_is_a_closed_agent_plugins_manifest(bank_copy):
    edit(bank_copy, "plugin.json", '"license"', '"skills": ["skills/tao-setup"],\n  "license"')
    assert_one(lint(bank_copy, external=False), r'plugin.json:\d+: manifest: skills unexpected \(value \["skills/tao-setup"\]\): run scripts/sync_plugin_manifests.py')
    edit(bank_copy, "plugin.json", '"$schema": "https://agent-plugins.org/schemas/1.0.0/', '"$schema": "https://agent-plugins.org/schemas/0.9.0/')
    assert any(s.startswith("plugin.json:2: manifest: $schema is ") for s in lines_of(lint(bank_copy, external=False)))


def test_a_new_skill_needs_no_manifest_edit_but_a_nested_one_is_refused(bank_copy):
    new = bank_copy / "skills/tao-extra"
    new.mkdir()
    (new / "SKILL.md").write_text("---\nname: tao-extra\ndescription: An extra skill for the test.\n---\n\n# Extra\n")
    assert not [s for s in lines_of(lint(bank_copy, external=False)) if ": manifest: " in s]
    nested = bank_copy / "skills/extra-group/tao-nested"
    nested.mkdir(parents=True)
    (nested / "SKILL.md").write_text("---\nname: tao-nested\ndescription: A nested skill no client discovers.\n---\n\n# Nested\n")
    assert_one(lint(bank_copy, external=False), r"skills/extra-group:1: frontmatter: folder under skills/ without SKILL.md \(clients discover only skills/<skill>/SKILL.md\): .*")


def test_stamp_drift_and_agentskills_through_the_cli(bank_copy):
    p = bank_copy / SETUP
    p.write_text(p.read_text() + '\n```bash\nIMG="docker.io/library/busybox:1.0"  # versions-key: images.busybox\necho "$IMG"\n```\n')
    edit(bank_copy, SETUP, "license: Apache-2.0", "license: Apache-2.0\nowner: someone")
    n = line_no(bank_copy, SETUP, "versions-key: images.busybox")
    proc = run_lint(bank_copy)
    assert proc.returncode == 1
    out = proc.stdout.splitlines()
    assert any(re.fullmatch(rf"{SETUP}:{n}: stamp: images\.busybox is 'docker\.io/library/busybox:1\.0', versions\.yaml has '.+': run scripts/stamp_versions\.py", s) for s in out), out
    assert any(re.fullmatch(rf"{SETUP}:1: agentskills: Unexpected fields in frontmatter: owner\..*", s) for s in out), out


def test_missing_stamper_is_reported(bank_copy):
    (bank_copy / "scripts/stamp_versions.py").unlink()
    assert [str(p) for p in skill_lint.check_stamp(bank_copy)] == [
        "scripts/stamp_versions.py:1: stamp: missing: the pins stamper must exist to check literal pins"
    ]


def test_run_site_forms_seen_in_the_seeds(bank_copy):
    """$(...) with ${TAO_SKILL_BANK_PATH:?}, 'sudo', and a variable holding the path are run sites;
    'python3 X' and 'bash X' are not."""
    resolve = bank_copy / "scripts/resolve_versions_key.py"
    resolve.chmod(0o644)
    gpu = bank_copy / GPU_SCRIPT
    gpu.chmod(0o644)
    p = bank_copy / SETUP
    p.write_text(p.read_text() + (
        "\n```bash\n"
        'PIN=$("${TAO_SKILL_BANK_PATH:?}/scripts/resolve_versions_key.py" wheels.tao_sdk_slurm)\n'
        'python3 "$BANK/scripts/resolve_versions_key.py" images.busybox\n'
        'SETUP_SCRIPT="$BANK/skills/tao-setup-nvidia-gpu-host/scripts/setup-nvidia-gpu-host.sh"\n'
        'bash "$SETUP_SCRIPT" --backend kubernetes --check-only\n'
        'sudo "$SETUP_SCRIPT" --backend kubernetes --install --yes\n'
        'echo "$PIN"\n'
        "```\n"
    ))
    probs = [s for s in lines_of(lint(bank_copy, external=False)) if f"{SETUP}:" in s and ": exec-bit: " in s]
    pin_line = line_no(bank_copy, SETUP, "PIN=$(")
    sudo_line = line_no(bank_copy, SETUP, 'sudo "$SETUP_SCRIPT"')
    assert [s.split(": exec-bit: ")[0] for s in probs] == [f"{SETUP}:{pin_line}", f"{SETUP}:{sudo_line}"], probs


def test_metadata_must_map_strings_to_strings(bank_copy):
    edit(bank_copy, SETUP, "  group: core", "  group: core\n  order: 1")
    n = line_no(bank_copy, SETUP, "metadata:")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:{n}: frontmatter: metadata must map strings to strings .*")


def test_compatibility_length(bank_copy):
    p = bank_copy / SETUP
    p.write_text(re.sub(r"(?m)^compatibility: .*$", "compatibility: " + "x" * 501, p.read_text(), count=1))
    n = line_no(bank_copy, SETUP, "compatibility:")
    assert_one(lint(bank_copy, external=False), rf"{SETUP}:{n}: frontmatter: compatibility must be text of 1-500 characters")


def test_skill_shell_scripts_are_shellchecked(bank_copy):
    p = bank_copy / GPU_SCRIPT
    p.write_text(p.read_text() + "\necho $BACKEND_DIR\n")
    n = len(p.read_text().splitlines())
    assert_one(lint(bank_copy, external=False), rf"{GPU_SCRIPT}:{n}: shellcheck: SC2086 \(info\) .*")


def test_helper_without_shebang(bank_copy):
    (bank_copy / "scripts/new_helper.py").write_text('"""A helper someone forgot to mark."""\n')
    assert_one(lint(bank_copy, external=False), r"scripts/new_helper.py:1: exec-bit: helper has no '#!/usr/bin/env python3' first line: .*")


def test_seed_style_bank_root_is_flagged(bank_copy):
    p = bank_copy / GPU
    p.write_text(p.read_text() + '\n```bash\nTAO_SKILL_BANK_ROOT="${TAO_SKILL_BANK_ROOT:-$PWD}"\necho "$TAO_SKILL_BANK_ROOT"\n```\n')
    n = line_no(bank_copy, GPU, 'TAO_SKILL_BANK_ROOT="')
    assert_one(lint(bank_copy, external=False), rf"{GPU}:{n}: bank-locate: TAO_SKILL_BANK_ROOT is not set by the plugin or tao-setup: use \$BANK .*")


def test_skill_filter_limits_per_skill_rules(bank_copy):
    edit(bank_copy, SETUP, "name: tao-setup", "name: tao-setup-x")
    one = subprocess.run([sys.executable, str(bank_copy / "scripts/lint_skills.py"), "--skill", "tao-data-io"], capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stdout
    other = subprocess.run([sys.executable, str(bank_copy / "scripts/lint_skills.py"), "--skill", "tao-setup"], capture_output=True, text=True, timeout=300)
    assert other.returncode == 1 and f"{SETUP}:2: name: name 'tao-setup-x' differs from the folder 'tao-setup': they must be equal" in other.stdout.splitlines()
    bad = subprocess.run([sys.executable, str(bank_copy / "scripts/lint_skills.py"), "--skill", "nope"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and bad.stdout.startswith("skills:1: name: no skill named 'nope' (skills: ")


def test_skill_folder_without_skill_md(bank_copy):
    (bank_copy / "skills/tao-half/references").mkdir(parents=True)
    assert_one(lint(bank_copy, external=False), r"skills/tao-half:1: frontmatter: folder under skills/ without SKILL.md \(clients discover only skills/<skill>/SKILL.md\): make it a skill or remove it")
