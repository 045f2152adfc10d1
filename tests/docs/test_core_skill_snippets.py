"""The bash blocks of the core skills do what their text says (run as written)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from devtools.skill_lint import code_blocks

BANK = Path(__file__).resolve().parents[2]


def block(skill: str, needle: str) -> str:
    """The one bash block of a skill (its SKILL.md and references) holding ``needle``."""
    folder = BANK / "skills" / skill
    found = [b for doc in [folder / "SKILL.md", *sorted(folder.glob("references/*.md"))]
             for b in code_blocks(doc.read_text(encoding="utf-8")) if b.lang == "bash" and any(needle in ln for ln in b.lines)]
    assert len(found) == 1, f"{needle!r}: {len(found)} blocks in {skill}"
    return "\n".join(found[0].lines) + "\n"


def bash(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=30)


def clean_env(home: Path) -> dict:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL")}
    return {**keep, "HOME": str(home)}


# ------------------------------------------------------------------ tao-setup: credentials file

CREATE = "install -m 600 /dev/null ~/.config/tao/.env"


def make_env_file(home: Path, mode: int) -> Path:
    setup = block("tao-setup", CREATE)
    assert bash(setup, clean_env(home), home).returncode == 0
    f = home / ".config/tao/.env"
    assert oct(f.stat().st_mode & 0o777) == "0o600" and oct(f.parent.stat().st_mode & 0o777) == "0o700"
    f.write_text("NGC_KEY=nvapi-test-value\nSLURM_USER=alice\n")
    f.chmod(mode)
    return f


def test_create_block_makes_an_empty_private_file_before_any_value(tmp_path):
    proc = bash(block("tao-setup", CREATE), clean_env(tmp_path), tmp_path)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    f = tmp_path / ".config/tao/.env"
    assert f.read_bytes() == b""
    assert oct(f.stat().st_mode & 0o777) == "0o600" and oct(f.parent.stat().st_mode & 0o777) == "0o700"


def test_create_block_rerun_keeps_the_values_and_restores_the_mode(tmp_path):
    """Step 3 of the agent recipe: rerun after the agent's file tool wrote the key (and maybe reset the mode)."""
    f = make_env_file(tmp_path, 0o644)
    proc = bash(block("tao-setup", CREATE), clean_env(tmp_path), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f.read_text() == "NGC_KEY=nvapi-test-value\nSLURM_USER=alice\n"
    assert oct(f.stat().st_mode & 0o777) == "0o600"


def test_env_file_is_loaded_for_child_processes(tmp_path):
    make_env_file(tmp_path, 0o600)
    load = block("tao-setup", "set -a")
    # a child process (not the shell itself) must see the values: set -a exports them
    proc = bash(load + 'python3 -c \'import os; print(os.environ["SLURM_USER"], len(os.environ["NGC_KEY"]))\'\n', clean_env(tmp_path), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["alice", str(len("nvapi-test-value"))]


def test_env_file_readable_by_others_is_refused(tmp_path):
    make_env_file(tmp_path, 0o644)
    load = block("tao-setup", "set -a")
    proc = bash(load + "echo loaded\n", clean_env(tmp_path), tmp_path)
    assert proc.returncode == 1
    f = tmp_path / ".config/tao/.env"
    assert proc.stdout.strip() == f"MISSING: {f} has mode 644; run: chmod 600 '{f}'"
    assert "nvapi-test-value" not in proc.stdout + proc.stderr


def test_no_env_file_is_not_an_error(tmp_path):
    load = block("tao-setup", "set -a")
    proc = bash(load + "echo next\n", clean_env(tmp_path), tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "next"


# ------------------------------------------------------------------ tao-data-io: legacy S3 names

def test_legacy_s3_names_are_mapped_without_printing(tmp_path):
    mapping = block("tao-data-io", "ACCESS_KEY")
    env = {**clean_env(tmp_path), "ACCESS_KEY": "AKIAOLDSTYLE", "SECRET_KEY": "old-secret"}
    probe = 'python3 -c \'import os; print(os.environ["AWS_ACCESS_KEY_ID"] == "AKIAOLDSTYLE", os.environ["AWS_SECRET_ACCESS_KEY"] == "old-secret")\'\n'
    proc = bash(mapping + probe, env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]


def test_new_s3_names_win_over_legacy(tmp_path):
    mapping = block("tao-data-io", "ACCESS_KEY")
    env = {**clean_env(tmp_path), "ACCESS_KEY": "AKIAOLD", "AWS_ACCESS_KEY_ID": "AKIANEW", "AWS_SECRET_ACCESS_KEY": "new"}
    proc = bash(mapping + 'printf "%s %s" "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY"\n', env, tmp_path)
    assert proc.returncode == 0 and proc.stdout == "AKIANEW new"


def test_no_credentials_no_exports(tmp_path):
    mapping = block("tao-data-io", "ACCESS_KEY")
    proc = bash(mapping + 'printf "[%s]" "${AWS_ACCESS_KEY_ID-unset}"\n', clean_env(tmp_path), tmp_path)
    assert proc.returncode == 0 and proc.stdout == "[unset]"


# ------------------------------------------------------------------ tao-setup: host preflight block

def test_host_preflight_block_runs(tmp_path):
    pre = block("tao-setup", "check_host.py")
    env = {**clean_env(tmp_path), "TAO_SKILL_BANK_PATH": str(BANK)}
    # Only the first line of the block (kubernetes); the --json line is covered in test_check_host.
    first = pre.splitlines()[0] + "\n"
    proc = bash(block("tao-setup", "BANK=") + first, env, tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert all(ln.startswith(("OK: ", "MISSING: ")) for ln in proc.stdout.splitlines()), proc.stdout


def test_tao_env_file_names_another_file(tmp_path):
    other = tmp_path / "elsewhere.env"
    other.write_text("SLURM_USER=bob\n")
    other.chmod(0o600)
    load = block("tao-setup", "set -a")
    env = {**clean_env(tmp_path), "TAO_ENV_FILE": str(other)}
    proc = bash(load + 'python3 -c \'import os; print(os.environ["SLURM_USER"])\'\n', env, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "bob", proc.stderr


def test_single_quoted_value_reads_the_same_in_the_shell_and_in_the_helpers(tmp_path):
    """The documented format: single quotes around a value with spaces or '$'. The shell load block and
    the helpers' reader (--secrets-file) must agree on the value."""
    import sys  # noqa: PLC0415

    sys.path.insert(0, str(BANK / "scripts"))
    from taobank import envfile  # noqa: PLC0415

    f = make_env_file(tmp_path, 0o600)
    f.write_text("HF_TOKEN='hf_a b$c'\n")
    load = block("tao-setup", "set -a")
    proc = bash(load + 'python3 -c \'import os; print(os.environ["HF_TOKEN"] == "hf_a b$c")\'\n', clean_env(tmp_path), tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr
    assert envfile.read(f, private=True) == {"HF_TOKEN": "hf_a b$c"}
