"""The MCP tools on the real Docker engine: submit -> status -> logs -> metrics -> fetch through
scripts/tao_mcp.py, each answer the one tao_jobs.py gives on the same records. The job runs the stand-in
trainer testclusters/fake_tao_train.sh (bind-mounted read-only), which writes TAO's status.json and a
checkpoint per epoch."""
from __future__ import annotations

import hashlib
import json
import secrets
import time
import urllib.parse
import urllib.request

import pytest

from docker_support import BANK, Docker
from tests.support.mcp_client import Session, round_trip

pytestmark = pytest.mark.e2e

EPOCHS = 3
TRAIN = 'exec sh /fake/fake_tao_train.sh --results "$RESULTS_DIR" --epochs "$EPOCHS" --sleep 1'


def test_round_trip_through_the_mcp_tools(docker_cluster, tmp_path):
    dk = Docker(docker_cluster, tmp_path)
    with Session(dk.env, capabilities={"elicitation": {}}) as mcp:
        said = round_trip(mcp, "submit_docker", {
            "image": dk.image, "gpus_per_node": 0, "network_arch": "dino", "action": "train", "name": "mcp round trip",
            "mount": [f"{BANK / 'testclusters'}:/fake"], "env": {"EPOCHS": str(EPOCHS)}, "stop_grace": 2,
            "command": ["sh", "-c", TRAIN]}, tmp_path, dk.env, EPOCHS)
        jid = said["job"]["id"]
        assert said["job"]["platform"] == "docker" and said["view"]["description"] == "mcp round trip"
        assert dk.records() == [f"{jid}.json"]  # one record, the one the CLI reads
        assert said["logs"]["sections"]["stdout"].splitlines()[-1] == "Epoch 2: train_loss=0.25 val_loss=0.42"
        assert said["metrics"]["rows"][-1]["train_loss"] == 0.25
        assert (dk.results / jid / "train" / "status.json").is_file()
        # prune: the user is asked through the client, then the folder goes
        rid = mcp.start("tools/call", {"name": "prune", "arguments": {"ids": [jid]}})
        ask = mcp.notification("elicitation/create", timeout=60)
        assert jid in ask["params"]["message"] and (dk.results / jid).exists()
        mcp.reply(ask, {"action": "accept", "content": {"confirm": True}})
        done = mcp.answer(rid)["result"]
        assert done["isError"] is False and done["structuredContent"]["result"][0]["removed"] is True, done
        assert not (dk.results / jid).exists()


def test_watch_sends_progress_and_a_cancelled_call_stops_the_watch_not_the_job(docker_cluster, tmp_path):
    dk = Docker(docker_cluster, tmp_path)
    with Session(dk.env) as mcp:
        jid = mcp.ok("submit_docker", image=dk.image, gpus_per_node=0, stop_grace=1,
                     command=["sh", "-c", "sleep 120"])["id"]
        rid = mcp.start("tools/call", {"name": "status", "arguments": {"ids": [jid], "watch": True, "interval": 0.5},
                                       "_meta": {"progressToken": "watch-1"}})
        note = mcp.notification("notifications/progress", timeout=60)["params"]
        assert note["progressToken"] == "watch-1" and note["message"].startswith(jid), note
        assert len(mcp.request("tools/list", timeout=30)["result"]["tools"]) == 19  # served during the watch
        assert mcp.request("ping", timeout=30)["result"] == {}
        mcp.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": rid, "reason": "the user stopped waiting"}}))
        started = time.monotonic()
        (view,) = mcp.ok("status", ids=[jid])  # answered once the watch has let go of the helper
        assert time.monotonic() - started < 30
        assert view["state"] == "RUNNING"  # the watch stopped, the job did not
        (gone,) = mcp.ok("cancel", ids=[jid])
        assert gone["state"] == "CANCELED"
        assert rid not in mcp.answers  # a cancelled request is not answered


def test_a_subscribed_job_tells_the_client_when_it_ends(docker_cluster, tmp_path):
    dk = Docker(docker_cluster, tmp_path)
    with Session({**dk.env, "TAO_MCP_POLL_SECONDS": "1"}) as mcp:
        jid = mcp.ok("submit_docker", image=dk.image, gpus_per_node=0, command=["sh", "-c", "sleep 8; echo done"])["id"]
        listed = mcp.request("resources/list")["result"]["resources"]
        assert [r["uri"] for r in listed] == [f"tao://jobs/{jid}"]
        assert "result" in mcp.request("resources/subscribe", {"uri": f"tao://jobs/{jid}"})
        assert "result" in mcp.request("resources/subscribe", {"uri": f"tao://jobs/{jid}/logs"})
        updated: set[str] = set()
        state = ""
        while state != "COMPLETE" or len(updated) < 2:  # each change, to each URI (RUNNING if it was starting)
            updated.add(mcp.notification("notifications/resources/updated", timeout=90)["params"]["uri"])
            (view,) = mcp.request("resources/read", {"uri": f"tao://jobs/{jid}"})["result"]["contents"]
            state = json.loads(view["text"])["state"]
            assert state in ("RUNNING", "COMPLETE"), view
        assert updated == {f"tao://jobs/{jid}", f"tao://jobs/{jid}/logs"}
        (logs,) = mcp.request("resources/read", {"uri": f"tao://jobs/{jid}/logs"})["result"]["contents"]
        assert json.loads(logs["text"]) == mcp.ok("logs", id=jid)
        assert "done" in json.loads(logs["text"])["sections"]["stdout"]


