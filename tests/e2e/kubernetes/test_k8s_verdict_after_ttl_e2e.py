"""A job's verdict outlives its Job: with nobody polling, the TTL controller deletes the finished Jobs and pods;
status, first asked 30 s after the end, reads the exit code the real container left on the results volume."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from k8s_verbs_support import ON_REAL, k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk
from taobank import pins

pytestmark = pytest.mark.e2e

BUSYBOX = str(pins.resolve("images.busybox"))
BASE = ["--image", BUSYBOX, "--network-arch", "deformable_detr", "--action", "train", "--gpus", "1",
        "--pvc-mount", f"{lk.PVC_NAME}:/results", "--ttl", "3", *ON_REAL]


def gone(k8s, name: str) -> bool:
    return not k8s.kubectl("get", "job", name, "--ignore-not-found", "-o", "name").stdout.strip()


def test_a_job_deleted_by_its_ttl_shows_its_real_exit_code_and_logs(k8s):
    failed = k8s.submit(*BASE, "--command", 'echo "verdict line $((6*7))"; exit 3')
    passed = k8s.submit(*BASE, "--command", 'echo "passing line $((6*7))"')
    end = time.time() + 150
    while not (gone(k8s, failed["name"]) and gone(k8s, passed["name"])):  # nobody calls the bank meanwhile
        assert time.time() < end, "the TTL controller did not delete the Jobs"
        time.sleep(1)
    markers = {o["id"]: lk.state_root() / "pv" / o["id"] / "logs" for o in (failed, passed)}
    ended = max(p.stat().st_mtime for d in markers.values() for p in d.glob("*.exit"))
    time.sleep(max(0.0, ended + 30 - time.time()))  # first looked at 30 s after the end
    state = Path(k8s.env["TAO_STATE_DIR"])
    assert not (state / f"{failed['id']}.d" / "logs.txt").exists()  # nobody saved anything before
    before = len(k8s.calls())
    views = json.loads(k8s.tao("status", failed["id"], passed["id"], "--json").stdout)
    bad, good = views
    assert (bad["state"], bad["err_class"], bad["exit_code"]) == ("ERROR", "ERR_PROGRAM", 3), bad
    assert "exited with code 3" in bad["message"] and "verdict line 42" in bad["message"], bad
    assert (good["state"], good["exit_code"]) == ("COMPLETE", 0), good
    helpers = [c for c in k8s.calls()[before:] if c[:1] == ["kubectl"] and "create" in c]
    assert len(helpers) == 1, helpers  # one helper Job read both jobs' markers
    logs = k8s.tao("logs", failed["id"])
    assert "verdict line 42" in logs.stdout, logs.stdout + logs.stderr
    assert "passing line 42" in k8s.tao("logs", passed["id"]).stdout
    assert k8s.record(failed["id"])["state"] == "ERROR" and k8s.record(passed["id"])["state"] == "COMPLETE"
