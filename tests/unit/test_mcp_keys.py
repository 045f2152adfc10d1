"""Keys a submit needs, through the MCP server: found in the environment or the credentials file, else asked
of the user on a one-time 127.0.0.1 page (URL elicitation), else one line naming the file. The key never
shows in a tool result, an MCP message, the server's stderr or an error line."""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from taobank import envfile
from taobank.errors import TaoError
from taobank.mcp import credentials
from taobank.mcp.keypage import KeyPage
from tests.support.mcp_client import Session

BANK = Path(__file__).resolve().parents[2]
KEY = "k3y-Zq9xv-unit-8d1f7c2b44"
NAME = "TAO_UNIT_KEY"
URL_CLIENT = {"elicitation": {"url": {}}}


@pytest.fixture()
def creds(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cfg" / ".env"
    monkeypatch.setenv("TAO_ENV_FILE", str(path))
    monkeypatch.delenv(NAME, raising=False)
    return path


def _post(url: str, value: str, host: str | None = None, kind: str = "application/x-www-form-urlencoded",
          timeout: float = 10) -> int:
    req = urllib.request.Request(url, data=urllib.parse.urlencode({"value": value}).encode(), method="POST",
                                 headers={"Content-Type": kind, **({"Host": host} if host else {})})
    try:
        return urllib.request.urlopen(req, timeout=timeout).status
    except urllib.error.HTTPError as exc:
        return exc.code


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# ------------------------------------------------------------------ the credentials file
def test_the_file_is_the_one_tao_setup_documents(monkeypatch):
    monkeypatch.delenv("TAO_ENV_FILE", raising=False)
    assert credentials.env_file() == Path.home() / ".config/tao/.env"
    setup = (BANK / "skills/tao-setup/SKILL.md").read_text()
    assert 'TAO_ENV_FILE="${TAO_ENV_FILE:-$HOME/.config/tao/.env}"' in setup  # the shell's loader, same file


def test_needed_names_come_from_the_call_only(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("image: busybox\nsecrets: [HF_TOKEN, AWS_SECRET_ACCESS_KEY]\n")
    assert credentials.needed("submit_docker", {"secret_env": ["WANDB_API_KEY"], "spec": str(spec)}) == [
        "WANDB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY"]
    assert credentials.needed("submit_kubernetes", {"ngc_pull_secret": True}) == ["NGC_KEY"]
    assert credentials.needed("status", {"secret_env": ["X"]}) == []
    assert credentials.needed("submit_slurm", {"secret_env": "X", "spec": str(tmp_path / "none.yaml")}) == []
    # a value pasted in place of a name is left to the helper, which refuses it unseen
    assert credentials.needed("submit_docker", {"secret_env": ["nvapi-" + "A1b2C3d4" * 8, "A=B", 5]}) == []


def test_continue_needs_what_its_job_was_submitted_with(state_dir, creds, tmp_path):
    from taobank.core import jobfiles
    from taobank import records

    rec = records.open_record("docker", "img", "dino", "train", "A", "/l/results/{id}")
    jobfiles.save_spec(rec["id"], {"action": "train", "secrets": ["HF_TOKEN"]},
                   {"secret_env": ("WANDB_API_KEY",), "ngc_pull_secret": True})
    assert credentials.needed("continue", {"id": rec["id"]}) == ["WANDB_API_KEY", "HF_TOKEN", "NGC_KEY"]
    for other in ("no-such-job", "../../etc", 7, None):  # the helper says what is wrong with these
        assert credentials.needed("continue", {"id": other}) == []
    env = {k: v for k, v in _env(tmp_path, creds).items() if k not in ("WANDB_API_KEY", "HF_TOKEN")}
    with Session(env) as s:
        done = s.call("continue", id=rec["id"])
    # its own checks first: a job still PENDING is refused before any of the three keys is asked or named
    assert done["isError"] is True and done["content"][0]["text"].startswith(
        f"error: job {rec['id']} is PENDING: cancel it first"), done
    assert "before any key was asked; nothing was done" in done["content"][0]["text"]


def test_a_stored_key_is_one_private_line_both_readers_read_back(creds):
    creds.parent.mkdir(mode=0o755)
    creds.write_text("# mine\nexport HF_TOKEN='hf'\nTAO_UNIT_KEY=old\n")
    creds.chmod(0o600)
    try:
        assert credentials.store(NAME, f"  {KEY}\n") == creds
        assert os.environ[NAME] == KEY
    finally:
        os.environ.pop(NAME, None)
    assert creds.read_text() == f"# mine\nexport HF_TOKEN='hf'\n{NAME}='{KEY}'\n"
    assert creds.stat().st_mode & 0o777 == 0o600
    assert envfile.read(creds, private=True) == {"HF_TOKEN": "hf", NAME: KEY}
    shell = subprocess.run(["sh", "-c", f'set -a; . "$0"; printf %s "${NAME}"', str(creds)], capture_output=True,
                           text=True, env={"PATH": os.environ["PATH"]})
    assert shell.stdout == KEY


def test_a_new_file_is_made_private_in_a_private_folder(creds):
    try:
        credentials.store(NAME, KEY)
    finally:
        os.environ.pop(NAME, None)
    assert (creds.stat().st_mode & 0o777, creds.parent.stat().st_mode & 0o777) == (0o600, 0o700)


@pytest.mark.parametrize("value,says", [
    ("", "no key was given"), ("ab'cd", "holds a quote, a line break"), ("ab\ncd", "holds a quote, a line break"),
    ("x" * 20000, "longer than"),
])
def test_a_key_the_file_cannot_hold_is_refused_unseen(creds, value, says):
    with pytest.raises(TaoError, match=says) as got:
        credentials.store(NAME, value)
    assert value.strip() == "" or value not in str(got.value)
    assert not creds.exists() and NAME not in os.environ


def test_load_takes_missing_names_from_a_private_file_only(creds, monkeypatch):
    assert credentials.load([NAME]) == [NAME]  # no file: still missing
    creds.parent.mkdir()
    creds.write_text(f"{NAME}={KEY}\nOTHER=1\n")
    creds.chmod(0o644)
    with pytest.raises(TaoError, match=r"readable by others .*chmod 600") as got:
        credentials.load([NAME])
    assert KEY not in str(got.value)
    creds.chmod(0o600)
    monkeypatch.setenv("OTHER", "mine")  # the environment wins over the file
    try:
        assert credentials.load([NAME, "OTHER", "ABSENT"]) == ["ABSENT"]
        assert (os.environ[NAME], os.environ["OTHER"]) == (KEY, "mine")
    finally:
        os.environ.pop(NAME, None)


# ------------------------------------------------------------------ the page
def test_the_page_takes_one_key_by_post_from_this_host_only(tmp_path):
    got: list[str] = []
    page = KeyPage(NAME, got.append, "/x/.env")
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{40,}", page.url)
        code, form = _get(page.url)
        assert code == 200 and 'method=post' in form and 'type=password' in form and "/x/.env" in form
        base = page.url.rsplit("/", 1)[0]
        assert _get(f"{base}/wrong-token")[0] == 404
        assert _get(f"{page.url}?value={KEY}")[0] == 404  # never a value in a URL
        assert _post(f"{page.url}?x=1", KEY) == 404
        assert _post(page.url, KEY, host="evil.example:80") == 404  # DNS rebinding
        assert _post(page.url, KEY, kind="text/plain") == 400
        assert got == [] and not page.done.is_set()
        assert _post(page.url, KEY) == 200
        assert got == [KEY] and page.done.is_set()
        assert _post(page.url, "again") == 410 and _get(page.url)[0] == 410 and got == [KEY]
    finally:
        page.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(page.url, timeout=5)


def test_a_refused_key_keeps_the_page_open_for_another_try():
    def accept(value: str) -> None:
        if value == "bad":
            raise TaoError("the key holds a quote or a line break: nothing was stored")

    page = KeyPage(NAME, accept)
    try:
        assert _post(page.url, "bad") == 400 and not page.done.is_set()
        assert _post(page.url, KEY) == 200 and page.done.is_set()
    finally:
        page.close()


class _Trickler:
    """A local client without the token holding a connection to the page: one byte every ``every`` seconds."""

    def __init__(self, url: str, every: float = 0.5) -> None:
        import socket
        import threading

        port = int(url.split(":")[2].split("/")[0])
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.cut = threading.Event()
        self.every = every
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        for byte in b"GET /not-the-token HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000:
            try:
                self.sock.sendall(bytes([byte]))
            except OSError:
                break
            if self.cut.wait(self.every):
                break
        self.cut.set()

    def close(self) -> None:
        self.cut.set()
        self.sock.close()


def test_a_connection_that_trickles_bytes_holds_neither_the_page_nor_its_close():
    got: list[str] = []
    page = KeyPage(NAME, got.append)
    slow = [_Trickler(page.url) for _ in range(3)]
    try:
        time.sleep(1)  # they are in, each sending a byte every half second
        start = time.monotonic()
        assert _post(page.url, KEY, timeout=5) == 200 and got == [KEY]
        assert time.monotonic() - start < 5  # not the trickle's pace: held, it would wait minutes
        start = time.monotonic()
        page.close()  # with the slow ones still connected
        assert time.monotonic() - start < 2
        for s in slow:
            s.thread.join(5)
            assert s.cut.is_set()
    finally:
        for s in slow:
            s.close()
        page.close()


def test_a_trickling_connection_is_cut_at_the_deadline(monkeypatch):
    from taobank.mcp import keypage

    monkeypatch.setattr(keypage, "DEADLINE", 1.0)
    page = KeyPage(NAME, lambda value: None)
    slow = _Trickler(page.url, every=0.2)
    try:
        start = time.monotonic()
        slow.thread.join(10)  # its send fails once the page cut it
        assert slow.cut.is_set() and time.monotonic() - start < 4
        assert _get(page.url)[0] == 200
    finally:
        slow.close()
        page.close()


def test_connections_over_the_bound_are_closed_unanswered(monkeypatch):
    import socket

    from taobank.mcp import keypage

    monkeypatch.setattr(keypage, "MAX_CONNECTIONS", 2)
    page = KeyPage(NAME, lambda value: None)
    port = page.port
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
    try:
        time.sleep(0.5)
        extra = socket.create_connection(("127.0.0.1", port), timeout=5)
        extra.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert extra.recv(100) == b""  # closed, no answer
        extra.close()
        for sock in held:
            sock.close()
        time.sleep(0.5)
        assert _get(page.url)[0] == 200
    finally:
        page.close()


# ------------------------------------------------------------------ through the server
#: A docker CLI whose engine passes the submit's read-only checks (info, the image is here) and refuses to make a
#: container: the key is asked once the checks pass, and what stops the real submit then is this refusal.
ENGINE_STUB = """#!/bin/sh
case "$1" in
  info) echo '{"ServerVersion": "20.10.24", "SecurityOptions": []}' ;;
  image) echo sha256:1 ;;
  *) echo "stub engine: $1 refused" >&2; exit 1 ;;
esac
"""


def _env(tmp_path: Path, creds: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (NAME, "NGC_KEY")}
    stub = tmp_path / "stub-bin"
    stub.mkdir(exist_ok=True)
    (stub / "docker").write_text(ENGINE_STUB)
    (stub / "docker").chmod(0o755)
    (tmp_path / "results").mkdir(exist_ok=True)
    return {**env, "TAO_STATE_DIR": str(tmp_path / "state"), "TAO_ENV_FILE": str(creds),
            "PATH": f"{stub}:{env.get('PATH', '')}", "TAO_DOCKER_RESULTS_DIR": str(tmp_path / "results"),
            "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", **more}


SUBMIT = {"image": "busybox:1", "gpus_per_node": 0, "secret_env": [NAME], "command": ["true"]}


@pytest.mark.parametrize("caps", [{}, {"elicitation": {}}])
def test_a_client_that_cannot_open_a_page_gets_the_line_naming_the_file(tmp_path, creds, caps):
    with Session(_env(tmp_path, creds), capabilities=caps, protocol="2025-11-25") as s:
        done = s.call("submit_docker", **SUBMIT)
    assert done["isError"] is True
    assert done["content"][0]["text"] == (
        f"error: submit_docker needs {NAME}, set neither in the MCP server's environment nor in {creds}: add the "
        f"line {NAME}=<value> to that file (mode 600; the tao-setup skill) and call again; a key never goes into "
        "a tool call; nothing was done")
    assert not [n for n in s.notifications if n.get("method") == "elicitation/create"] and not creds.exists()


def test_a_key_in_the_file_reaches_the_helper_unasked(tmp_path, creds):
    creds.parent.mkdir()
    creds.write_text(f"NGC_KEY={KEY}\n")
    creds.chmod(0o600)
    with Session(_env(tmp_path, creds), capabilities=URL_CLIENT, protocol="2025-11-25") as s:
        done = s.call("submit_kubernetes", image="nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt", ngc_pull_secret=True,
                      dry_run=True, no_results=True, command="python -c 1")
        stderr = s.close()
    assert done["isError"] is False, done  # without the key: "--ngc-pull-secret needs NGC_KEY in the environment"
    assert not [n for n in s.notifications if n.get("method") == "elicitation/create"]
    assert KEY not in "\n".join(s.traffic) + stderr


def test_the_user_gives_the_key_on_the_page_and_the_submit_goes_on(tmp_path, creds):
    with Session(_env(tmp_path, creds), capabilities=URL_CLIENT, protocol="2025-11-25") as s:
        rid = s.start("tools/call", {"name": "submit_docker", "arguments": SUBMIT})
        ask = s.notification("elicitation/create", timeout=60)
        assert ask["params"]["mode"] == "url" and NAME in ask["params"]["message"]
        assert _post(ask["params"]["url"], KEY) == 200
        s.reply(ask, {"action": "accept"})
        done = s.answer(rid)["result"]
        complete = s.notification("notifications/elicitation/complete", timeout=30)
        stderr = s.close()
    assert complete["params"]["elicitationId"] == ask["params"]["elicitationId"]
    # the helper ran with the key: what stops it now is the engine refusing the container, not the key
    assert done["isError"] is True and "stub engine: " in done["content"][0]["text"], done
    assert envfile.read(creds, private=True) == {NAME: KEY}
    assert KEY not in "\n".join(s.traffic) + stderr + json.dumps(done)


@pytest.mark.parametrize("caps", [URL_CLIENT, {}])
def test_the_submits_checks_run_before_a_key_is_asked(tmp_path, creds, caps):
    """Issue 49: a submit the host would refuse (4 GPUs on a host without) is refused before its key is asked:
    no page, no key pasted for nothing; the helper's own line says why."""
    with Session(_env(tmp_path, creds), capabilities=caps, protocol="2025-11-25") as s:
        done = s.call("submit_docker", **{**SUBMIT, "gpus_per_node": 4})
    assert done["isError"] is True, done
    text = done["content"][0]["text"]
    assert "asks for GPUs (4)" in text and "before any key was asked; nothing was done" in text, text
    assert not [n for n in s.notifications if n.get("method") == "elicitation/create"] and not creds.exists()
    assert not (tmp_path / "state").is_dir() or not list((tmp_path / "state").glob("*.json"))  # no record


@pytest.mark.parametrize("answer,post,says", [
    ({"action": "decline"}, False, f"error: {NAME} was not given (decline): nothing was done; or add {NAME}=<value> "),
    ({"action": "accept"}, False, f"error: {NAME} was not sent on the page within 1 s: nothing was done; "),
])
def test_a_key_not_given_stops_the_submit(tmp_path, creds, answer, post, says):
    with Session(_env(tmp_path, creds, TAO_MCP_KEY_SECONDS="1"), capabilities=URL_CLIENT,
                 protocol="2025-11-25") as s:
        rid = s.start("tools/call", {"name": "submit_docker", "arguments": SUBMIT})
        ask = s.notification("elicitation/create", timeout=60)
        s.reply(ask, answer)
        done = s.answer(rid)["result"]
    assert done["isError"] is True and done["content"][0]["text"].startswith(says), done
    assert not creds.exists()
    with pytest.raises(urllib.error.URLError):  # the page is gone with the call
        urllib.request.urlopen(ask["params"]["url"], timeout=5)


def test_a_cancelled_call_closes_its_page(tmp_path, creds):
    with Session(_env(tmp_path, creds), capabilities=URL_CLIENT, protocol="2025-11-25") as s:
        rid = s.start("tools/call", {"name": "submit_docker", "arguments": SUBMIT})
        ask = s.notification("elicitation/create", timeout=60)
        s.reply(ask, {"action": "accept"})
        assert _get(ask["params"]["url"])[0] == 200  # the user has not sent it yet
        s.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}))
        assert s.request("ping", timeout=30)["result"] == {}
        end = time.time() + 20
        while True:
            try:
                urllib.request.urlopen(ask["params"]["url"], timeout=5)
            except OSError:  # refused (or reset while it closes)
                break
            assert time.time() < end, "the page outlived its cancelled call"
            time.sleep(0.2)
    assert not creds.exists() and rid not in s.answers


