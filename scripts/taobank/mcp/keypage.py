"""A one-time page on 127.0.0.1 where the user pastes one key (MCP URL-mode elicitation).

The MCP specification forbids asking for a secret through form elicitation (the value would pass through
the client, and maybe the model); URL mode sends the user to a page of the server instead. This is that
page: a random port of 127.0.0.1, a random token as its path (the URL the client shows; it is not the key),
a form whose value comes back by POST only (never in a URL), answered once: the first accepted value closes
it, and :meth:`KeyPage.close` (the server's wait timed out, the call was cancelled) stops it. Nothing of a
request is logged. Standard library only.

No connection can hold the page: each is served in its own thread, cut when its request is not read and
answered within :data:`DEADLINE` seconds (a client that sends a byte now and then included), at most
:data:`MAX_CONNECTIONS` at once, and closing cuts every one of them instead of waiting for it.
"""
from __future__ import annotations

import html
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn
from typing import Any, Callable
from urllib.parse import parse_qs

from ..errors import TaoError

MAX_BODY = 64 * 1024
#: Seconds a connection has to send its whole request (a browser's form post takes milliseconds).
DEADLINE = 10.0
#: Connections served at once; one more is closed unanswered.
MAX_CONNECTIONS = 32


class KeyPage:
    """The page for the key ``name``; ``accept(value)`` stores it (a :class:`TaoError` is shown on the page,
    which stays open for another try). ``done`` is set once a value was accepted."""

    def __init__(self, name: str, accept: Callable[[str], object], where: str = "") -> None:
        self.name, self.where, self._accept = name, where, accept
        self.token = secrets.token_urlsafe(32)
        self.elicitation_id = secrets.token_hex(16)  # the id the client tracks: not the token
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _handler(self))
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/{self.token}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="tao-key-page", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving (idempotent): the URL answers nothing from now on. Never waits on a client: the
        connections still open are cut."""
        if self._thread.is_alive():
            self._httpd.shutdown()  # the accept loop ends within its poll interval
            self._thread.join(5)
        self._httpd.server_close()
        self._httpd.cut_all()

    def take(self, value: str) -> str | None:
        """Accept ``value`` once; None when stored, else the one line to show."""
        with self._lock:
            if self.done.is_set():
                return "this page was used already: nothing was stored"
            try:
                self._accept(value)
            except TaoError as exc:
                return str(exc)
            except Exception as exc:  # noqa: BLE001 - a bug of the bank: one line on the page, no traceback
                return f"internal error ({type(exc).__name__}): nothing was stored; please report it"
            self.done.set()
            return None

    def form(self, said: str = "") -> str:
        name = html.escape(self.name)
        where = f" It is stored in {html.escape(self.where)} (mode 600)." if self.where else ""
        note = f'<p role="alert">{html.escape(said)}</p>' if said else ""
        return (f"<!doctype html><meta charset=utf-8><title>{name} for TAO</title>"
                f"<h1>{name}</h1><p>Paste the value of {name} for your TAO job.{where} It goes from this page to "
                f"the TAO MCP server on this machine, not through the chat.</p>{note}"
                f'<form method=post><input type=password name=value autocomplete=off autofocus required size=60>'
                f" <button>Store</button></form>")


#: What socketserver hands a server per connection (a TCP server's is its socket).
_Request = socket.socket | tuple[bytes, socket.socket]


class _Server(ThreadingMixIn, HTTPServer):
    """A thread per connection (daemon, never joined), at most :data:`MAX_CONNECTIONS` of them; no traceback on
    stderr (the MCP client's log) for a connection that broke."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.open: set[_Request] = set()
        self.open_lock = threading.Lock()

    def process_request(self, request: _Request, client_address: Any) -> None:
        with self.open_lock:
            full = len(self.open) >= MAX_CONNECTIONS
            if not full:
                self.open.add(request)
        if full:
            super().shutdown_request(request)
            return
        super().process_request(request, client_address)

    def shutdown_request(self, request: _Request) -> None:
        with self.open_lock:
            self.open.discard(request)
        super().shutdown_request(request)

    def cut_all(self) -> None:
        """End every open connection now: its thread's next read or write fails and it ends."""
        with self.open_lock:
            left = list(self.open)
        for request in left:
            _cut(request if isinstance(request, socket.socket) else request[1])

    def handle_error(self, request: object, client_address: object) -> None:
        return


def _cut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed already
        pass


_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; form-action 'self'; frame-ancestors 'none'"}


def _handler(page: KeyPage) -> type[BaseHTTPRequestHandler]:
    path = f"/{page.token}"

    class Handler(BaseHTTPRequestHandler):
        timeout = DEADLINE  # a read that waits longer fails even before the deadline cuts the connection
        server_version = "tao-key-page"
        sys_version = ""

        def setup(self) -> None:
            super().setup()
            # the whole request within DEADLINE: a client that trickles bytes is cut, whatever each read waits
            self._deadline = threading.Timer(DEADLINE, _cut, (self.connection,))
            self._deadline.daemon = True
            self._deadline.start()

        def finish(self) -> None:
            self._deadline.cancel()
            try:
                super().finish()
            except OSError:  # the deadline cut it
                pass

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - nothing of a request is logged
            return

        def _send(self, code: int, body: str) -> None:
            data = body.encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in _HEADERS.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _ours(self) -> bool:
            """The token's path exactly (no query: a value never rides in a URL), on this host (no DNS
            rebinding)."""
            hosts = (f"127.0.0.1:{page.port}", f"localhost:{page.port}")
            if self.path != path or self.headers.get("Host", "") not in hosts:
                self._send(404, "<!doctype html><title>not found</title>not found")
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self._ours():
                if page.done.is_set():
                    self._send(410, "<!doctype html><title>used</title>This page was used already.")
                else:
                    self._send(200, page.form())

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            if not self._ours():
                return
            kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
            lengths = self.headers.get_all("Content-Length") or []
            try:  # exactly one length, no other framing: a body two readers could frame two ways is refused
                length = int(lengths[0]) if len(lengths) == 1 and "Transfer-Encoding" not in self.headers else -1
            except ValueError:
                length = -1
            if kind != "application/x-www-form-urlencoded" or not 0 <= length <= MAX_BODY:
                self._send(400, page.form("send the form (a urlencoded body of at most 64 KiB)"))
                return
            raw = self.rfile.read(length)
            if len(raw) != length:  # cut at the deadline: a part of a key is no key
                return
            body = raw.decode("utf-8", "replace")
            try:
                fields = parse_qs(body, keep_blank_values=True, max_num_fields=4)
            except ValueError:
                fields = {}
            values = fields.get("value") or []
            if len(values) != 1 or not values[0]:  # one value, not none or two to choose from
                self._send(410 if page.done.is_set() else 400, page.form("paste the key into the field and send it"))
                return
            said = page.take(values[0])
            if said is None:
                self._send(200, f"<!doctype html><meta charset=utf-8><title>stored</title>{html.escape(page.name)} "
                                "was stored. You can close this page and go back to your agent.")
            else:
                self._send(410 if page.done.is_set() else 400, page.form(said))

    return Handler
