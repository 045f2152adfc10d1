"""The format of ``skills/<skill>/evals/evals.json`` (the community format of agent-skill banks) and what
a platform skill's evals must cover.

A file is a JSON array of objects with exactly :data:`FIELDS`. Each question asks the agent for a
plan (which helper, which flags, in which order), not for execution, so an eval runs with no cluster.
``expected_script`` names a file of the bank (``scripts/tao_k8s.py``) or of the skill folder, or is
null. A platform skill (``tao-run-on-*``) has at least :data:`PLATFORM_MIN` evals that mention every
verb of its helper and every topic of :data:`PLATFORM_TOPICS`; any other skill at least :data:`OTHER_MIN`.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from .skill_budget import is_platform

EVALS = "evals/evals.json"
FIELDS = {"id": (str, int), "question": str, "expected_skill": str, "expected_script": (str, type(None)),
          "ground_truth": str, "expected_behavior": list}
PLATFORM_MIN = 12
OTHER_MIN = 4
#: topic -> words (lower case) of which one must appear in some eval's text. "multi-node" is required
#: only of a skill whose SKILL.md mentions multi-node (a one-host platform has none).
PLATFORM_TOPICS: dict[str, tuple[str, ...]] = {
    "a credential question": ("credential", "secret", "ngc_key"),
    "multi-node": ("multi-node", "--nodes", "num_nodes"),
    "a failure diagnosis": ("error", "failed", "failure"),
    "progress/results": ("metrics", "artifacts", "progress"),
    "resume": ("continue", "resume", "--max-attempts"),
    "sweeps": ("--sweep", "sweep"),
}
_SUBCOMMANDS = re.compile(r"^\s*\{([a-z0-9,-]+)\}\s*$", re.M)
_VERBS_SEEN: dict[tuple[str, bytes], list[str]] = {}

Problem = tuple[int, str]  # (line, message)


def _line_of_item(text: str, index: int) -> int:
    """The line of the index-th '"id"' key (the start of that eval), else 1."""
    hits = [m.start() for m in re.finditer(r'"id"\s*:', text)]
    return text.count("\n", 0, hits[index]) + 1 if index < len(hits) else 1


def _resolves(root: Path, skill_dir: Path, path: str) -> bool:
    if not path or path.startswith("/") or ".." in Path(path).parts:
        return False
    return (root / path).is_file() or (skill_dir / path).is_file()


def _asks_for_a_plan(question: str) -> bool:
    """An eval runs without a cluster: its question asks what the agent would do ('How would you ...?', 'Plan ...')."""
    return question.rstrip().endswith("?") or "plan" in question.lower()


def helper_verbs(root: Path, script: str) -> list[str]:
    """The subcommands a helper's --help lists ('{submit,status,...}'); [] if it has none."""
    path = root / script
    key = (str(path), path.read_bytes())
    if key not in _VERBS_SEEN:
        proc = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=60)
        m = _SUBCOMMANDS.search(proc.stdout)
        _VERBS_SEEN[key] = m.group(1).split(",") if proc.returncode == 0 and m else []
    return _VERBS_SEEN[key]


def check(root: Path, skill_dir: Path, skills: set[str]) -> list[tuple[str, int, str]]:
    """Every problem of one skill's evals, as (file relative to root, line, message)."""
    path = skill_dir / EVALS
    rel = path.relative_to(root).as_posix()
    minimum = PLATFORM_MIN if is_platform(skill_dir.name) else OTHER_MIN
    if not path.is_file():
        return [(skill_dir.relative_to(root).as_posix() + "/SKILL.md", 1,
                 f"no {EVALS}: add at least {minimum} evals (a JSON array of {{{', '.join(FIELDS)}}})")]
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [(rel, exc.lineno, f"invalid JSON: {exc.msg}")]
    if not isinstance(data, list):
        return [(rel, 1, "must be a JSON array of eval objects")]
    out: list[tuple[str, int, str]] = []
    seen: set[object] = set()
    for i, item in enumerate(data):
        line = _line_of_item(text, i)
        if not isinstance(item, dict):
            out.append((rel, line, f"eval {i} is not an object"))
            continue
        missing = [k for k in FIELDS if k not in item]
        extra = sorted(set(item) - set(FIELDS))
        if missing:
            out.append((rel, line, f"eval {i} lacks {', '.join(missing)}"))
        if extra:
            out.append((rel, line, f"eval {i} has unknown field(s) {', '.join(extra)}; allowed: {', '.join(FIELDS)}"))
        for key, kind in FIELDS.items():
            if key in item and (not isinstance(item[key], kind) or isinstance(item[key], bool)):
                out.append((rel, line, f"eval {i}: {key} has the wrong type ({type(item[key]).__name__})"))
        eid = item.get("id")
        if isinstance(eid, (str, int)):
            if eid in seen:
                out.append((rel, line, f"eval {i}: id {eid!r} is used twice"))
            seen.add(eid)
        for key in ("question", "ground_truth"):
            if isinstance(item.get(key), str) and not item[key].strip():
                out.append((rel, line, f"eval {i}: {key} is empty"))
        question = item.get("question")
        if isinstance(question, str) and question.strip() and not _asks_for_a_plan(question):
            out.append((rel, line, f"eval {i}: the question must ask for a plan, not execution: end it with '?' or say 'plan'"))
        behavior = item.get("expected_behavior")
        if isinstance(behavior, list) and (not behavior or not all(isinstance(b, str) and b.strip() for b in behavior)):
            out.append((rel, line, f"eval {i}: expected_behavior must be a non-empty list of non-empty strings"))
        skill = item.get("expected_skill")
        if isinstance(skill, str) and skill not in skills:
            out.append((rel, line, f"eval {i}: expected_skill {skill!r} is not a skill of this bank"))
        script = item.get("expected_script")
        if isinstance(script, str) and not _resolves(root, skill_dir, script):
            out.append((rel, line, f"eval {i}: expected_script {script!r} does not exist (relative to the bank root or the skill folder)"))
    if len(data) < minimum:
        out.append((rel, 1, f"{len(data)} evals; {skill_dir.name} needs at least {minimum}"))
    if is_platform(skill_dir.name) and not out:
        out += _coverage(root, skill_dir, rel, data)
    return out


def _coverage(root: Path, skill_dir: Path, rel: str, data: list[dict]) -> list[tuple[str, int, str]]:
    """A platform skill's evals mention every verb of its helper and every topic."""
    blob = "\n".join(" ".join([it["question"], it["ground_truth"], *it["expected_behavior"]]) for it in data).lower()
    skill_md = (skill_dir / "SKILL.md").read_text(encoding="utf-8").lower()
    out = []
    for topic, words in PLATFORM_TOPICS.items():
        if topic == "multi-node" and "multi-node" not in skill_md:
            continue
        if not any(w in blob for w in words):
            out.append((rel, 1, f"no eval covers {topic} (mention one of: {', '.join(words)})"))
    scripts = [it["expected_script"] for it in data if isinstance(it["expected_script"], str)]
    helpers = [s for s in scripts if re.fullmatch(r"scripts/tao_[a-z0-9_]+\.py", s) and s != "scripts/tao_jobs.py"]
    if not helpers:
        return out + [(rel, 1, "no eval expects the platform's helper (scripts/tao_<platform>.py)")]
    helper = max(set(helpers), key=helpers.count)
    for verb in helper_verbs(root, helper):
        if not re.search(rf"(?<![\w-]){re.escape(verb)}(?![\w-])", blob):
            out.append((rel, 1, f"no eval covers the verb {verb!r} of {helper}"))
    return out