def test_a_cancelled_call_closes_its_page_while_a_connection_trickles(tmp_path, creds):
    import socket

    with Session(_env(tmp_path, creds), capabilities=URL_CLIENT, protocol="2025-11-25") as s:
        rid = s.start("tools/call", {"name": "submit_docker", "arguments": SUBMIT})
        ask = s.notification("elicitation/create", timeout=60)
        s.reply(ask, {"action": "accept"})
        slow = _Trickler(ask["params"]["url"])
        try:
            time.sleep(1)
            s.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}))
            assert s.request("ping", timeout=30)["result"] == {}
            port = int(ask["params"]["url"].split(":")[2].split("/")[0])
            end = time.time() + 3
            while True:  # the listening socket itself is gone: a connection is refused, not left unanswered
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                except ConnectionRefusedError:
                    break
                except ConnectionResetError:  # caught in the backlog of a listener closing just then: look again
                    pass
                assert time.time() < end, "the page's close waited on the trickling client"
                time.sleep(0.1)
            slow.thread.join(5)
            assert slow.cut.is_set()
        finally:
            slow.close()
    assert not creds.exists()


def test_a_client_of_pages_only_is_not_sent_a_form(tmp_path, creds):
    """Form elicitation (prune's yes/no) goes only to a client that takes forms: ``{"url": {}}`` alone does not."""
    with Session(_env(tmp_path, creds), capabilities=URL_CLIENT, protocol="2025-11-25") as s:
        done = s.call("prune", ids=["gone-aaaaaaaa"])
    assert done["isError"] is True  # the helper's own lines: what it would delete (here: no such job), nothing asked
    assert done["content"][0]["text"].startswith("error: gone-aaaaaaaa: no job record gone-aaaaaaaa")
    assert not [n for n in s.notifications if n.get("method") == "elicitation/create"]


def test_a_file_that_cannot_be_written_is_one_line_on_the_page(tmp_path, monkeypatch):
    blocked = tmp_path / "ro"
    blocked.mkdir(mode=0o500)
    monkeypatch.setenv("TAO_ENV_FILE", str(blocked / "sub" / ".env"))
    if os.access(blocked, os.W_OK):  # root writes anywhere: a file where the folder should be instead
        (blocked / "sub").write_text("")
    with pytest.raises(TaoError, match=r"^cannot write the credentials file .*nothing was stored$") as got:
        credentials.store(NAME, KEY)
    assert KEY not in str(got.value) and NAME not in os.environ
