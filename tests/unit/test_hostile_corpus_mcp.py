"""A hostile corpus against the bank's outside surfaces, each through the real thing: MCP request lines through the
real server process (huge and odd ids, wrong types, paths to other files, bytes that are not UTF-8), raw
connections to the key page (slow ones, bad tokens, odd methods, big bodies), pasted keys holding every line
break and control character, and cluster text with ESC/CSI/OSC/C1 controls through ``tao_k8s.py preflight``.

For every input: no traceback, no hang (each answer within its timeout), no terminal escape in what a person
reads, and no planted secret in any output."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from fakeproc import NO_KUEUE, items
from test_k8s_gates import node
from test_mcp_stdio import Raw

from taobank.errors import TaoError
from taobank.mcp import credentials, keypage
from taobank.mcp.keypage import KeyPage

#: The secrets planted in files and requests: none may appear in any output. SECRET is no token shape (no
#: masking hides it: only not quoting it keeps it out); TOKEN is one (pasted where a name belongs).
SECRET = "PLANTEDsecret7c1e9b2d4f6a8"
TOKEN = "nvapi-" + "Q7zK2mX9pL4vR8sT1wY6bN3cJ5hG0dF" * 2
#: Characters that act on a terminal: C0 controls but tab and newline, DEL, C1 (CSI 0x9b, OSC 0x9d ...).
ESCAPES = [chr(c) for c in range(0x20) if chr(c) not in "\t\n"] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)]


def _escapes_in(text: str) -> list[str]:
    return sorted({repr(c) for c in text if c in ESCAPES})


# ------------------------------------------------------------------ files a path argument may point at
def plant(folder: Path) -> dict[str, Path]:
    """Files that are no job spec, each holding SECRET (as a value, a hash, a long key, a list item, a line)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "shadow": f"root:$6$salt${SECRET}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
        "envfile": f"HF_TOKEN={SECRET}\nexport NGC_KEY='{SECRET}'\n",
        "privkey": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n-----END OPENSSH PRIVATE KEY-----\n",
        "dockercfg": json.dumps({"auths": {"nvcr.io": {"auth": SECRET}}}),
        "mapping": f"image: busybox\npassword: {SECRET}\nimagee: {SECRET}\n",
        "longkey": f"image: busybox\n{SECRET}_{'x' * 40}: 1\n",
        "nested": f"image: busybox\nenv: {{A: {SECRET}}}\nconfig: {{{SECRET}: 1}}\n",
        "listing": f"- {SECRET}\n- two\n",
        "bare": f"{SECRET}\n",
        "broken": f"a: [\n{SECRET}\n",
        "tabs": f"image:\tbusybox\n\t{SECRET}: 1\n",
        "binary": None,
        "ansi": f"image: busybox\ncommand: ['\x1b]0;{SECRET}\x07']\nx\x1b[2J: 1\n",
    }
    out = {}
    for name, text in files.items():
        path = folder / name
        if text is None:
            path.write_bytes(b"\xff\xfe" + SECRET.encode() + b"\x00\x9b31m\n")
        else:
            path.write_text(text)
        path.chmod(0o600)
        out[name] = path
    return out


