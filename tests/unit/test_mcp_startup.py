"""The MCP server's fast start-up (taobank.mcp.sdk): the SDK's server parts without its package __init__s and
its protocol models built on first use, on the pinned SDK; the plain import where that does not hold.
The time itself is a benchmark (benchmarks/mcp_status.py), not a test."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=SCRIPTS, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def test_the_server_parts_load_without_the_client_stack_and_models_build_on_first_use():
    said = _python(
        "import sys\n"
        "from taobank.mcp import sdk\n"
        "print(sdk.light())\n"
        "from taobank.mcp import server\n"
        "print(sorted(n for n in sys.modules if n.startswith(('mcp.client', 'mcp.server.mcpserver', 'httpx'))))\n"
        "import mcp_types\n"
        "from pydantic._internal._config import config_defaults\n"
        "print(mcp_types.Tool.__pydantic_complete__, config_defaults['defer_build'])\n"
        "mcp_types.Tool(name='x', input_schema={'type': 'object'})\n"
        "print(mcp_types.Tool.__pydantic_complete__)\n")
    assert said.splitlines() == ["True", "[]", "False False", "True"]  # pydantic's own default is back


def test_another_sdk_layout_gets_the_plain_import():
    said = _python(
        "import sys\n"
        "from taobank.mcp import sdk\n"
        "sdk.NEEDED = sdk.NEEDED + ('mcp.server.no_such_part',)\n"
        "print(sdk.light(), [n for n in sys.modules if n == 'mcp' or n.startswith('mcp.')])\n"
        "import mcp.server.lowlevel\n"
        "print('mcp.client' in sys.modules, sdk.light())\n")
    assert said.splitlines() == ["False []", "True False"]
