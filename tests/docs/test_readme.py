"""README.md's claims against the repository: commands, paths, helper names, sub-commands, flags."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[2]
README = (BANK / "README.md").read_text(encoding="utf-8")
#: the helpers' page the README links: its "## Helpers" table is checked against each helper's --help
HELPERS = (BANK / "docs" / "helpers.md").read_text(encoding="utf-8")
SCRIPTS = BANK / "scripts"


def bash_blocks(text: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"```bash\n(.*?)```", text, re.S)]


def test_first_screen_has_the_two_commands_and_ci_runs_the_test_one():
    first_screen = README.split("\n---\n", 1)[0]
    assert bash_blocks(first_screen) == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    for cmd in bash_blocks(first_screen):
        script = BANK / cmd.split()[1]
        assert script.is_file() and script.stat().st_mode & 0o111, script
    ci = (BANK / ".ci" / "run").read_text(encoding="utf-8")
    assert (BANK / ".ci" / "run").stat().st_mode & 0o111
    assert [ln for ln in ci.splitlines() if ln.startswith("exec ")] == ["exec bash scripts/test.sh"]


def test_every_helper_is_on_the_helpers_page_and_the_readme_links_it():
    missing = [p.name for p in sorted(SCRIPTS.glob("*.py")) if p.name not in HELPERS]
    assert missing == [], f"docs/helpers.md does not mention {missing}"
    assert "(docs/helpers.md)" in README


def test_the_readme_is_sized_for_a_person():
    """What it is, the two commands, where to go next: the rest lives one link away."""
    assert len(README.encode()) <= 8 * 1024


# first cells of the "## Helpers" table: | `name.py sub/sub [--flag]`, `other.py KEY` | job |
HELPERS_SECTION = HELPERS.split("## Helpers", 1)[1].split("\n## ", 1)[0]
FIRST_CELLS = [re.split(r"(?<!\\)\|", ln)[1] for ln in HELPERS_SECTION.splitlines() if ln.startswith("| `")]
CALLS = [c for cell in FIRST_CELLS for c in re.findall(r"`([^`]+)`", cell)]


def test_helper_table_parsed():
    assert len(CALLS) >= 10 and {c.split()[0] for c in CALLS} >= {"tao_job_record.py", "tao_k8s.py", "local_cluster.py"}


@pytest.mark.parametrize("call", CALLS)
def test_helper_table_names_real_subcommands_and_flags(call):
    words = call.replace("\\|", "|").split()
    script = SCRIPTS / words[0]
    assert script.is_file(), f"docs/helpers.md names {words[0]}, which is not in scripts/"
    top = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert top.returncode == 0, top.stderr
    for word in words[1:]:
        for flag in re.findall(r"--[a-z][a-z-]*", word):
            assert flag in top.stdout, f"{words[0]} --help has no {flag}"
        if word.startswith(("[", "-")) or word.isupper():
            continue
        for sub in re.split(r"[/|]", word):
            if sub in ("kubernetes", "slurm", "docker"):  # positional values, checked through --help's choices
                assert sub in top.stdout
                continue
            r = subprocess.run([sys.executable, str(script), sub, "--help"], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and sub in top.stdout, f"README: {words[0]} {sub}: {r.stderr.strip()}"


PATH_RE = re.compile(r"`((?:skills|scripts|templates|schemas|docs|benchmarks|tests|testclusters|devtools|\.ci|\.claude-plugin|\.codex-plugin)"
                     r"(?:/[A-Za-z0-9_.-]+)*/?)`")


@pytest.mark.parametrize("rel", sorted(set(PATH_RE.findall(README)) - {"scripts/NAME.py"}))
def test_backticked_paths_exist(rel):
    assert (BANK / rel).exists(), f"README mentions {rel}, which does not exist"


@pytest.mark.parametrize("link", sorted(set(re.findall(r"\]\(([^)#:]+)\)", README))))
def test_relative_links_exist(link):
    assert (BANK / link).exists(), f"README links {link}, which does not exist"
