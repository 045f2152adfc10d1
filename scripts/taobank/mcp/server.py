"""The stdio MCP server over :mod:`.tools`, on the ``mcp`` SDK's low-level server (2.x).

The low-level server, not MCPServer: the tools' schemas come from the helpers' parsers, and each result
carries ``structuredContent`` and ``isError`` as the helper's run decided. A helper runs in a worker
thread, so the server keeps answering (pings, cancellations) while a cluster is slow.
"""
from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from . import tools

INSTRUCTIONS = ("TAO training jobs on Kubernetes, SLURM or this machine's Docker engine: preflight, submit, then "
                "status/logs/metrics, fetch the results. Tools take credential NAMES (secret_env, secrets_file), "
                "never a key's value: keys stay in the user's environment or .env file.")


def tool_list() -> list[types.Tool]:
    """Every tool with its input and output schemas and its hints."""
    out = []
    for spec in tools.TOOLS:
        hints = tools.annotations(spec)
        out.append(types.Tool(
            name=spec.name, description=tools.description(spec), input_schema=tools.input_schema(spec),
            output_schema=tools.output_schema(spec),
            annotations=types.ToolAnnotations(title=hints["title"], read_only_hint=hints["readOnlyHint"],
                                              destructive_hint=hints["destructiveHint"],
                                              idempotent_hint=hints["idempotentHint"],
                                              open_world_hint=hints["openWorldHint"])))
    return out


def result_of(name: Any, arguments: Any) -> types.CallToolResult:
    """One tool call as its result: the helper's errors as ``isError`` text, its ``--json`` answer structured."""
    from ..errors import UsageError
    from ..text import error_line

    try:
        spec = tools.by_name(name)
    except UsageError as exc:
        return types.CallToolResult(content=[types.TextContent(type="text", text=error_line(exc))], is_error=True)
    done = tools.run(spec, arguments)
    if done.exit_code != 0 and done.result is None:
        return types.CallToolResult(content=[types.TextContent(type="text", text="\n".join(done.errors))],
                                    is_error=True)
    structured = done.structured()
    text = json.dumps(structured, indent=1, sort_keys=True, default=str)
    if done.exit_code != 0:  # an answer that says it failed (preflight MISSING, a cancel that failed for one job)
        text = "\n".join(done.errors) + "\n" + text
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured,
                                is_error=done.exit_code != 0)


def build() -> Server:
    from ..cli.entry import version

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await anyio.to_thread.run_sync(result_of, params.name, params.arguments)

    name, _, number = version().partition(" ")
    return Server(f"{name}", version=number, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool)


async def serve() -> None:
    server = build()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> int:
    anyio.run(serve)
    return 0
