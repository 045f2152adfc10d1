"""A raw stdio MCP client of scripts/tao_mcp.py for the tests: JSON-RPC lines in, answers by id out."""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[2]
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bank-test", "version": "1"}}


class Session:
    """A running tao_mcp.py (initialized unless ``init=False``, declaring ``capabilities``) and its answers."""

    def __init__(self, env: dict[str, str], init: bool = True, capabilities: dict | None = None,
                 protocol: str = INIT["protocolVersion"]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(BANK / "scripts" / "tao_mcp.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, bufsize=1)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 1
        self.notifications: list[dict] = []  # what came while waiting for an answer
        self.answers: dict[object, dict] = {}
        self.traffic: list[str] = []  # every line sent and received, for the tests that grep it
        if init:
            assert "result" in self.request("initialize", {**INIT, "capabilities": capabilities or {},
                                                           "protocolVersion": protocol})
            self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.traffic.append(line)
            self.lines.put(line)

    def send(self, text: str) -> None:
        self.traffic.append(text)
        self.proc.stdin.write(text + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def start(self, method: str, params: dict | None = None) -> int:
        """Send a request; its id (the answer is waited for with :meth:`answer`)."""
        rid, self.next_id = self.next_id, self.next_id + 1
        msg: dict = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(json.dumps(msg))
        return rid

    def _next(self, end: float) -> None:
        msg = json.loads(self.lines.get(timeout=max(0.1, end - time.time())))
        if "id" in msg and "method" not in msg:
            self.answers[msg["id"]] = msg
        else:
            self.notifications.append(msg)

    def answer(self, rid: int, timeout: float = 120) -> dict:
        end = time.time() + timeout
        while rid not in self.answers:
            self._next(end)
        return self.answers.pop(rid)

    def notification(self, method: str, timeout: float = 120) -> dict:
        """The first notification ``method`` not yet taken (waiting for it up to ``timeout``)."""
        end = time.time() + timeout
        while True:
            for i, msg in enumerate(self.notifications):
                if msg.get("method") == method:
                    return self.notifications.pop(i)
            self._next(end)

    def reply(self, request: dict, result: dict) -> None:
        """Answer a request the server sent (elicitation/create ...)."""
        self.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}))

    def request(self, method: str, params: dict | None = None, timeout: float = 120) -> dict:
        return self.answer(self.start(method, params), timeout)

    def call(self, tool: str, **arguments: object) -> dict:
        """``tools/call`` -> the result (content, structuredContent, isError)."""
        return self.request("tools/call", {"name": tool, "arguments": arguments})["result"]

    def ok(self, tool: str, **arguments: object) -> object:
        """A call that must succeed: its ``--json`` answer."""
        done = self.call(tool, **arguments)
        assert done["isError"] is False, (tool, done["content"])
        return done["structuredContent"]["result"]

    def close(self) -> str:
        self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return self.proc.stderr.read()  # type: ignore[union-attr]

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def round_trip(mcp: Session, submit_tool: str, submit_args: dict, tmp: Path, env: dict[str, str],
               epochs: int, timeout: float = 180) -> dict:
    """submit -> status (until terminal) -> logs -> metrics -> fetch through the MCP tools, each answer checked
    against tao_jobs.py --json on the same records; returns what the tools said."""
    from tests.support.results_cli import tao_jobs, tree

    job = mcp.ok(submit_tool, **submit_args)
    jid = job["id"]  # type: ignore[index]
    end = time.time() + timeout
    while True:
        (view,) = mcp.ok("status", ids=[jid])  # type: ignore[misc]
        if view["state"] in ("COMPLETE", "ERROR", "CANCELED"):
            break
        assert time.time() < end, f"{jid} still {view['state']} after {timeout}s"
        time.sleep(1)
    assert view["state"] == "COMPLETE", (view, mcp.call("logs", id=jid))
    (again,) = mcp.ok("status", ids=[jid])  # type: ignore[misc]
    (shell,) = json.loads(tao_jobs("status", jid, "--json", env=env).stdout)
    differ = {k: (again.get(k), shell.get(k)) for k in set(again) | set(shell) if again.get(k) != shell.get(k)}
    assert not differ, differ  # a terminal record: the shell reads what the tool left
    # the look that saw the job end also carried the training's last progress; the record is the same
    assert {k: v for k, v in view.items() if k != "progress"} == {k: v for k, v in again.items() if k != "progress"}

    logs = mcp.ok("logs", id=jid)
    assert logs == json.loads(tao_jobs("logs", jid, "--json", env=env).stdout)
    metrics = mcp.ok("metrics", id=jid)
    assert metrics == json.loads(tao_jobs("metrics", jid, "--json", env=env).stdout)
    assert [r["epoch"] for r in metrics["rows"]] == list(range(epochs))  # type: ignore[index]

    fetched = mcp.ok("fetch", id=jid, to=str(tmp / "by-mcp"))
    by_shell = json.loads(tao_jobs("fetch", jid, "--to", str(tmp / "by-shell"), "--json", env=env).stdout)
    assert tree(tmp / "by-mcp") == tree(tmp / "by-shell") and tree(tmp / "by-mcp")
    assert sorted(f["path"] for f in fetched) == sorted(f["path"] for f in by_shell)  # type: ignore[union-attr]
    assert any(p.endswith("status.json") for p in tree(tmp / "by-mcp"))
    same = mcp.ok("fetch", id=jid, to=str(tmp / "by-mcp"))  # a second fetch moves nothing: all already here
    assert {f["moved"] for f in same} == {0}  # type: ignore[union-attr]
    status = next(p for p in tree(tmp / "by-mcp") if p.endswith("status.json"))
    (tmp / "by-mcp" / status).write_text("mine\n")  # a local file that differs is never replaced silently
    again = mcp.call("fetch", id=jid, to=str(tmp / "by-mcp"))  # the helper's refusal, as an error result
    assert again["isError"] is True and "exists: pass --force" in again["content"][0]["text"]
    assert (tmp / "by-mcp" / status).read_text() == "mine\n"
    return {"job": job, "view": view, "logs": logs, "metrics": metrics, "fetched": fetched}
