"""The pinned Claude Code and Codex CLIs start the MCP server the plugin declares: Claude Code's health
check connects to it, Codex enables it and lists the tools it got from the running server."""
from __future__ import annotations

import json
import re
from pathlib import Path

from client_harness import NAME, PLUGIN_ID, VERSION, AppServer, claude, claude_inventory, codex, ok

from taobank.mcp import tools

TOOLS = sorted(t.name for t in tools.TOOLS)


def test_claude_code_connects_to_the_plugins_server(bank, env, tmp_path):
    ok(claude(env, "plugin", "marketplace", "add", bank, cwd=tmp_path))
    ok(claude(env, "plugin", "install", PLUGIN_ID, cwd=tmp_path))
    inv = claude_inventory(ok(claude(env, "plugin", "details", PLUGIN_ID, cwd=tmp_path)).stdout)
    assert inv["MCP servers"] == ["tao"]
    listed = ok(claude(env, "mcp", "list", cwd=tmp_path)).stdout
    line = re.search(rf"^plugin:{NAME}:tao: python3 (\S+) - (.*)$", listed, re.M)
    assert line, listed
    assert Path(line.group(1)).name == "tao_mcp.py" and "Connected" in line.group(2), line.group(0)


def test_a_broken_server_is_not_shown_connected(bank, env, tmp_path):
    """The check above has teeth: a server that dies at start is reported failed."""
    (bank / "scripts" / "tao_mcp.py").write_text("import sys\nsys.exit(3)\n")
    ok(claude(env, "plugin", "marketplace", "add", bank, cwd=tmp_path))
    ok(claude(env, "plugin", "install", PLUGIN_ID, cwd=tmp_path))
    listed = claude(env, "mcp", "list", cwd=tmp_path).stdout
    line = re.search(rf"^plugin:{NAME}:tao: .*$", listed, re.M)
    assert line and "Connected" not in line.group(0), listed


def test_codex_enables_the_server_and_lists_its_tools(bank, env, tmp_path):
    ok(codex(env, "plugin", "marketplace", "add", "--json", bank, cwd=tmp_path))
    installed = Path(json.loads(ok(codex(env, "plugin", "add", "--json", PLUGIN_ID, cwd=tmp_path)).stdout)["installedPath"])
    (server,) = [s for s in json.loads(ok(codex(env, "mcp", "list", "--json", cwd=tmp_path)).stdout) if s["name"] == "tao"]
    assert server["enabled"] is True and server["transport"]["type"] == "stdio"
    assert server["transport"]["args"] == [str(installed / "scripts" / "tao_mcp.py")]
    with AppServer(env, tmp_path) as app:
        status = app.call("mcpServerStatus/list", {})["data"]
    (ours,) = [s for s in status if s["name"] == "tao"]
    assert ours["pluginId"] == PLUGIN_ID and ours["serverInfo"]["version"] == VERSION
    assert sorted(ours["tools"]) == TOOLS
    assert ours["tools"]["prune"]["annotations"]["destructiveHint"] is True
