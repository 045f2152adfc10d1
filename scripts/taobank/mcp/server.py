"""The stdio MCP server over :mod:`.tools`, on the ``mcp`` SDK's low-level server (2.x).

The low-level server, not MCPServer: the tools' schemas come from the helpers' parsers, and each result
carries ``structuredContent`` and ``isError`` as the helper's run decided. A helper runs in a worker
thread, so the server keeps answering (pings, cancellations) while a cluster is slow. Before a submit runs,
each key it needs is found (environment, credentials file) or, once the submit's read-only checks passed,
asked of the user by URL elicitation.
"""
from __future__ import annotations

import ctypes
import json
import threading
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from . import tools

INSTRUCTIONS = ("TAO training jobs on Kubernetes, SLURM or this machine's Docker engine: preflight, submit, then "
                "status/logs/metrics, fetch the results. Tools take credential NAMES (secret_env, secrets_file), "
                "never a key's value: keys stay in the user's environment or ~/.config/tao/.env, and a key a submit "
                "lacks is asked of the user on a local page, never in the chat.")


_TOOLS: list[types.Tool] = []


def tool_list() -> list[types.Tool]:
    """Every tool with its input and output schemas and its hints (built once: it imports every helper)."""
    if _TOOLS:
        return _TOOLS
    out = []
    for spec in tools.TOOLS:
        hints = tools.tool_annotations(spec)
        out.append(types.Tool(
            name=spec.name, description=tools.description(spec), input_schema=tools.input_schema(spec),
            output_schema=tools.output_schema(spec),
            annotations=types.ToolAnnotations(title=hints["title"], read_only_hint=hints["readOnlyHint"],
                                              destructive_hint=hints["destructiveHint"],
                                              idempotent_hint=hints["idempotentHint"],
                                              open_world_hint=hints["openWorldHint"])))
    _TOOLS[:] = out
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


# ------------------------------------------------------------------ resources
JSON = "application/json"


async def _helper_answer(spec: tools.ToolSpec, arguments: dict) -> Any:
    """A helper's ``--json`` answer, or an MCP error carrying its one line."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    done = await anyio.to_thread.run_sync(tools.run, spec, arguments)
    if done.exit_code != 0:
        raise MCPError(code=INVALID_PARAMS, message="\n".join(done.errors))
    return done.result


def _resource_uri(job_id: str, part: str = "") -> str:
    return f"{tools.RESOURCE_PREFIX}{job_id}" + (f"/{part}" if part else "")


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    """Every job of this machine's records (no cluster contact), as tao://jobs/<id>."""
    views = await _helper_answer(tools.by_name("list"), {})
    return types.ListResourcesResult(resources=[
        types.Resource(uri=_resource_uri(v["id"]), name=v["id"], mime_type=JSON,
                       description=f"{v.get('platform')} job, {v.get('state')}: {v.get('description') or ''}".strip(" :"))
        for v in views or []])


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=[
        types.ResourceTemplate(uri_template=_resource_uri("{id}", part), name=f"job {part or 'view'}",
                               description=what, mime_type=JSON)
        for part, (_, what) in tools.RESOURCE_PARTS.items()])


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    from ..errors import UsageError
    from ..text import error_line

    try:
        _, spec, arguments = tools.resource_call(params.uri)
    except UsageError as exc:
        raise MCPError(code=INVALID_PARAMS, message=error_line(exc)) from None
    answer = await _helper_answer(spec, arguments)
    if spec.name == "status":
        answer = answer[0] if answer else None
    return types.ReadResourceResult(contents=[types.TextResourceContents(
        uri=str(params.uri), mime_type=JSON, text=json.dumps(answer, indent=1, sort_keys=True, default=str))])


