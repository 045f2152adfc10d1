#!/usr/bin/env python3
"""The bank's verbs as MCP tools for agents (stdio): preflight, submit, status, logs, cancel, metrics,
artifacts, fetch, prune, continue, sweep best, list.

  tao_mcp.py            serve MCP on stdin/stdout (an MCP client starts it; the plugin declares it)
  tao_mcp.py --tools    print the tools' names and schemas as JSON, and exit

Each tool runs the helper the shell runs (tao_jobs.py, tao_k8s.py, tao_slurm.py, tao_docker.py) with the
same records, gates and one-line errors. Tools take the NAME of a credential, never its value.
Needs the Python package mcp (requirements-dev.txt); the helpers run without it.
"""
from __future__ import annotations

import sys
from pathlib import Path


def _mcp_requirement() -> str:
    """The mcp line of requirements-dev.txt (one place pins it)."""
    try:
        for line in (Path(__file__).resolve().parents[1] / "requirements-dev.txt").read_text().splitlines():
            if line.split("#")[0].strip().startswith("mcp"):
                return line.split("#")[0].strip()
    except OSError:
        pass
    return "mcp"


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv == ["--tools"]:
        import json

        from taobank.mcp import tools

        print(json.dumps([{"name": t.name, "description": tools.description(t), "inputSchema": tools.input_schema(t),
                           "outputSchema": tools.output_schema(t), "annotations": tools.tool_annotations(t)}
                          for t in tools.TOOLS], indent=2))
        return 0
    if argv:
        print(f"error: tao_mcp.py takes no arguments but --tools or --help (got {argv[0][:40]!r})", file=sys.stderr)
        return 2
    import importlib.util

    if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("mcp_types") is None:
        print(f"error: the MCP server needs the Python package mcp 2.x: run "
              f"'{sys.executable} -m pip install \"{_mcp_requirement()}\"' (the helpers run without it)", file=sys.stderr)
        return 1
    from taobank.mcp import sdk

    sdk.light()  # the SDK's server parts without its client stack: a faster start-up
    from taobank.mcp import server

    return server.main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
