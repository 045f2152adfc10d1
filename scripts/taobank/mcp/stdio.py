"""The server's stdin in bounded lines: no request, however long, is ever held in memory whole.

The SDK's stdio transport reads a whole line before it looks at it (a 200 MB line is 200 MB of text, then
a parse), and drops a line it cannot parse without an answer (the client waits for ever). Here a line over
:data:`MAX_LINE` bytes is read through in small pieces and refused; a line that is not JSON, or a request
the protocol's models refuse, is answered with the JSON-RPC error it earns. Only a request's id is ever
quoted back, and only a short one.
"""
from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import Any, BinaryIO, Iterator

import anyio

#: The longest request line read (bytes, the newline included): a tool call's arguments are a few KiB.
MAX_LINE = 4 * 1024 * 1024
#: What the rest of an over-long line is read in (and forgotten).
_PIECE = 1024 * 1024
#: The longest string id quoted back in an answer (JSON-RPC asks for the id; a longer one is answered as null).
MAX_ID = 128
_MAX_INT_ID = 2 ** 53  # what every JSON reader holds exactly


@contextmanager
def claimed_stdin() -> Iterator[BinaryIO]:
    """The client's wire (fd 0) on a private descriptor, fd 0 itself the null device while serving: a helper's
    child reads end-of-file, never the client's messages (what the SDK does for a stdin it opens itself)."""
    import fcntl

    try:
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        yield sys.stdin.buffer
        return
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        # never closed: a worker thread may still block on it after the transport ends
        yield os.fdopen(private, "rb", closefd=False)
    finally:
        os.dup2(private, 0)


def short_id(value: Any) -> int | str | None:
    """``value`` if an answer may quote it back (an integer JSON holds exactly, a string of at most
    :data:`MAX_ID` characters), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _MAX_INT_ID:
        return value
    if isinstance(value, str) and len(value) <= MAX_ID:
        return value
    return None


class BoundedLines:
    """An async iterator of the wire's lines for the SDK's stdio transport (its ``stdin``): each line of at most
    :data:`MAX_LINE` bytes that the protocol's models take; any other is answered here through
    :meth:`answer_with`'s stream and never reaches the server."""

    def __init__(self, wire: BinaryIO) -> None:
        self._wire = wire
        self._out: Any = None
        self._ready = anyio.Event()

    def answer_with(self, write_stream: Any) -> None:
        """The stream the refusals go out on (the transport's own: they reach stdout in order with the rest)."""
        self._out = write_stream
        self._ready.set()

    def __aiter__(self) -> "BoundedLines":
        return self

    async def __anext__(self) -> str:
        while True:
            line = await anyio.to_thread.run_sync(self._wire.readline, MAX_LINE, abandon_on_cancel=True)
            if not line:
                raise StopAsyncIteration
            if len(line) >= MAX_LINE and not line.endswith(b"\n"):
                await anyio.to_thread.run_sync(self._skip_line, abandon_on_cancel=True)
                await self._refuse(None, "INVALID_REQUEST", f"request line longer than {MAX_LINE} bytes: refused "
                                   "unread")
                continue
            text = line.decode("utf-8", "replace")
            if text.strip() and await self._taken(text):
                return text

    def _skip_line(self) -> None:
        """Read the rest of an over-long line, a piece at a time, and forget it."""
        while True:
            piece = self._wire.readline(_PIECE)
            if not piece or piece.endswith(b"\n"):
                return

    async def _taken(self, text: str) -> bool:
        """Whether the server gets ``text``; else it was answered here (a request) or dropped (a notification or
        a response the models refuse: the SDK drops those too, with nothing to answer)."""
        import mcp_types as types

        try:
            message = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            await self._refuse(None, "PARSE_ERROR", "the line is not JSON")
            return False
        request = isinstance(message, dict) and "method" in message and "id" in message
        if request and short_id(message["id"]) is None:
            await self._refuse(None, "INVALID_REQUEST", f"a request id is a string of at most {MAX_ID} characters "
                               "or an integer (it is not quoted)")
            return False
        try:
            types.jsonrpc_message_adapter.validate_json(text, by_name=False)  # the transport's own check
        except Exception:  # noqa: BLE001 - pydantic's refusal quotes the message: it is not passed on
            if request:
                await self._refuse(message["id"], "INVALID_REQUEST", "not a JSON-RPC 2.0 request the MCP "
                                   "protocol knows (jsonrpc, id, method, params as an object)")
            return False
        return True

    async def _refuse(self, rid: int | str | None, code: str, message: str) -> None:
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        await self._ready.wait()
        error = types.JSONRPCError(jsonrpc="2.0", id=rid,
                                   error=types.ErrorData(code=getattr(types, code), message=message))
        await self._out.send(SessionMessage(error))