class Subscriptions:
    """The subscribed jobs and ONE poll loop for all of them: every ``interval`` seconds one status of every
    subscribed job (one query per platform, as the CLI's status), and resources/updated for each URI of a job
    whose state or training epoch changed."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.uris: dict[str, set[str]] = {}  # job id -> subscribed URIs
        self.seen: dict[str, tuple] = {}
        self.session: Any = None
        self.polling = False

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        from mcp.shared.exceptions import MCPError
        from mcp_types import INVALID_PARAMS

        from ..errors import UsageError
        from ..text import error_line

        try:
            job, _, _ = tools.resource_call(params.uri)
        except UsageError as exc:
            raise MCPError(code=INVALID_PARAMS, message=error_line(exc)) from None
        (view,) = await _helper_answer(tools.by_name("status"), {"ids": [job]})  # an unknown id is refused here
        self.seen.setdefault(job, self._key(view))
        self.uris.setdefault(job, set()).add(str(params.uri))
        self.session = ctx.session
        if not self.polling:
            self.polling = True
            ctx.lifespan_context["tasks"].start_soon(self._poll)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        for job, uris in list(self.uris.items()):
            uris.discard(str(params.uri))
            if not uris:
                del self.uris[job]
        return types.EmptyResult()

    @staticmethod
    def _key(view: dict) -> tuple:
        return view.get("state"), (view.get("progress") or {}).get("epoch")

    async def _poll(self) -> None:
        while True:
            await anyio.sleep(self.interval)
            ids = sorted(self.uris)
            if not ids:
                continue
            done = await anyio.to_thread.run_sync(tools.run, tools.by_name("status"), {"ids": ids})
            if done.exit_code != 0 or not isinstance(done.result, list):
                continue  # a cluster that did not answer this time: the next poll asks again
            for view in done.result:
                key, job = self._key(view), view.get("id")
                if job in self.uris and self.seen.get(job) != key:
                    self.seen[job] = key
                    for uri in sorted(self.uris[job]):
                        try:
                            await self.session.send_resource_updated(uri)
                        except Exception:  # noqa: BLE001 - a client gone: its next read still answers
                            pass


@asynccontextmanager
async def _lifespan(server: Any) -> AsyncIterator[dict]:
    """A task group for the subscription poll loop, for the connection's lifetime. Nothing else starts here:
    the helpers are imported by the first call that needs them, after ``initialize`` was answered."""
    async with anyio.create_task_group() as tasks:
        yield {"tasks": tasks}
        tasks.cancel_scope.cancel()


def build() -> Server:
    import os

    from ..cli.entry import version

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await anyio.to_thread.run_sync(tool_list))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await _in_worker(ctx, params)

    try:  # how often subscribed jobs are looked at
        interval = max(0.5, float(os.environ.get("TAO_MCP_POLL_SECONDS", "10")))
    except ValueError:
        interval = 10.0
    subs = Subscriptions(interval)
    name, _, number = version().partition(" ")
    return Server(f"{name}", version=number, instructions=INSTRUCTIONS, lifespan=_lifespan,
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource,
                  on_subscribe_resource=subs.subscribe, on_unsubscribe_resource=subs.unsubscribe)


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


def _elicitation(ctx: Any) -> Any:
    caps = getattr(ctx.session, "client_capabilities", None)
    return getattr(caps, "elicitation", None) if caps is not None else None


def _can_ask(ctx: Any) -> bool:
    """The client takes a form (``elicitation: {}`` is form mode, as before URL mode existed)."""
    ask = _elicitation(ctx)
    return ask is not None and (getattr(ask, "form", None) is not None or getattr(ask, "url", None) is None)


def _can_send_to_page(ctx: Any) -> bool:
    """The client takes URL-mode elicitation (MCP 2025-11-25): the user opens the server's page."""
    return getattr(_elicitation(ctx), "url", None) is not None


def _key_wait() -> float:
    """How long the user has to send a key on the page (TAO_MCP_KEY_SECONDS, default 300)."""
    import os

    try:
        return max(1.0, float(os.environ.get("TAO_MCP_KEY_SECONDS", "300")))
    except ValueError:
        return 300.0