# ------------------------------------------------------------------ MCP request lines
def mcp_corpus(files: dict[str, Path], folder: Path) -> list[tuple[bytes, object]]:
    """(a raw request line, the id its answer must carry; None: answered with id null or not at all)."""
    out: list[tuple[bytes, object]] = []
    rid = [100]

    def call(tool: str, arguments: object, raw_id: object = None) -> None:
        rid[0] += 1
        the_id = rid[0] if raw_id is None else raw_id
        msg = {"jsonrpc": "2.0", "id": the_id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        out.append((json.dumps(msg).encode(), the_id))

    def line(raw: bytes, the_id: object = None) -> None:
        out.append((raw, the_id))

    for path in files.values():  # paths to other files in every path argument
        call("submit_docker", {"spec": str(path), "dry_run": True})
        call("submit_kubernetes", {"spec": str(path), "dry_run": True})
        call("submit_slurm", {"spec": str(path), "dry_run": True})
    for key in ("secrets_file", "config_file", "args_json"):
        for name in ("envfile", "shadow", "dockercfg"):
            call("submit_kubernetes", {"image": "busybox:1", "command": "true", key: str(files[name]), "dry_run": True})
    for name in ("mapping", "shadow", "bare"):
        call("submit_docker", {"image": "busybox:1", "command": ["true"], "sweep_file": str(files[name]),
                               "dry_run": True})
    for bad in (TOKEN, f"A={SECRET}", 5, None, [TOKEN], {"a": 1}, "x" * 5000):  # a value where a name belongs
        call("submit_docker", {"image": "busybox:1", "command": ["true"], "secret_env": [bad], "dry_run": True})
    for target in ("../../etc/shadow", str(files["shadow"]), "\x1b[2J", "\x9b31m" + TOKEN, "a" * 10000, "", 7, None,
                   ["x"], {"$ne": 1}):  # wrong types, ids that are paths or escapes
        call("logs", {"id": target})
        call("status", {"ids": [target]})
    call("continue", {"id": str(files["shadow"])})
    call("fetch", {"id": "x", "to": "/etc", "paths": ["../../../etc/shadow"]})
    call("nope\x1b[2J", {})
    call("status", "not an object")
    call("status", [1, 2, 3])
    for odd_id in ("i" * 129, "\x1b]0;t\x07", 2 ** 80, -1, 0, 1.5, True, {"a": 1}, [1], "é" * 20):
        msg = {"jsonrpc": "2.0", "id": odd_id, "method": "ping"}
        short = (isinstance(odd_id, int) and not isinstance(odd_id, bool) and abs(odd_id) < 2 ** 53) or (
            isinstance(odd_id, str) and len(odd_id) <= 128)
        line(json.dumps(msg).encode(), odd_id if short else None)
    for raw in (b"\xff\xfe\xfd", b'{"jsonrpc":"2.0","id":900,"method":"ping","params":{"x":"\xc3\x28"}}',
                b"\x00" * 100, b'{"jsonrpc":"2.0","id":901,"method":"tools/call","params":{"name":"logs",'
                b'"arguments":{"id":"\xed\xa0\x80"}}}', b"[" * 5000, b'{"a":' * 2000, b"null", b"[]", b"{}",
                b'{"jsonrpc":"2.0","id":902}', b'{"jsonrpc":"2.0","id":903,"method":7}',
                b'{"jsonrpc":"2.0","id":904,"method":"resources/read","params":{"uri":"file:///etc/shadow"}}',
                b'{"jsonrpc":"2.0","id":905,"method":"resources/read","params":{"uri":"tao://jobs/../../etc"}}',
                ("{" + '"jsonrpc":"2.0","id":906,"method":"ping","pad":"' + SECRET * 1000 + '"}').encode()):
        the_id = None
        try:
            got = json.loads(raw.decode("utf-8", "replace"))
            the_id = got.get("id") if isinstance(got, dict) and "method" in got else None
        except (ValueError, RecursionError):
            pass
        line(raw, the_id)
    return out


def test_mcp_requests_are_each_answered_cleanly(tmp_path):
    files = plant(tmp_path / "files")
    corpus = mcp_corpus(files, tmp_path)
    assert len(corpus) >= 100
    env = {**os.environ, "TAO_STATE_DIR": str(tmp_path / "state"), "KUBECONFIG": str(tmp_path / "no-kubeconfig"),
           "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "TAO_ENV_FILE": str(tmp_path / "no.env")}
    raw = Raw(env)
    hung = []
    try:
        for n, (line, the_id) in enumerate(corpus):
            raw.write(line + b"\n")
            ping = 50_000 + n
            raw.write(json.dumps({"jsonrpc": "2.0", "id": ping, "method": "ping"}).encode() + b"\n")
            try:
                raw.wait_for(ping, timeout=60)
                if the_id is not None:
                    raw.wait_for(the_id, timeout=60)
            except AssertionError:
                hung.append(line[:120])
    finally:
        stderr = raw.close()
    assert hung == []
    assert raw.proc.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    wire = b"".join(raw.raw).decode("utf-8", "replace")
    assert SECRET not in wire + stderr and TOKEN not in wire + stderr
    for msg in raw.out:  # what a person reads (the texts), not the ids the client chose itself
        assert _escapes_in(_texts(msg)) == [], msg
    assert max(len(r) for r in raw.raw) < 64 * 1024


def _texts(msg: object) -> str:
    """Every string of an answer but its id, joined."""
    if isinstance(msg, dict):
        return "\n".join(_texts(v) for k, v in msg.items() if k != "id")
    if isinstance(msg, list):
        return "\n".join(_texts(v) for v in msg)
    return msg if isinstance(msg, str) else ""


# ------------------------------------------------------------------ the key page
def page_corpus(token: str, port: int) -> list[tuple[str, bytes]]:
    host = f"Host: 127.0.0.1:{port}\r\n".encode()
    path = f"/{token}".encode()
    form = b"Content-Type: application/x-www-form-urlencoded\r\n"
    out: list[tuple[str, bytes]] = []
    for bad in (b"/", b"/x", path + b"x", path[:-1], path + b"/", path + b"?value=" + SECRET.encode(),
                b"/" + token.upper().encode(), b"/../" + path, b"//" + path, path + b"%00", path + b"\x1b[2J",
                b"http://127.0.0.1" + path, b"*", b"/" + b"a" * 70000):
        out.append(("bad-token", b"GET " + bad + b" HTTP/1.1\r\n" + host + b"\r\n"))
    for method in (b"PUT", b"DELETE", b"OPTIONS", b"TRACE", b"CONNECT", b"PATCH", b"HEAD", b"FOO", b"get",
                   b"P\x1bOST", b"POST POST"):
        out.append(("method", method + b" " + path + b" HTTP/1.1\r\n" + host + b"\r\n"))
    body = ("value=" + SECRET).encode()
    for headers, data in (
            (b"Content-Length: 99999999\r\n", body),  # declared, never sent
            (b"Content-Length: -5\r\n", body), (b"Content-Length: x\r\n", body),
            (b"Content-Length: 70000\r\n", b"value=" + b"a" * 69994),
            (b"Transfer-Encoding: chunked\r\n", b"5\r\nvalue\r\n0\r\n\r\n"),
            (b"Content-Length: 10\r\nContent-Length: 20\r\n", body),
            (b"", body),  # no length
            (b"Content-Length: " + str(len(body) + 5).encode() + b"\r\n", body),  # 5 bytes short, then silence
            (b"Content-Length: 30\r\n", b"valu=" + TOKEN.encode()),
            (b"X-Long: " + b"h" * 70000 + b"\r\n", body),
            (b"".join(b"X-%d: 1\r\n" % i for i in range(200)), body)):
        out.append(("body", b"POST " + path + b" HTTP/1.1\r\n" + host + form + headers + b"\r\n" + data))
    for host_line in (b"Host: evil.example\r\n", b"Host: 127.0.0.1:1\r\n", b"", b"Host: \x1b[2J\r\n"):
        out.append(("host", b"POST " + path + b" HTTP/1.1\r\n" + host_line + form + b"Content-Length: " +
                    str(len(body)).encode() + b"\r\n\r\n" + body))
    for garbage in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"\xff" * 100, b"GET\r\n\r\n",
                    b"GET " + path + b"\r\n", b"\r\n\r\n\r\n", b"GET " + path + b" HTTP/9.9\r\n\r\n",
                    b"GET " + path + b" HTTP/1.1\r\n" + b"\x00" * 50 + b"\r\n\r\n"):
        out.append(("garbage", garbage))
    return out


def _exchange(port: int, data: bytes, timeout: float = 10) -> tuple[bytes, float]:
    """Send ``data``, read until the page closes; (what came back, seconds taken). A page that keeps the
    connection open longer than ``timeout`` raises (a hang)."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
        except OSError:  # the page cut it while it was still sending (too big): an answer
            pass
        got = b""
        while True:
            try:
                piece = sock.recv(65536)
            except ConnectionResetError:
                break
            if not piece:
                break
            got += piece
    return got, time.monotonic() - start


def test_key_page_requests_never_hold_it_or_show_a_secret(monkeypatch, capfd, tmp_path):
    monkeypatch.setattr(keypage, "DEADLINE", 1.5)
    stored: list[str] = []
    page = KeyPage("TAO_UNIT_KEY", stored.append)
    corpus = page_corpus(page.token, page.port)
    assert len(corpus) >= 45
    slow = [socket.create_connection(("127.0.0.1", page.port), timeout=5) for _ in range(4)]
    try:
        for sock in slow:  # slowloris: connected, a first byte, then nothing
            sock.sendall(b"P")
        answers = []
        for kind, data in corpus:
            got, took = _exchange(page.port, data)
            assert took < keypage.DEADLINE + 3.5, (kind, data[:80], took)  # the deadline, and a loaded machine
            answers.append(got)
        assert stored == []  # none of them was the form sent right
        status, _ = _post(page.url, SECRET)
        assert status == 200 and stored == [SECRET]
    finally:
        for sock in slow:
            sock.close()
        start = time.monotonic()
        page.close()
        assert time.monotonic() - start < 2
    said = b"".join(answers).decode("utf-8", "replace")
    out, err = capfd.readouterr()
    assert SECRET not in said + out + err and TOKEN not in said + out + err
    assert "Traceback" not in out + err and err == ""
    assert "\x1b" not in said


def _post(url: str, value: str) -> tuple[int, str]:
    import urllib.error
    import urllib.parse
    import urllib.request

    req = urllib.request.Request(url, data=urllib.parse.urlencode({"value": value}).encode(), method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# ------------------------------------------------------------------ pasted keys
LINE_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
PASTED = [f"nvapi-{SECRET}{c}HF_TOKEN=attacker" for c in LINE_BREAKS + ESCAPES + ["\u200b", "\u202e", "\ufeff", "'"]]


@pytest.mark.parametrize("value", PASTED, ids=lambda v: f"U+{ord(v[len('nvapi-') + len(SECRET)]):04X}")
def test_a_pasted_key_is_refused_unseen_on_the_page(value, tmp_path, monkeypatch, capfd):
    creds = tmp_path / ".env"
    monkeypatch.setenv("TAO_ENV_FILE", str(creds))
    monkeypatch.delenv("TAO_UNIT_KEY", raising=False)
    page = KeyPage("TAO_UNIT_KEY", lambda v: credentials.store("TAO_UNIT_KEY", v), str(creds))
    try:
        status, html = _post(page.url, value)
    finally:
        page.close()
    assert status == 400 and "nothing was stored" in html and not page.done.is_set()
    with pytest.raises(TaoError) as got:
        credentials.store("TAO_UNIT_KEY", value)
    out, err = capfd.readouterr()
    for text in (html, str(got.value), out, err):
        assert SECRET not in text and "attacker" not in text and _escapes_in(text) == []
    assert not creds.exists() and "HF_TOKEN" not in os.environ and "TAO_UNIT_KEY" not in os.environ


# ------------------------------------------------------------------ cluster text through preflight
CLUSTER = [
    "\x1b[2J", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "\x1b]0;title\x1b\\", "\x1b]8;;http://evil.example\x1b\\x",
    "\x1b]52;c;" + "QUJD" + "\x07", "\x9b2J", "\x9d0;t\x9c", "\x90qpayload\x9c", "\x1bP+q\x1b\\", "\x1b[6n",
    "\x1b[?1049h", "\x1bc", "\x07\x07", "\x08\x08\x08OK", "a\rOK: forged", "\x1b[1A\x1b[2KOK: forged", "\x85NEL",
    "\u2028OK", "\x7fdel", "\x00nul",
]


@pytest.mark.parametrize("evil", CLUSTER, ids=lambda e: repr(e)[1:12])
def test_cluster_text_with_escapes_reaches_no_terminal(evil, fake, cli):
    fake.kubectl("version", answer={"clientVersion": {"gitVersion": "v1.34.1"},
                                    "serverVersion": {"gitVersion": "v1.34.4" + evil}})
    fake.kubectl("get", "namespace", answer="namespace/default\n")
    fake.kubectl("auth", "can-i", answer="yes\n")
    taint = [{"key": "k" + evil, "value": "v" + evil, "effect": "NoSchedule" + evil}]
    fake.kubectl("get", "nodes", answer=items([node("a" + evil), node("b" + evil, cordoned=True, taints=taint)]))
    lq = {"metadata": {"name": "default"}, "spec": {"clusterQueue": "cq" + evil}}
    fake.kubectl("get", "localqueues.kueue.x-k8s.io", answer=items([lq]))
    fake.kubectl("get", "clusterqueues.kueue.x-k8s.io", rc=1,
                 stderr=f"Error from server (InternalError): admission webhook \"w.example\" denied: {evil}\n")
    fake.kubectl("get", "pvc", "ws", answer={"status": {"phase": "Pending" + evil}})
    fake.kubectl("get", "pvc", "other", rc=1, stderr=f"Error from server: {evil}\n")
    text = cli("tao_k8s.py", "preflight", "--pvc", "ws")
    failed = cli("tao_k8s.py", "preflight", "--pvc", "ws", "--pvc", "other")
    as_json = cli("tao_k8s.py", "preflight", "--pvc", "ws", "--json")
    fake.kubectl("get", "localqueues.kueue.x-k8s.io", rc=1, stderr=f"Error from server (Forbidden?): {evil}\n")
    queues = cli("tao_k8s.py", "preflight")
    for said in (text, failed, as_json, queues):
        shown = said.out + said.err
        assert "Traceback" not in shown and _escapes_in(shown) == [], shown
        assert "OK: forged" not in shown.splitlines()
    assert NO_KUEUE  # the fake's own no-Kueue answer is a separate test's


def test_the_corpus_is_at_least_150_inputs(tmp_path):
    files = plant(tmp_path / "files")
    total = len(mcp_corpus(files, tmp_path)) + len(page_corpus("t", 1)) + len(PASTED) + len(CLUSTER)
    assert total >= 150, total
