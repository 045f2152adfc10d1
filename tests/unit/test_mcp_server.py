"""The MCP server over stdio (scripts/tao_mcp.py), spoken to as a client does: raw JSON-RPC lines.

It answers tools/list with schemas and hints, turns a failed helper into ``isError`` with the helper's
line, and outlives a thousand malformed messages in a row."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.mcp_client import Session


@pytest.fixture()
def session(state_dir):
    env = {**os.environ, "TAO_STATE_DIR": str(state_dir)}
    s = Session(env)
    yield s
    s.close()


def _check(schema: dict, value: object) -> None:
    """The few JSON Schema words the output schemas use."""
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool}
    if kind:
        assert isinstance(value, types[kind]), (schema, value)
    for key in schema.get("required", []):
        assert key in value  # type: ignore[operator]
    for key, sub in schema.get("properties", {}).items():
        if isinstance(value, dict) and key in value and value[key] is not None:
            _check(sub, value[key])


def test_tools_list_and_a_call_answer_as_declared(session):
    listed = session.request("tools/list")["result"]["tools"]
    by = {t["name"]: t for t in listed}
    assert len(by) == 19 and by["prune"]["annotations"]["destructiveHint"] is True
    assert by["submit_slurm"]["inputSchema"]["properties"]["time_hours"]["type"] == "number"
    done = session.request("tools/call", {"name": "list", "arguments": {}})["result"]
    assert done["isError"] is False and done["structuredContent"] == {"result": [], "notes": [], "exit_code": 0}
    _check(by["list"]["outputSchema"], done["structuredContent"])
    preview = session.request("tools/call", {"name": "submit_slurm", "arguments": {
        "image": "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt", "dry_run": True, "time_minutes": 5,
        "command": ["python", "-c", "print(1)"]}})["result"]
    assert preview["isError"] is False, preview
    _check(by["submit_slurm"]["outputSchema"], preview["structuredContent"])
    assert "#SBATCH --time=5\n" in preview["structuredContent"]["result"]["script"]


def test_a_failed_helper_is_an_error_result_with_its_line(session, state_dir):
    done = session.request("tools/call", {"name": "logs", "arguments": {"id": "no-such-job"}})["result"]
    assert done["isError"] is True
    assert done["content"] == [{"type": "text", "text": f"error: no job record no-such-job in {state_dir}: see "
                                                         "'tao_jobs.py list'"}]
    done = session.request("tools/call", {"name": "nope", "arguments": {}})["result"]
    assert done["isError"] is True and done["content"][0]["text"].startswith("error: no tool 'nope': one of ")


MALFORMED = [
    "", "{", "}", "[", "null", "42", '"text"', "[]", "[1,2]", "{}", '{"jsonrpc":"1.0"}', '{"jsonrpc":"2.0"}',
    '{"jsonrpc":"2.0","id":{},"method":"tools/list"}', '{"jsonrpc":"2.0","id":"x","method":7}',
    '{"jsonrpc":"2.0","id":9001,"method":"no/such/method"}',
    '{"jsonrpc":"2.0","id":9002,"method":"tools/call","params":{"name":5}}',
    '{"jsonrpc":"2.0","id":9003,"method":"tools/call","params":{"name":"logs","arguments":[1,2]}}',
    '{"jsonrpc":"2.0","id":9004,"method":"tools/call","params":"params"}',
    '{"jsonrpc":"2.0","id":9005,"method":"tools/call","params":{"name":"status","arguments":{"ids":[{"a":1}]}}}',
    '{"jsonrpc":"2.0","method":"notifications/unknown","params":[]}',
    "\x00\x01\x02", "\ud800" .encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
    "[" * 3000 + "]" * 3000, '{"a":' * 500 + "1" + "}" * 500, "x" * 200_000,
    '{"jsonrpc":"2.0","id":9006,"method":"tools/call","params":{"name":"logs","arguments":{"id":"\\u001b[2J--all"}}}',
]


def test_the_server_outlives_a_thousand_malformed_messages(session):
    for n in range(1000):
        session.send(MALFORMED[n % len(MALFORMED)])
    answer = session.request("tools/list", timeout=120)
    assert len(answer["result"]["tools"]) == 19
    done = session.request("tools/call", {"name": "list", "arguments": {}})["result"]
    assert done["isError"] is False
    stderr = session.close()
    assert session.proc.returncode == 0
    assert "Traceback" not in stderr


def _finished_docker_job(tmp_path: Path) -> tuple[str, Path]:
    """A finished Docker record (in TAO_STATE_DIR) whose own results folder holds two files (7 bytes)."""
    from taobank import records

    rec = records.open_record("docker", "img:1", "dino", "train", "A", f"{tmp_path}/results/{{id}}",
                              backend={"engine": "docker", "container": "c"})
    jid = rec["id"]
    records.mark(jid, "PENDING", backend_ref=f"docker:{jid}", backend={"results_dir": f"{tmp_path}/results/{jid}"})
    records.mark(jid, "COMPLETE")
    folder = tmp_path / "results" / jid
    folder.mkdir(parents=True)
    (folder / "a.pth").write_text("1234")
    (folder / "status.json").write_text("{}\n")
    return jid, folder


@pytest.mark.parametrize("answer,removed,says", [
    ({"action": "accept", "content": {"confirm": True}}, True, None),  # it ran with --yes
    ({"action": "accept", "content": {"confirm": False}}, False, "error: not confirmed (accept): nothing was done"),
    ({"action": "decline"}, False, "error: not confirmed (decline): nothing was done"),
])
def test_prune_asks_the_user_through_the_client_saying_what_goes(state_dir, tmp_path, answer, removed, says):
    jid, folder = _finished_docker_job(tmp_path)
    env = {**os.environ, "TAO_STATE_DIR": str(state_dir), "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    with Session(env, capabilities={"elicitation": {}}) as s:
        rid = s.start("tools/call", {"name": "prune", "arguments": {"ids": [jid]}})
        ask = s.notification("elicitation/create", timeout=60)
        assert ask["params"]["message"] == (f"Delete the results folders of {jid} for good (tao prune)? It deletes "
                                            f"{jid}: 2 file(s), 7 B (7 B in all).")
        assert ask["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
        s.reply(ask, answer)
        done = s.answer(rid)["result"]
    assert folder.exists() is not removed, done
    if says:
        assert done["isError"] is True and done["content"][0]["text"].startswith(says), done
    else:
        assert done["structuredContent"]["result"][0]["removed"] is True, done


def test_prune_of_a_job_it_would_refuse_asks_nothing(state_dir):
    env = {**os.environ, "TAO_STATE_DIR": str(state_dir)}
    with Session(env, capabilities={"elicitation": {}}) as s:
        done = s.call("prune", ids=["gone-aaaaaaaa"])
    assert done["isError"] is True and done["content"][0]["text"].startswith("error: gone-aaaaaaaa: no job record")
    assert not [n for n in s.notifications if n.get("method") == "elicitation/create"]


def test_a_client_that_cannot_ask_gets_the_helpers_line(session):
    done = session.request("tools/call", {"name": "prune", "arguments": {"ids": ["gone-aaaaaaaa"]}})["result"]
    assert done["isError"] is True  # the helper's own lines: what it would delete (here: no such job), nothing asked
    assert done["content"][0]["text"].startswith("error: gone-aaaaaaaa: no job record gone-aaaaaaaa")
    assert not [n for n in session.notifications if n.get("method") == "elicitation/create"]


def test_resources_name_jobs_and_refuse_what_is_not_one(session, state_dir):
    assert session.request("resources/list")["result"]["resources"] == []
    templates = session.request("resources/templates/list")["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["tao://jobs/{id}", "tao://jobs/{id}/logs", "tao://jobs/{id}/metrics"]
    for uri, says in [("tao://jobs/no-such-job", f"error: no job record no-such-job in {state_dir}: see 'tao_jobs.py list'"),
                      ("tao://jobs/x/secrets", "error: no resource 'tao://jobs/x/secrets': they are "),
                      ("file:///etc/passwd", "error: no resource 'file:///etc/passwd': they are ")]:
        for method in ("resources/read", "resources/subscribe"):
            error = session.request(method, {"uri": uri})["error"]
            assert error["message"].startswith(says), (method, error)
    caps = session.request("tools/list")  # still serving
    assert "result" in caps
