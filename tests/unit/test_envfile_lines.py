"""The credentials file's one line rule (taobank.envfile): where a line ends and what a written line can hold are
the same for its writer (the MCP key page's store), its reader (envfile.read) and the shell's ``.`` (tao-setup's
load block): a pasted key never reads back as two variables."""
from __future__ import annotations

import os
import subprocess
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taobank import envfile
from taobank.errors import TaoError
from taobank.mcp import credentials

NAME = "TAO_UNIT_KEY"
#: Every character str.splitlines splits at, and the controls terminals act on.
LINE_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
CONTROLS = [chr(c) for c in range(0x20) if chr(c) not in LINE_BREAKS] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)]
INVISIBLE = ["\u200b", "\u200e", "\u202e", "\ufeff", "\u2066"]


@pytest.fixture()
def creds(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cfg" / ".env"
    monkeypatch.setenv("TAO_ENV_FILE", str(path))
    monkeypatch.delenv(NAME, raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return path


def _shell(path: Path, name: str) -> str:
    """What ``set -a; . FILE`` gives ``name`` (tao-setup's load block), or 'unset'."""
    got = subprocess.run(["sh", "-c", f'set -a; . "$0"; printf %s "${{{name}-unset}}"', str(path)],
                         capture_output=True, env={"PATH": os.environ["PATH"]}, timeout=30)
    return got.stdout.decode("utf-8", "surrogateescape")


def _chars() -> list[str]:
    return LINE_BREAKS + CONTROLS + INVISIBLE


@pytest.mark.parametrize("char", _chars(), ids=lambda c: f"U+{ord(c[0]):04X}")
def test_a_pasted_key_with_a_line_break_or_control_is_refused_unseen(creds, char):
    creds.parent.mkdir()
    creds.write_text("OTHER='kept'\n")
    creds.chmod(0o600)
    value = f"nvapi-abc{char}HF_TOKEN=attacker"
    with pytest.raises(TaoError, match="holds a quote, a line break or another control character") as got:
        credentials.store(NAME, value)
    assert "attacker" not in str(got.value) and "nvapi" not in str(got.value)
    assert creds.read_text() == "OTHER='kept'\n" and NAME not in os.environ and "HF_TOKEN" not in os.environ


@pytest.mark.parametrize("char", [c for c in LINE_BREAKS if c not in ("\n", "\r\n")],
                         ids=lambda c: f"U+{ord(c[0]):04X}")
def test_a_file_written_by_hand_reads_as_the_shell_reads_it(tmp_path, char):
    path = tmp_path / ".env"
    path.write_bytes(f"{NAME}='nvapi-abc{char}HF_TOKEN=attacker'\nexport OTHER=plain\r\n".encode())
    path.chmod(0o600)
    got = envfile.read(path, private=True)
    assert "HF_TOKEN" not in got and _shell(path, "HF_TOKEN") == "unset"
    assert got[NAME] == _shell(path, NAME) == f"nvapi-abc{char}HF_TOKEN=attacker"
    assert got["OTHER"] == "plain"


def test_the_writer_keeps_the_other_lines_by_the_same_rule(creds):
    creds.parent.mkdir()
    creds.write_bytes(f"# mine\nA='x\u2028{NAME}=y'\n{NAME}=old\n".encode())
    creds.chmod(0o600)
    try:
        credentials.store(NAME, "new-key")
    finally:
        os.environ.pop(NAME, None)
    # A's line is one line (its U+2028 is no line end): kept whole, the old NAME line replaced
    assert creds.read_bytes().decode() == f"# mine\nA='x\u2028{NAME}=y'\n{NAME}='new-key'\n"
    assert envfile.read(creds, private=True) == {"A": f"x\u2028{NAME}=y", NAME: "new-key"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1, max_size=40))
def test_a_stored_key_reads_back_whole_in_both_readers_or_is_refused(creds, value):
    try:
        credentials.store(NAME, value)
    except TaoError as exc:
        assert value.strip() == "" or value.strip() not in str(exc)
        return
    finally:
        os.environ.pop(NAME, None)
    kept = value.strip()
    assert kept.isprintable() and "'" not in kept
    assert all(unicodedata.category(c) not in ("Zl", "Zp", "Cc") for c in kept)
    assert envfile.read(creds, private=True)[NAME] == kept
    assert _shell(creds, NAME) == kept
