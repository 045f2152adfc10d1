"""A sweep trial's verdict outlives the sweep's Indexed Job: with nobody polling, the TTL controller deletes the
finished Job and its pods; ``status``, asked only then, reads each trial's exit marker (``<results>/logs/
<pod>.exit`` beside its log copy, on the results volume) with ONE helper Job for all of them: the trial that exited
3 is ERROR with exit code 3 and its last log lines, the other COMPLETE, each with its own logs; the sweep table
agrees."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import k8s_verbs_support
from k8s_verbs_support import ON_REAL

import testclusters.kubernetes as lk
from taobank import pins
from tests.support.results_cli import tao_jobs

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s
BUSYBOX = str(pins.resolve("images.busybox"))
#: trial i runs ``sh -c SCRIPT tao t.x=V``: it prints its override and exits 3 when V is 3
SCRIPT = 'echo "trial line $1 $((6*7))"; [ "$1" != t.x=3 ] || exit 3'


def test_a_sweep_deleted_by_its_ttl_shows_each_trials_real_verdict_and_logs(k8s):
    proc = k8s.tao("submit", "--json", "--image", BUSYBOX, "--network-arch", "dino", "--action", "train", "--gpus", "1",
                   "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_REAL, "--no-input-check", "--ttl", "3",
                   "--command", f"sh -c '{SCRIPT}' tao", "--sweep", "t.x=1,3", "--max-concurrent", "2")
    done = json.loads(proc.stdout)
    sweep, (passed, failed) = done["sweep"], [j["id"] for j in done["jobs"]]
    k8s.ids += [passed, failed, sweep]
    calls_at_submit = len(k8s.calls())
    end = time.time() + 150
    # nobody calls the bank: the Job controller runs both trials, the TTL controller deletes the Job and its pods
    while k8s.kubectl("get", "jobs,pods", "-l", f"tao-sweep={sweep}", "-o", "name").stdout.strip():
        assert time.time() < end, "the TTL controller did not delete the sweep's Job"
        time.sleep(1)
    assert len(k8s.calls()) == calls_at_submit
    markers = {jid: sorted((lk.state_root() / "pv" / jid / "logs").glob("*.exit")) for jid in (passed, failed)}
    assert all(len(m) == 1 for m in markers.values()), markers  # each trial's own pod, in its own folder
    assert markers[failed][0].read_text().split()[0] == "3" and markers[passed][0].read_text().split()[0] == "0"
    state = Path(k8s.env["TAO_STATE_DIR"])
    assert not (state / f"{failed}.d" / "logs.txt").exists()  # nothing was saved before the Job went
    before = len(k8s.calls())
    views = {v["id"]: v for v in json.loads(tao_jobs("status", passed, failed, "--json", env=k8s.env).stdout)}
    bad, good = views[failed], views[passed]
    assert (bad["state"], bad["err_class"], bad["exit_code"]) == ("ERROR", "ERR_PROGRAM", 3), bad
    assert "exited with code 3" in bad["message"] and "trial line t.x=3 42" in bad["message"], bad
    assert (good["state"], good["exit_code"]) == ("COMPLETE", 0), good
    helpers = [c for c in k8s.calls()[before:] if c[:1] == ["kubectl"] and "create" in c]
    assert len(helpers) == 1, helpers  # one helper Job read both trials' markers
    table = tao_jobs("status", "--sweep", sweep, env=k8s.env).stdout
    assert [ln.split()[2] for ln in table.splitlines()[1:]] == ["COMPLETE", "ERROR"], table
    assert "trial line t.x=3 42" in tao_jobs("logs", failed, env=k8s.env).stdout
    assert "trial line t.x=1 42" in tao_jobs("logs", passed, env=k8s.env).stdout
