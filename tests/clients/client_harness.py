"""Driving the real agent CLIs (npm) against a copy of the bank, each in its own HOME.

Every function returns what the client said, parsed; the tests decide. A
client that is not installed fails the test (scripts/test.sh installs them).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from devtools import agent_clients
from taobank import pins

BANK = Path(__file__).resolve().parents[2]
NAME = str(pins.resolve("bank.name"))
VERSION = str(pins.resolve("bank.version"))
PLUGIN_ID = f"{NAME}@{NAME}"
_COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".hypothesis", "out", ".venv")


def skill_names(root: Path = BANK) -> list[str]:
    """The skill of every SKILL.md in the repository (N = len of this), counted on disk."""
    return sorted(p.parent.name for p in root.rglob("SKILL.md") if ".git" not in p.parts)


def binary(key: str) -> Path:
    c = agent_clients.client(key)
    if not c.installed():
        pytest.fail(f"{c.spec} is not installed under {c.prefix}: run 'bash scripts/test.sh' (or, from the bank root: python3 -m devtools.agent_clients install)", pytrace=False)
    return c.binary


def version_of(key: str) -> str:
    return agent_clients.client(key).version


def copy_bank(dest: Path) -> Path:
    """The working tree (uncommitted edits included) as a user's clone would hold it."""
    shutil.copytree(BANK, dest, ignore=_COPY_IGNORE, symlinks=True)
    return dest


def client_env(home: Path) -> dict[str, str]:
    """A fresh user: HOME, the clients' config dirs inside it, no keys, no telemetry, both CLIs on PATH."""
    (home / ".codex").mkdir(parents=True, exist_ok=True)  # Codex refuses a CODEX_HOME that does not exist
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "TAO_SKILL_BANK"))}
    bins = os.pathsep.join(str(binary(k).parent) for k in ("claude_code", "codex"))
    env.update(
        HOME=str(home),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        CODEX_HOME=str(home / ".codex"),
        PATH=bins + os.pathsep + env.get("PATH", ""),
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        NO_COLOR="1",
    )
    return env


def run(argv: list[str | Path], env: dict[str, str], cwd: Path, timeout: int = 180, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, input=input)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"{proc.args[1:]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


# ------------------------------------------------------------------ Claude Code

def claude(env: dict[str, str], *args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return run([binary("claude_code"), *args], env, cwd)


def claude_installed(env: dict[str, str], cwd: Path) -> dict:
    """Our entry of ``claude plugin list --json`` (fails when absent)."""
    entries = json.loads(ok(claude(env, "plugin", "list", "--json", cwd=cwd)).stdout)
    mine = [e for e in entries if e.get("id") == PLUGIN_ID]
    assert mine, f"{PLUGIN_ID} not in claude plugin list: {[e.get('id') for e in entries]}"
    return mine[0]


def claude_inventory(details: str) -> dict[str, list[str]]:
    """``claude plugin details`` text -> {"Skills": [...], "Hooks": [...], ...} (names as listed)."""
    out: dict[str, list[str]] = {}
    for kind, count, rest in re.findall(r"^\s+(Skills|Agents|Hooks|MCP servers|LSP servers) \((\d+)\)(.*)$", details, re.M):
        names = re.sub(r"\(.*\)", "", rest).replace(",", " ").split()
        assert len(names) == int(count) or kind == "Hooks", f"{kind} ({count}) lists {names}"
        out[kind] = names if kind != "Hooks" else names[: int(count)]
    assert "Skills" in out, f"no component inventory in: {details[:500]}"
    return out


def claude_session(env: dict[str, str], cwd: Path, *args: str | Path) -> tuple[list[str], list[str]]:
    """Start a real ``claude -p`` session (it stops at "Not logged in": no key, no model call).

    Returns (lines the SessionStart hooks wrote for later shells, our skills in the
    skill listing Claude Code put in the session for the model).
    """
    proc = claude(env, *args, "-p", "Which TAO skills do you have?", cwd=cwd)
    config = Path(env["CLAUDE_CONFIG_DIR"])
    hook_lines = [ln for f in sorted(config.glob("session-env/*/sessionstart-hook-*.sh")) for ln in f.read_text().splitlines()]
    transcripts = sorted(config.glob("projects/*/*.jsonl"))
    assert transcripts, f"claude -p recorded no session (exit {proc.returncode}): {proc.stdout[-1000:]} {proc.stderr[-1000:]}"
    listed: list[str] = []
    for transcript in transcripts:
        for line in transcript.read_text(encoding="utf-8").splitlines():
            att = json.loads(line).get("attachment") or {}
            if att.get("type") == "skill_listing":
                listed += [n.split(":", 1)[1] for n in att.get("names", []) if n.startswith(f"{NAME}:")]
    return hook_lines, sorted(set(listed))


# ------------------------------------------------------------------ Codex

def codex(env: dict[str, str], *args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return run([binary("codex"), *args], env, cwd)


class AppServer:
    """``codex app-server`` over stdio JSON-RPC: what Codex's own UIs ask it."""

    def __init__(self, env: dict[str, str], cwd: Path):
        self.proc = subprocess.Popen([str(binary("codex")), "app-server"], env=env, cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.next_id = 0
        self.call("initialize", {"clientInfo": {"name": "tao-skill-bank-tests", "version": VERSION}})
        self._send({"jsonrpc": "2.0", "method": "initialized"})

    def _send(self, msg: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"codex app-server closed during {method}: {self.proc.stderr.read()[-2000:] if self.proc.stderr else ''}")
            msg = json.loads(line)
            if msg.get("id") == self.next_id and "method" not in msg:
                assert "error" not in msg, f"{method}: {msg['error']}"
                return msg["result"]

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "AppServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def codex_plugin_skills(env: dict[str, str], cwd: Path) -> list[str]:
    """Skills Codex has loaded for our plugin (app-server ``skills/list``), without the plugin prefix."""
    with AppServer(env, cwd) as server:
        result = server.call("skills/list", {"cwds": [str(cwd)]})
    skills = [s for entry in result["data"] for s in entry["skills"] if s.get("pluginId") == PLUGIN_ID]
    return sorted(s["name"].split(":", 1)[-1] for s in skills)


def codex_model_visible_skills(env: dict[str, str], cwd: Path) -> list[str]:
    """Our skills in the prompt Codex would send a model (``codex debug prompt-input``)."""
    text = ok(codex(env, "debug", "prompt-input", cwd=cwd)).stdout
    return sorted(set(re.findall(rf"- {re.escape(NAME)}:([a-z0-9-]+): ", text)))
