"""Issue 49: every documented shell line that loads a key from a file works on a file without a final newline.

``IFS= read -r NGC_KEY < file && export NGC_KEY`` returned 1 on such a file (``read`` hit end of input), so the
key was never exported. Each line found in the docs (code blocks, and code spans of prose or tables) is run as
written with bash, the file's variable pointing at a key file with and without a final newline; a child process
must see the key, and a missing file must fail the line.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from devtools.skill_lint import code_blocks

BANK = Path(__file__).resolve().parents[2]
#: a shell line that reads a key variable from a file (a redirect or $(< file)), whatever its form
_LOADS = re.compile(r"\bread\b[^`]*\b[A-Z_]*(?:KEY|TOKEN)\b[^`]*<\s*[\"'$~/]|[A-Z_]*(?:KEY|TOKEN)=\$\(\s*(?:<|cat\b)")
_SPAN = re.compile(r"`([^`\n]+)`")
KEY = "nvapi-DocLineKey-0123456789abcdef"


def _docs() -> list[Path]:
    return [BANK / "README.md", *sorted((BANK / "docs").rglob("*.md")), *sorted((BANK / "skills").rglob("*.md"))]


def key_lines() -> list[tuple[str, str]]:
    """(where, shell line) of each documented line that loads a key from a file."""
    found = []
    for doc in _docs():
        text = doc.read_text(encoding="utf-8")
        in_blocks = {n for b in code_blocks(text) for n in range(b.start, b.start + len(b.lines))}
        shell = [b for b in code_blocks(text) if b.lang in ("bash", "sh", "shell")]
        lines = [(f"{doc.relative_to(BANK)}:{b.start + i}", ln) for b in shell for i, ln in enumerate(b.lines)]
        lines += [(f"{doc.relative_to(BANK)}:{n}", span) for n, ln in enumerate(text.splitlines(), 1)
                  if n not in in_blocks for span in _SPAN.findall(ln)]
        found += [(where, ln.strip()) for where, ln in lines
                  if _LOADS.search(ln) and "read -rs" not in ln and not ln.lstrip().startswith("#")]
    return found


def test_the_key_lines_are_found():
    wheres = " ".join(w for w, _ in key_lines())
    for doc in ("docs/local-kubernetes-cluster.md", "skills/tao-run-on-kubernetes/references/credentials.md"):
        assert doc in wheres, wheres


@pytest.mark.parametrize("where,line", key_lines())
@pytest.mark.parametrize("ending", ["", "\n"], ids=["no-final-newline", "final-newline"])
def test_a_documented_key_line_exports_the_key_from_a_file(tmp_path, where, line, ending):
    var = re.search(r"\b([A-Z_]*KEY|[A-Z_]*TOKEN)\b", line.split("<")[0].split("$(")[0]) or re.search(
        r"\b([A-Z_]*KEY)=", line)
    assert var, f"{where}: which variable does {line!r} set?"
    name = var.group(1)
    key_file = tmp_path / "key"
    key_file.write_text(KEY + ending)
    key_file.chmod(0o600)
    home = tmp_path / "home"
    (home / ".config" / "ngc").mkdir(parents=True)
    (home / ".config" / "ngc" / "key").write_text(KEY + ending)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "TAO_LOCAL_K8S_NGC_KEY_FILE": str(key_file),
           "NGC_KEY_FILE": str(key_file)}
    proc = subprocess.run(["bash", "-c", f"{line}\nprintenv {name}"], env=env, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0 and proc.stdout == KEY + "\n", f"{where}: {line!r} gave {proc.returncode} " \
                                                               f"{proc.stdout!r} {proc.stderr!r}"
    (home / ".config" / "ngc" / "key").unlink()
    key_file.unlink()
    gone = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=30)
    assert gone.returncode != 0 and KEY not in gone.stdout + gone.stderr, f"{where}: a missing file must fail"