async def _ask_key(ctx: Any, name: str) -> str | None:
    """Ask the user for the key ``name`` on a one-time page of this machine (URL elicitation); None once it
    is stored (credentials file and this process's environment), else the one line to answer."""
    from ..text import one_line
    from . import credentials
    from .keypage import KeyPage

    where = str(credentials.env_file())
    instead = f"or add {name}=<value> to {where} (mode 600) and call again"
    page = KeyPage(name, lambda value: credentials.store(name, value), where)
    try:
        try:
            answer = await ctx.session.elicit_url(
                f"The TAO job needs {name}. Open this page on this machine and paste it there: it is stored in "
                f"{where} (mode 600) and never passes through the chat.", page.url, page.elicitation_id,
                related_request_id=ctx.request_id)
        except Exception as exc:  # noqa: BLE001 - a client that cannot ask after all
            return f"error: could not ask for {name} ({one_line(exc)[:120]}): nothing was done; {instead}"
        if answer.action != "accept":
            return f"error: {name} was not given ({answer.action}): nothing was done; {instead}"
        end = anyio.current_time() + _key_wait()
        while not page.done.is_set():
            if anyio.current_time() > end:
                return f"error: {name} was not sent on the page within {_key_wait():.0f} s: nothing was done; {instead}"
            await anyio.sleep(0.1)
    finally:
        with anyio.CancelScope(shield=True):  # a cancelled call closes its page too
            await anyio.to_thread.run_sync(page.close)
    try:
        await ctx.session.send_elicit_complete(page.elicitation_id, related_request_id=ctx.request_id)
    except Exception:  # noqa: BLE001 - the key is stored; a client that missed the notice still gets the result
        pass
    return None


async def _checks_first(spec: tools.ToolSpec, arguments: dict) -> str | None:
    """A submit's read-only checks (its ``dry_run`` with ``check``: GPUs, paths, queue, image ...) before a key it
    lacks is asked of the user: None when they pass, else the helper's lines (nothing asked, nothing done)."""
    if not spec.name.startswith("submit_") and spec.name != "continue":
        return None
    done = await anyio.to_thread.run_sync(tools.run, spec, {**arguments, "dry_run": True, "check": True})
    if done.exit_code == 0:
        return None
    return "\n".join(done.errors) + "\n(the submit's checks ran before any key was asked; nothing was done)"


async def _credentials(ctx: Any, spec: tools.ToolSpec, arguments: Any) -> str | None:
    """The keys a submit needs, before it runs: from the environment, else the credentials file, else the
    user through the page (URL elicitation) when the client can send them there, once the submit's read-only
    checks passed (:func:`_checks_first`: no key is pasted for a job that is then refused); None when all are
    there (or it is a dry run: the helper says what it says), else the one line to answer."""
    from ..errors import TaoError
    from ..text import error_line
    from . import credentials

    names = credentials.needed(spec.name, arguments)
    if not names:
        return None
    try:
        missing = await anyio.to_thread.run_sync(credentials.load, names)
    except TaoError as exc:
        return error_line(exc)
    if not missing or arguments.get("dry_run") is True:
        return None
    refused = await _checks_first(spec, arguments)
    if refused is not None:
        return refused
    if not _can_send_to_page(ctx):
        return credentials.missing_line(spec.name, missing)
    for name in missing:
        refused = await _ask_key(ctx, name)
        if refused is not None:
            return refused
    return None


async def _in_worker(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    """Run the call in a worker thread; its stderr lines become progress notifications (when the client asked
    for them), and a cancelled call interrupts the helper. A prune (or cancel all) is confirmed first by the
    user when the client can ask (elicitation)."""
    arguments = params.arguments
    spec = next((t for t in tools.TOOLS if t.name == params.name), None)
    if spec is not None:
        try:
            refused = await _credentials(ctx, spec, arguments)
        except Exception as exc:  # noqa: BLE001 - a bug of the bank: one line, never a traceback to the client
            from ..text import error_line

            refused = error_line(f"internal error ({type(exc).__name__}): {exc}: please report it")
        if refused is not None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=refused)], is_error=True)
    question = tools.confirmation(spec, arguments) if spec is not None else None
    if question is not None and _can_ask(ctx):
        if spec is not None and spec.name == "prune":  # what would go, listed first: a refusal asks nothing
            listed = await anyio.to_thread.run_sync(tools.run, spec, {**arguments, "dry_run": True})  # type: ignore[dict-item]
            if listed.exit_code != 0 or not isinstance(listed.result, list):
                return types.CallToolResult(content=[types.TextContent(type="text", text="\n".join(listed.errors))],
                                            is_error=True)
            question = tools.prune_question(question, listed.result)
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
    from typing import cast

    from .stdio import BoundedLines, claimed_stdin

    server = build()
    with claimed_stdin() as wire:
        lines = BoundedLines(wire)
        async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
            lines.answer_with(write_stream)
            await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> int:
    anyio.run(serve)
    return 0
