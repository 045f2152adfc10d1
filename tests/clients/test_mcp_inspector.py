"""The real MCP Inspector CLI (pinned in versions.yaml, agent_clients.mcp_inspector) starts scripts/tao_mcp.py
over stdio, lists its tools (portable schemas: --strict) and calls some of them."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from client_harness import BANK, binary, run

from taobank.mcp import tools


def inspector(tmp_path: Path, state: Path, *args: str) -> tuple[int, str, str]:
    argv = [binary("mcp_inspector"), "--cli", "-e", f"TAO_STATE_DIR={state}", sys.executable,
            str(BANK / "scripts" / "tao_mcp.py"), *args]
    proc = run(argv, {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}, tmp_path, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def _first_json(text: str) -> dict:
    return json.JSONDecoder().raw_decode(text.lstrip())[0]


def test_the_inspector_lists_every_tool_with_portable_schemas(tmp_path):
    rc, out, err = inspector(tmp_path, tmp_path / "state", "--method", "tools/list", "--strict")
    assert rc == 0, err[-2000:]
    listed = {t["name"]: t for t in json.loads(out)["tools"]}
    assert sorted(listed) == sorted(t.name for t in tools.TOOLS)
    for spec in tools.TOOLS:
        tool = listed[spec.name]
        assert tool["inputSchema"] == tools.input_schema(spec)
        assert tool["outputSchema"]["required"] == ["result", "notes", "exit_code"]
        assert tool["annotations"]["readOnlyHint"] is spec.read_only
        assert tool["annotations"]["destructiveHint"] is spec.destructive


def test_the_inspector_calls_tools(tmp_path):
    state = tmp_path / "state"
    rc, out, err = inspector(tmp_path, state, "--method", "tools/call", "--tool-name", "list")
    assert rc == 0, err[-2000:]
    assert _first_json(out)["structuredContent"] == {"result": [], "notes": [], "exit_code": 0}
    # typed arguments as a client sends them: a boolean, a whole number, a list
    rc, out, err = inspector(tmp_path, state, "--method", "tools/call", "--tool-name", "submit_docker",
                             "--tool-arg", "image=docker.io/library/busybox:1.37.0", "--tool-arg", "dry_run=true",
                             "--tool-arg", "gpus_per_node=1", "--tool-arg", 'command=["echo","--not-an-option"]')
    assert rc == 0, err[-2000:]
    result = _first_json(out)["structuredContent"]["result"]
    assert result["job_id"] == "preview-job" and result["command"].endswith("busybox:1.37.0 echo --not-an-option")
    # a failed helper: the Inspector sees isError and the helper's one line
    rc, out, err = inspector(tmp_path, state, "--method", "tools/call", "--tool-name", "logs", "--tool-arg", "id=no-such-job")
    assert rc != 0
    said = _first_json(out)
    assert said["isError"] is True
    assert said["content"][0]["text"] == f"error: no job record no-such-job in {state}: see 'tao_jobs.py list'"
    assert not state.exists() or not any(state.iterdir())  # nothing was written for these calls
