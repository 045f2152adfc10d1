"""Issue 49 on the local Docker engine: a job status saw running, then another poller saw end (the core's refresh
alone: a sweep's supervisor, an MCP status, a watch in another shell), shows its last epoch and KPIs on its
status line, not the epoch last seen running; ``logs --tail N`` and ``metrics`` work on it."""
from __future__ import annotations

import json
import time

import pytest

from docker_support import BANK, SCRIPTS, Docker

pytestmark = pytest.mark.e2e

FAKE = f"{BANK / 'testclusters'}:/fake"
TRAIN = 'exec sh /fake/fake_tao_train.sh --results "$RESULTS_DIR" --epochs 4 --sleep 2 "$@"'
#: the core's refresh of one job, as any poller other than status does it (no progress read, none remembered)
REFRESH = ("import sys; sys.path.insert(0, sys.argv[1]); from taobank.core import platform; "
           "(v,) = platform.refresh([platform.load_for(sys.argv[2], 'docker', 'status')]); print(v.state)")


@pytest.fixture()
def dk(docker_cluster, tmp_path) -> Docker:
    return Docker(docker_cluster, tmp_path)


def test_a_job_seen_running_then_ended_under_another_poller_shows_its_last_epoch(dk):
    import subprocess
    import sys

    jid = dk.submit("--network-arch", "dino", "--action", "train", "--mount", FAKE, "--", "sh", "-c", TRAIN,
                    "tao")["id"]
    seen = dk.wait(jid, lambda v: v["state"] == "RUNNING" and (v.get("progress") or {}).get("epoch") is not None)
    assert seen["progress"]["epoch"] < 3, seen
    end = time.time() + 60
    while True:  # another poller marks it
        state = subprocess.run([sys.executable, "-c", REFRESH, str(SCRIPTS), jid], env=dk.env, capture_output=True,
                               text=True, timeout=60, check=True).stdout.strip()
        if state == "COMPLETE":
            break
        assert state == "RUNNING" and time.time() < end, state
        time.sleep(1)
    line = dk.run("tao_jobs.py", "status", jid).stdout
    assert "[SUCCESS epoch 4/4 " in line and "val_loss=" in line, line  # not the epoch seen running
    assert dk.status(jid)["progress"]["epoch"] == 3
    tail = dk.run("tao_jobs.py", "logs", jid, "--tail", "2").stdout
    assert "Epoch 3: train_loss=" in tail and "Epoch 1:" not in tail, tail
    rows = json.loads(dk.run("tao_jobs.py", "metrics", jid, "--json").stdout)["rows"]
    assert [r["epoch"] for r in rows] == [0, 1, 2, 3]
