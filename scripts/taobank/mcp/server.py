"""The stdio MCP server over :mod:`.tools`, on the ``mcp`` SDK's low-level server (2.x).

The low-level server, not MCPServer: the tools' schemas come from the helpers' parsers, and each result
carries ``structuredContent`` and ``isError`` as the helper's run decided. A helper runs in a worker
thread, so the server keeps answering (pings, cancellations) while a cluster is slow.
"""
from __future__ import annotations

import ctypes
import json
import threading
from typing import Any, Callable

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


def result_of(name: Any, arguments: Any, on_line: Callable[[str], None] | None = None) -> types.CallToolResult:
    """One tool call as its result: the helper's errors as ``isError`` text, its ``--json`` answer structured."""
    from ..errors import UsageError
    from ..text import error_line

    try:
        spec = tools.by_name(name)
    except UsageError as exc:
        return types.CallToolResult(content=[types.TextContent(type="text", text=error_line(exc))], is_error=True)
    done = tools.run(spec, arguments, on_line=on_line)
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
        return await _in_worker(ctx, params)

    name, _, number = version().partition(" ")
    return Server(f"{name}", version=number, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool)


class _Helper:
    """The worker thread a helper runs in, so a cancelled call can stop it as Ctrl-C would."""

    def __init__(self) -> None:
        self.thread: int | None = None
        self.lock = threading.Lock()

    def run(self, name: Any, arguments: Any, on_line: Callable[[str], None]) -> types.CallToolResult:
        with self.lock:
            self.thread = threading.get_ident()
        try:
            return result_of(name, arguments, on_line)
        finally:
            with self.lock:
                self.thread = None

    def interrupt(self) -> None:
        """KeyboardInterrupt in the helper's thread (run_main turns it into exit 130); it lands between two
        Python steps, so a helper waiting on a cluster stops when that wait ends."""
        with self.lock:
            if self.thread is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread), ctypes.py_object(KeyboardInterrupt))


#: What the user answers when asked to confirm (a form with one boolean).
CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean", "title": "Yes, go ahead"}},
                  "required": ["confirm"]}


async def _confirm(ctx: Any, question: str) -> str | None:
    """Ask the user through the client (elicitation); None when they agreed, else the one line to answer."""
    try:
        answer = await ctx.session.elicit_form(question, CONFIRM_SCHEMA, related_request_id=ctx.request_id)
    except Exception as exc:  # noqa: BLE001 - a client that cannot ask: nothing is done
        from ..text import one_line

        return f"error: could not ask for confirmation ({one_line(exc)[:120]}): nothing was done"
    if answer.action == "accept" and (answer.content or {}).get("confirm") is True:
        return None
    return f"error: not confirmed ({answer.action}): nothing was done"


def _can_ask(ctx: Any) -> bool:
    caps = getattr(ctx.session, "client_capabilities", None)
    return bool(caps is not None and getattr(caps, "elicitation", None) is not None)


async def _in_worker(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    """Run the call in a worker thread; its stderr lines become progress notifications (when the client asked
    for them), and a cancelled call interrupts the helper. A prune (or cancel all) is confirmed first by the
    user when the client can ask (elicitation)."""
    arguments = params.arguments
    spec = next((t for t in tools.TOOLS if t.name == params.name), None)
    question = tools.confirmation(spec, arguments) if spec is not None else None
    if question is not None and _can_ask(ctx):
        refused = await _confirm(ctx, question)
        if refused is not None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=refused)], is_error=True)
        arguments = tools.confirmed(spec, arguments)  # type: ignore[arg-type]
    helper, sent = _Helper(), [0]

    def on_line(line: str) -> None:
        sent[0] += 1
        try:
            anyio.from_thread.run(ctx.session.report_progress, float(sent[0]), None, line)
        except Exception:  # noqa: BLE001 - a progress line the client cannot take is not the call's failure
            pass

    try:
        return await anyio.to_thread.run_sync(helper.run, params.name, arguments, on_line,
                                              abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        helper.interrupt()
        raise


async def serve() -> None:
    server = build()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> int:
    anyio.run(serve)
    return 0
