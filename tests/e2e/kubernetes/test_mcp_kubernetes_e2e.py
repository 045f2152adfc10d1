"""The NGC key an nvcr.io image needs, asked of the user through the MCP client, on the local Kubernetes: the
user pastes it on the server's one-time page (URL elicitation), the real kubelet pulls the image from the
local registry (which demands it) with the job's pull Secret, and no tool result, MCP message, record,
engine call, Job or Pod manifest holds it."""
from __future__ import annotations

import base64
import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from k8s_verbs_support import k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk
from taobank import pins
from tests.support.mcp_client import Session

pytestmark = pytest.mark.e2e

TAO_IMAGE = str(pins.resolve("images.tao_toolkit.pyt"))  # served only by the local registry, with the key


def test_an_ngc_key_given_on_the_page_pulls_the_image_and_stays_out_of_every_manifest(k8s, tmp_path):
    key = Path(k8s.env[lk.NGC_KEY_FILE_ENV]).read_text().strip()
    lk.forget_image(TAO_IMAGE)  # the kubelet must pull it, with the key
    creds = tmp_path / "cfg" / ".env"
    env = {**{k: v for k, v in k8s.env.items() if k != "NGC_KEY"}, "TAO_ENV_FILE": str(creds)}
    with Session(env, capabilities={"elicitation": {"url": {}}}, protocol="2025-11-25") as mcp:
        rid = mcp.start("tools/call", {"name": "submit_kubernetes", "arguments": {
            "image": TAO_IMAGE, "network_arch": "deformable_detr", "action": "train", "gpus_per_node": 1,
            "pvc_mount": [f"{lk.PVC_NAME}:/results"], "node_selector": {lk.REAL_NODE_LABEL: "true"},
            "ngc_pull_secret": True, "command": 'echo "pulled and ran"'}})
        request = mcp.notification("elicitation/create", timeout=60)
        assert request["params"]["mode"] == "url" and "NGC_KEY" in request["params"]["message"]
        posted = urllib.request.urlopen(urllib.request.Request(
            request["params"]["url"], data=urllib.parse.urlencode({"value": key}).encode(), method="POST"), timeout=10)
        assert posted.status == 200
        mcp.reply(request, {"action": "accept"})
        done = mcp.answer(rid, timeout=180)["result"]
        assert done["isError"] is False, done
        jid = done["structuredContent"]["result"]["id"]
        k8s.ids.append(jid)  # the fixture cleans it up
        end = time.time() + 150
        while (view := mcp.ok("status", ids=[jid])[0])["state"] not in ("COMPLETE", "ERROR", "CANCELED"):
            assert time.time() < end, view
            time.sleep(2)
        assert view["state"] == "COMPLETE", view
        assert "pulled and ran" in json.dumps(mcp.ok("logs", id=jid))
        manifests = json.dumps([k8s.kjson("get", "jobs", "-l", f"tao-job-id={jid}"),
                                k8s.kjson("get", "pods", "-l", f"tao-job-id={jid}")])
        stderr = mcp.close()
    assert oct(creds.stat().st_mode & 0o777) == "0o600" and creds.read_text() == f"NGC_KEY='{key}'\n"
    seen = {"MCP traffic": "\n".join(mcp.traffic), "server stderr": stderr, "Job and Pod manifests": manifests}
    for path in tmp_path.rglob("*"):
        if path.is_file() and path != creds:
            seen[str(path)] = path.read_bytes().decode("utf-8", "replace")
    assert str(k8s.call_log) in seen and any(p.endswith(f"{jid}.json") for p in seen)  # records and kubectl argv
    hidden = (key, base64.b64encode(key.encode()).decode())
    assert [where for where, text in seen.items() if any(h in text for h in hidden)] == []
