"""The MCP server's stdin in bounded lines (taobank.mcp.stdio), through the real server process: a line over the
bound is refused unread with its memory bounded, a line that is not a request the protocol knows is answered
(never left for the client to wait on), and an id is quoted back only when it is short."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from taobank.mcp import stdio

BANK = Path(__file__).resolve().parents[2]
INIT = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},'
        '"clientInfo":{"name":"t","version":"1"}}}\n{"jsonrpc":"2.0","method":"notifications/initialized"}\n')


class Raw:
    """tao_mcp.py fed raw bytes on a pipe; its answers by id and its peak resident memory."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(BANK / "scripts" / "tao_mcp.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.out: list[dict] = []
        self.raw: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.write(INIT.encode())
        self.wait_for(0)

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.raw.append(line)
            self.out.append(json.loads(line))

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def wait_for(self, rid: object, timeout: float = 30) -> dict:
        end = time.time() + timeout
        while time.time() < end:
            for msg in self.out:
                if msg.get("id") == rid and "method" not in msg:
                    return msg
            time.sleep(0.05)
        raise AssertionError(f"no answer to id {rid!r} within {timeout} s: {[r[:200] for r in self.raw]}")

    def peak_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise AssertionError("no VmHWM")

    def close(self) -> str:
        self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return self.proc.stderr.read().decode()  # type: ignore[union-attr]


def _env(tmp_path: Path) -> dict[str, str]:
    import os

    return {**os.environ, "TAO_STATE_DIR": str(tmp_path / "state")}


def test_a_200_mb_line_is_refused_unread_in_bounded_memory(tmp_path):
    raw = Raw(_env(tmp_path))
    try:
        before = raw.peak_kib()
        start = time.monotonic()

        def feed() -> None:
            raw.write(b'{"jsonrpc":"2.0","method":"ping","id":"')
            piece = b"A" * (1 << 20)
            for _ in range(200):
                raw.write(piece)
            raw.write(b'"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n')

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        assert raw.wait_for(2, timeout=60)["result"] == {}
        assert time.monotonic() - start < 30
        refused = raw.wait_for(None)
        assert refused["error"]["code"] == -32600 and "longer than" in refused["error"]["message"]
        assert max(len(r) for r in raw.raw) < 4096  # the id is not quoted back
        assert raw.peak_kib() - before < 64 * 1024, (before, raw.peak_kib())  # not 200 MB, let alone 2.6 GB
    finally:
        stderr = raw.close()
    assert "Traceback" not in stderr


def test_lines_the_server_cannot_take_are_answered_never_left_waiting(tmp_path):
    raw = Raw(_env(tmp_path))
    try:
        raw.write(b"{not json\n")
        assert raw.wait_for(None)["error"]["code"] == -32700
        raw.out.clear()
        raw.write(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"a string"}\n')
        assert raw.wait_for(7)["error"]["code"] == -32600
        raw.write(b'{"jsonrpc":"1.0","id":8,"method":"ping"}\n')
        assert raw.wait_for(8)["error"]["code"] == -32600
        long_id = "i" * (stdio.MAX_ID + 1)
        raw.write(json.dumps({"jsonrpc": "2.0", "id": long_id, "method": "ping"}).encode() + b"\n")
        assert raw.wait_for(None)["error"]["code"] == -32600
        raw.write(json.dumps({"jsonrpc": "2.0", "id": 2 ** 80, "method": "ping"}).encode() + b"\n")
        raw.write(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}\n')  # no answer to a notice
        short = "s" * stdio.MAX_ID
        raw.write(json.dumps({"jsonrpc": "2.0", "id": short, "method": "ping"}).encode() + b"\n")
        assert raw.wait_for(short)["result"] == {}
        raw.write(b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":"\xff\xfe"}}\n')  # not UTF-8 inside
        assert raw.wait_for(9)["result"] == {}
        assert long_id.encode() not in b"".join(raw.raw) and str(2 ** 80).encode() not in b"".join(raw.raw)
        assert [m for m in raw.out if "id" not in m] == []
    finally:
        stderr = raw.close()
    assert raw.proc.returncode == 0 and "Traceback" not in stderr


def test_a_helpers_child_reads_end_of_file_not_the_wire():
    """fd 0 is the null device while serving (the SDK's own stdin claim, done here for the stdin it is handed)."""
    import os

    code = ("import os,sys; sys.path.insert(0, 'scripts'); from taobank.mcp.stdio import claimed_stdin\n"
            "with claimed_stdin() as wire:\n"
            "    print(repr(os.read(0, 10)), repr(wire.readline()))\n")
    proc = subprocess.run([sys.executable, "-c", code], input=b"line one\nline two\n", capture_output=True,
                          cwd=BANK, timeout=60, env={**os.environ})
    assert proc.stdout.decode().splitlines() == ["b'' b'line one\\n'"], proc.stderr
