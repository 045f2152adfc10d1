"""The skills' byte budget (scripts/skill_budget.py, lint rule budget), the table of contents of long
references (toc), the frontmatter metadata (metadata) and the evals format (evals): the bank passes, and each
planted break fails with one line."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from devtools.skill_budget import OTHER_MAX_BYTES, PLATFORM_MAX_BYTES, costs, limit_of
from devtools.skill_evals import FIELDS, helper_verbs
from devtools.skill_lint import lint, split_frontmatter

BANK = Path(__file__).resolve().parents[2]
BUDGET = BANK / "scripts" / "skill_budget.py"
K8S = "skills/tao-run-on-kubernetes"
SETUP = "skills/tao-setup"
def found(problems, rule: str) -> list[str]:
    return [str(p) for p in problems if p.rule == rule]


# ------------------------------------------------------------------ budget

def test_budget_prints_every_skill_and_passes_on_the_bank():
    proc = subprocess.run([sys.executable, str(BUDGET)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = proc.stdout.splitlines()
    assert rows[0].split() == ["SKILL", "BYTES", "LIMIT", "LINES", "~TOKENS"]
    names = sorted(p.parent.name for p in BANK.glob("skills/*/SKILL.md"))
    assert [r.split()[0] for r in rows[1:]] == names
    for r in rows[1:]:
        name, size, limit, lines, tokens = r.split()[:5]
        md = (BANK / "skills" / name / "SKILL.md").read_bytes()
        assert int(size) == len(md) and int(lines) == len(md.splitlines()) and int(limit) == limit_of(name)
        assert int(tokens) == -(-len(md) // 4)


def test_limits_platform_and_other_skills():
    assert limit_of("tao-run-on-kubernetes") == limit_of("tao-run-on-docker") == PLATFORM_MAX_BYTES == 12_000
    assert limit_of("tao-setup") == limit_of("tao-data-io") == OTHER_MAX_BYTES == 6_000
    assert all(not c.over for c in costs(BANK))


def test_budget_over_the_limit_exits_1_naming_the_file(bank_copy):
    p = bank_copy / SETUP / "SKILL.md"
    p.write_text(p.read_text() + "\n" + "filler text. " * 500)
    proc = subprocess.run([sys.executable, str(bank_copy / "scripts" / "skill_budget.py"), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    rows = {r["skill"]: r for r in json.loads(proc.stdout)}
    assert rows["tao-setup"]["over"] is True and rows["tao-run-on-kubernetes"]["over"] is False
    assert proc.stderr.strip() == f"error: {SETUP}/SKILL.md is {rows['tao-setup']['bytes']} bytes, over its 6000: move details into references/"
    assert any(re.fullmatch(rf"{SETUP}/SKILL.md:1: budget: SKILL.md is \d+ bytes \(~\d+ tokens\), over its 6000: .*", s)
               for s in found(lint(bank_copy, external=False), "budget"))


def test_a_new_platform_skill_gets_the_platform_limit(bank_copy):
    new = bank_copy / "skills" / "tao-run-on-example"
    shutil.copytree(bank_copy / K8S, new)
    md = new / "SKILL.md"
    text = md.read_text().replace("name: tao-run-on-kubernetes", "name: tao-run-on-example")
    md.write_text(text + "x" * (PLATFORM_MAX_BYTES - 1000 - len(text.encode())))  # 11,000 bytes: over 6,000, under 12,000
    probs = lint(bank_copy, external=False, only=["tao-run-on-example"])
    assert not found(probs, "budget"), found(probs, "budget")
    md.write_text(md.read_text() + "y" * PLATFORM_MAX_BYTES)
    assert found(lint(bank_copy, external=False, only=["tao-run-on-example"]), "budget")


# ------------------------------------------------------------------ toc

def test_long_reference_without_toc(bank_copy):
    ref = bank_copy / K8S / "references" / "long.md"
    ref.write_text("# Long\n\nIntro.\n\n## First part\n\n" + "line\n" * 60 + "## Second part\n\n" + "line\n" * 60)
    assert any(re.fullmatch(rf"{K8S}/references/long.md:5: toc: \d+ lines: list every section before the first one "
                            r"\(missing: \[First part\]\(#first-part\), \[Second part\]\(#second-part\)\)", s)
               for s in found(lint(bank_copy, external=False), "toc"))
    ref.write_text("# Long\n\n- [First part](#first-part)\n- [Second part](#second-part)\n\n## First part\n\n"
                   + "line\n" * 60 + "## Second part\n\n" + "line\n" * 60)
    assert not found(lint(bank_copy, external=False), "toc")


def test_every_long_reference_has_a_toc():
    for ref in BANK.glob("skills/*/references/*.md"):
        text = ref.read_text(encoding="utf-8")
        if len(text.splitlines()) > 100:
            assert "](#" in text.split("\n## ", 1)[0], ref


# ------------------------------------------------------------------ metadata

def _meta(path: Path) -> dict:
    fm, _ = split_frontmatter(path.read_text(encoding="utf-8"))
    return yaml.safe_load(fm)["metadata"]


def test_every_skill_carries_the_plugin_version_one_author_and_tags():
    """One source of truth: versions.yaml bank.version is plugin.json's version and every skill's metadata.version."""
    version = yaml.safe_load((BANK / "versions.yaml").read_text())["bank"]["version"]
    plugin = json.loads((BANK / "plugin.json").read_text())
    assert plugin["version"] == version
    for md in BANK.glob("skills/*/SKILL.md"):
        meta = _meta(md)
        assert meta["version"] == version, md
        assert meta["author"] == plugin["author"]["name"], md
        assert [t.strip() for t in meta["tags"].split(",")] and "tao" in meta["tags"], md
        assert "# versions-key: bank.version" in md.read_text(), md  # stamp_versions.py keeps it in step


def test_a_version_bump_is_stamped_into_every_skill(bank_copy):
    v = bank_copy / "versions.yaml"
    v.write_text(v.read_text().replace('version: "0.2.0"', 'version: "9.9.9"', 1) if 'version: "0.2.0"' in v.read_text()
                 else re.sub(r'(\n  version: )"[^"]+"', r'\1"9.9.9"', v.read_text(), count=1))
    probs = found(lint(bank_copy, external=False), "metadata")
    assert len([s for s in probs if "the plugin's is '9.9.9'" in s]) == len(list(bank_copy.glob("skills/*/SKILL.md")))
    proc = subprocess.run([sys.executable, str(bank_copy / "scripts" / "stamp_versions.py"), "skills"],
                          capture_output=True, text=True, timeout=60)  # the copy's helpers read the copy's versions.yaml
    assert proc.returncode == 0, proc.stderr
    assert not found(lint(bank_copy, external=False), "metadata")


def test_missing_author_and_bad_tags(bank_copy):
    md = bank_copy / SETUP / "SKILL.md"
    md.write_text(md.read_text().replace("  author: TAO skill bank contributors\n", "").replace("tags: tao, setup, credentials", "tags: Tao Setup"))
    probs = found(lint(bank_copy, external=False), "metadata")
    assert any(s.startswith(f"{SETUP}/SKILL.md:6: metadata: metadata.author is None") for s in probs), probs
    assert any(s.startswith(f"{SETUP}/SKILL.md:6: metadata: metadata.tags is 'Tao Setup'") for s in probs), probs


# ------------------------------------------------------------------ evals

def _evals(root: Path, skill: str) -> tuple[Path, list[dict]]:
    p = root / "skills" / skill / "evals" / "evals.json"
    return p, json.loads(p.read_text())


def test_every_skill_has_evals_in_the_format():
    for d in sorted(p.parent for p in BANK.glob("skills/*/SKILL.md")):
        data = json.loads((d / "evals" / "evals.json").read_text())
        assert len(data) >= (12 if d.name.startswith("tao-run-on-") else 4), d.name
        for e in data:
            assert set(e) == set(FIELDS), e
            # a question asks for a plan (how, what, which ...?), never for execution
            assert e["question"].rstrip().endswith("?") or "plan" in e["question"].lower(), e["id"]


def test_platform_evals_cover_every_verb_of_the_helper():
    for skill, helper in (("tao-run-on-kubernetes", "scripts/tao_k8s.py"), ("tao-run-on-slurm", "scripts/tao_slurm.py")):
        verbs = helper_verbs(BANK, helper)
        assert {"submit", "status", "logs", "cancel", "preflight", "nccl-probe"} <= set(verbs)
        blob = json.dumps(_evals(BANK, skill)[1]).lower()
        assert all(v in blob for v in verbs), skill


@pytest.mark.parametrize("case, pattern", [
    ("not-json", r"evals: invalid JSON: .*"),
    ("missing-field", r"evals: eval 0 lacks ground_truth"),
    ("extra-field", r"evals: eval 0 has unknown field\(s\) notes; .*"),
    ("wrong-type", r"evals: eval 0: expected_behavior has the wrong type \(str\)"),
    ("empty-behavior", r"evals: eval 0: expected_behavior must be a non-empty list of non-empty strings"),
    ("duplicate-id", r"evals: eval 1: id 'setup-first-run' is used twice"),
    ("no-such-script", r"evals: eval 0: expected_script 'scripts/no_such.py' does not exist .*"),
    ("no-such-skill", r"evals: eval 0: expected_skill 'tao-nope' is not a skill of this bank"),
    ("too-few", r"evals: 3 evals; tao-setup needs at least 4"),
    ("execution", r"evals: eval 0: the question must ask for a plan, not execution: .*"),
])
def test_planted_eval_breaks(bank_copy, case, pattern):
    p, data = _evals(bank_copy, "tao-setup")
    if case == "not-json":
        p.write_text("[{")
    else:
        if case == "missing-field":
            del data[0]["ground_truth"]
        elif case == "extra-field":
            data[0]["notes"] = "x"
        elif case == "wrong-type":
            data[0]["expected_behavior"] = "do it"
        elif case == "empty-behavior":
            data[0]["expected_behavior"] = []
        elif case == "duplicate-id":
            data[1]["id"] = data[0]["id"]
        elif case == "no-such-script":
            data[0]["expected_script"] = "scripts/no_such.py"
        elif case == "no-such-skill":
            data[0]["expected_skill"] = "tao-nope"
        elif case == "too-few":
            data = data[:3]
        elif case == "execution":
            data[0]["question"] = "Set up my machine now."
        p.write_text(json.dumps(data, indent=2))
    probs = found(lint(bank_copy, external=False, only=["tao-setup"]), "evals")
    assert any(re.fullmatch(rf"skills/tao-setup/evals/evals.json:\d+: {pattern}", s) for s in probs), probs


def test_missing_evals_file(bank_copy):
    (bank_copy / "skills" / "tao-setup" / "evals" / "evals.json").unlink()
    probs = found(lint(bank_copy, external=False, only=["tao-setup"]), "evals")
    assert probs == ["skills/tao-setup/SKILL.md:1: evals: no evals/evals.json: add at least 4 evals (a JSON array of "
                     "{id, question, expected_skill, expected_script, ground_truth, expected_behavior})"]


def test_platform_evals_must_cover_a_verb_and_every_topic(bank_copy):
    p, data = _evals(bank_copy, "tao-run-on-kubernetes")
    kept = [e for e in data if "nccl-probe" not in json.dumps(e) and "sweep" not in json.dumps(e).lower()]
    while len(kept) < 12:
        kept.append({**kept[0], "id": f"filler-{len(kept)}"})
    p.write_text(json.dumps(kept, indent=2))
    probs = found(lint(bank_copy, external=False, only=["tao-run-on-kubernetes"]), "evals")
    assert f"{K8S}/evals/evals.json:1: evals: no eval covers the verb 'nccl-probe' of scripts/tao_k8s.py" in probs, probs
    assert any(s.startswith(f"{K8S}/evals/evals.json:1: evals: no eval covers sweeps ") for s in probs), probs


# ------------------------------------------------------------------ shape: quick path first, references one level down

@pytest.mark.parametrize("skill", ["tao-data-io", "tao-run-on-docker", "tao-run-on-kubernetes", "tao-run-on-slurm"])
def test_skill_opens_with_a_quick_path_and_names_each_reference_with_when_to_read_it(skill):
    """The shape every platform skill has, and tao-data-io too (issue 31): the first section is "Quick path", whose
    first bash block (the bank line on top) ends within the first screen; every file of references/ is a row of
    a "Read it when" table."""
    from devtools.skill_lint import BANK_LINE

    text = (BANK / "skills" / skill / "SKILL.md").read_text(encoding="utf-8")
    body = text[text.index("\n# ", 3):]
    assert body.split("\n## ", 2)[1].startswith("Quick path\n"), skill
    lines = text.splitlines()
    start = lines.index("```bash", lines.index("## Quick path"))
    end = lines.index("```", start + 1)
    assert lines[start + 1] == BANK_LINE and end <= 55, (skill, start, end)
    assert "| File | Read it when |" in text
    for ref in sorted((BANK / "skills" / skill / "references").glob("*.md")):
        rows = [ln for ln in lines if ln.startswith("| [") and f"(references/{ref.name})" in ln]
        assert len(rows) == 1 and len(rows[0].split("|")[2].strip()) > 20, (skill, ref.name)