def test_a_key_asked_of_the_user_reaches_the_job_and_nothing_else(docker_cluster, tmp_path):
    """A submit needs a key the environment lacks: the server asks the user through the client (URL
    elicitation), the user POSTs it on the one-time page, the job on the real engine sees it (it prints its
    sha256), and no record, log, result file, tool result, engine argv or MCP message holds it."""
    dk = Docker(docker_cluster, tmp_path)
    name, key = f"TAO_E2E_KEY_{secrets.token_hex(4).upper()}", f"k3y-{secrets.token_urlsafe(24)}"
    creds = tmp_path / "cfg" / ".env"
    env = {**{k: v for k, v in dk.env.items() if k != name}, "TAO_ENV_FILE": str(creds)}
    with Session(env, capabilities={"elicitation": {"url": {}}}, protocol="2025-11-25") as mcp:
        rid = mcp.start("tools/call", {"name": "submit_docker", "arguments": {
            "image": dk.image, "gpus_per_node": 0, "secret_env": [name],
            "command": ["sh", "-c", f'printf %s "${name}" | sha256sum']}})
        request = mcp.notification("elicitation/create", timeout=60)
        ask = request["params"]
        assert ask["mode"] == "url" and ask["url"].startswith("http://127.0.0.1:") and name in ask["message"]
        form = urllib.request.urlopen(ask["url"], timeout=10).read().decode()
        assert 'method=post' in form and 'type=password' in form
        posted = urllib.request.urlopen(urllib.request.Request(
            ask["url"], data=urllib.parse.urlencode({"value": key}).encode(), method="POST"), timeout=10)
        assert posted.status == 200
        mcp.reply(request, {"action": "accept"})
        done = mcp.answer(rid)["result"]
        assert done["isError"] is False, done
        jid = done["structuredContent"]["result"]["id"]
        complete = mcp.notification("notifications/elicitation/complete", timeout=30)["params"]
        assert complete["elicitationId"] == ask["elicitationId"]
        with pytest.raises(OSError):  # the page answered once and is gone (refused, or 410 while it closes)
            urllib.request.urlopen(ask["url"], timeout=5)
        end = time.time() + 120
        while (view := mcp.ok("status", ids=[jid])[0])["state"] not in ("COMPLETE", "ERROR", "CANCELED"):
            assert time.time() < end, view
            time.sleep(1)
        assert view["state"] == "COMPLETE", view
        logs = mcp.ok("logs", id=jid)
        assert hashlib.sha256(key.encode()).hexdigest() in logs["sections"]["stdout"]
        preview = mcp.call("submit_docker", image=dk.image, gpus_per_node=0, secret_env=[name], dry_run=True,
                           command=["true"])
        assert preview["isError"] is False and name in json.dumps(preview)
        stderr = mcp.close()
    assert oct(creds.stat().st_mode & 0o777) == "0o600" and creds.read_text() == f"{name}='{key}'\n"
    seen = {"MCP traffic": "\n".join(mcp.traffic), "server stderr": stderr}
    for path in tmp_path.rglob("*"):
        if path.is_file() and path != creds:
            seen[str(path)] = path.read_bytes().decode("utf-8", "replace")
    assert str(dk.call_log) in seen and any(p.endswith(f"{jid}.json") for p in seen)  # records and engine argv
    assert [where for where, text in seen.items() if key in text] == []


def test_a_key_is_asked_only_after_the_submits_checks_pass(docker_cluster, tmp_path):
    """Issue 49: submit_docker with ngc_pull_secret and no NGC_KEY anywhere, asking for GPUs this engine's host
    lacks: the submit's read-only checks run first and refuse it; the user is never sent to the key page."""
    env = {k: v for k, v in Docker(docker_cluster, tmp_path).env.items() if k != "NGC_KEY"}
    env["TAO_ENV_FILE"] = str(tmp_path / "no-such" / ".env")
    with Session(env, capabilities={"elicitation": {"url": {}}}, protocol="2025-11-25") as mcp:
        done = mcp.call("submit_docker", image=env["TAO_LOCAL_DOCKER_IMAGE"], gpus_per_node=2, ngc_pull_secret=True,
                        command=["true"])
    assert done["isError"] is True, done
    text = done["content"][0]["text"]
    assert "GPUs (2)" in text and "before any key was asked; nothing was done" in text, text
    assert not [n for n in mcp.notifications if n.get("method") == "elicitation/create"]
    assert not (tmp_path / "state").is_dir() or not list((tmp_path / "state").glob("*.json"))
