"""The whole lifecycle on a real Docker engine (Debian's docker.io, local_cluster.py up docker): success with
TAO progress and results, a non-zero exit, an OOM kill under --memory, cancel, logs -f, a container removed
outside the bank, and records that outlive the helper's process."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from docker_support import Docker, terminal

pytestmark = pytest.mark.e2e

TRAIN = r'''
echo "training as $(id -u):$(id -g)"
for e in 1 2 3; do
  printf '{"epoch": %s, "max_epoch": 3, "kpi": {"val_loss": 0.%s}}\n' "$e" "$((9 - e))" >> "$RESULTS_DIR/status.json"
  echo "checkpoint $e" > "$RESULTS_DIR/model_epoch_00$e.pth"
  echo "epoch $e done"
  sleep 1
  # after its first epoch it waits (at most 60 s) for the test to have seen it RUNNING: a loaded machine's
  # status call may take longer than the whole training
  i=0; while [ "$e" = 1 ] && [ ! -e "$RESULTS_DIR/seen" ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
done
'''


@pytest.fixture()
def dk(docker_cluster, tmp_path) -> Docker:
    return Docker(docker_cluster, tmp_path)


def test_a_training_completes_with_progress_and_results_owned_by_the_caller(dk):
    job = dk.submit("--name", "e2e success", "--", "sh", "-c", TRAIN)
    jid = job["id"]
    assert job["state"] == "PENDING" and job["platform"] == "docker"
    seen = dk.wait(jid, lambda v: v["state"] == "RUNNING" and v.get("progress"), timeout=30)
    assert seen["progress"]["line"].startswith("epoch "), seen
    (dk.results / jid / "seen").touch()
    # a new process with no DOCKER_HOST in its environment: the record knows where the job runs
    watched = dk.tao("status", jid, "--watch", "--interval", "0.5", "--json", drop=("DOCKER_HOST",), timeout=120)
    assert watched.returncode == 0, watched.stderr
    (view,) = json.loads(watched.stdout)
    assert view["state"] == "COMPLETE" and view["exit_code"] == 0 and view["progress"]["epoch"] == 3, view
    folder = Path(view["results_dir"])
    assert folder == dk.results / jid
    for f in folder.iterdir():
        assert (f.stat().st_uid, f.stat().st_gid) == (os.getuid(), os.getgid()), f
    assert f"training as {os.getuid()}:{os.getgid()}" in dk.ok("logs", jid).stdout
    listing = json.loads(dk.ok("artifacts", jid, "--kpi", "val_loss", "--json").stdout)
    assert {f["path"] for f in listing["files"]} >= {"model_epoch_003.pth", "status.json"}
    got = json.loads(dk.ok("fetch", jid, "model_epoch_003.pth", "--to", str(dk.tmp / "got"), "--json").stdout)
    assert got and (dk.tmp / "got" / "model_epoch_003.pth").read_text() == "checkpoint 3\n"
    assert got[0]["verified"] == "size+mtime (a local copy)" and got[0]["moved"] == len("checkpoint 3\n")
    again = json.loads(dk.ok("fetch", jid, "model_epoch_003.pth", "--to", str(dk.tmp / "got"), "--json").stdout)
    assert again[0]["moved"] == 0 and again[0]["verified"].startswith("already here")
    best = listing["best"]["checkpoints"]  # fetch --best: the checkpoint artifacts ranks first, and only it
    picked = json.loads(dk.ok("fetch", jid, "--best", "--kpi", "val_loss", "--to", str(dk.tmp / "best"),
                              "--json").stdout)
    assert best and [f["path"] for f in picked] == best and sorted(os.listdir(dk.tmp / "best")) == best
    # the front door dispatches to the same adapter
    table = dk.run("tao_jobs.py", "list", "--platform", "docker", "--json")
    assert [v["id"] for v in json.loads(table.stdout)] == [jid]


def test_a_non_zero_exit_is_error_with_its_code(dk):
    jid = dk.submit("--", "sh", "-c", "echo about to fail; exit 3")["id"]
    view = dk.wait(jid, terminal)
    assert view["state"] == "ERROR" and view["err_class"] == "ERR_PROGRAM" and view["exit_code"] == 3, view
    assert "exit code 3" in view["message"]
    # the bank removed the container once its end was seen (its saved configuration holds the secrets' values):
    # the record and its logs stay
    assert dk.docker("container", "inspect", jid).returncode != 0
    assert dk.status(jid)["state"] == "ERROR"
    out = dk.ok("logs", jid)
    assert "about to fail" in out.stdout and "saved when it ended" in out.stderr


def test_over_the_memory_limit_is_an_oom_kill(dk):
    jid = dk.submit("--memory", "16m", "--", "sh", "-c", "head -c 400m /dev/zero | tail > /dev/null")["id"]
    view = dk.wait(jid, terminal)
    assert view["state"] == "ERROR" and view["reason"] == "OOMKilled", view
    assert "out of memory" in view["message"] and "16m" in view["message"]


def test_cancel_stops_with_a_grace_period_then_marks_canceled(dk):
    jid = dk.submit("--stop-grace", "5", "--", "sh", "-c", "trap 'echo saving; exit 0' TERM; sleep 600 & wait")["id"]
    dk.wait(jid, lambda v: v["state"] == "RUNNING")
    started = time.time()
    (view,) = json.loads(dk.ok("cancel", jid, "--json").stdout)
    assert view["state"] == "CANCELED" and "SIGTERM" in view["message"], view
    assert time.time() - started < 30
    assert dk.docker("inspect", "--format", "{{.State.Running}}", jid).stdout.strip() == "false"
    assert "saving" in dk.ok("logs", jid).stdout  # the job got its SIGTERM and its grace
    assert dk.status(jid)["state"] == "CANCELED"


def test_logs_follow_streams_until_the_container_ends(dk):
    jid = dk.submit("--", "sh", "-c", "for i in 1 2 3 4; do echo line $i; sleep 1; done")["id"]
    res = dk.ok("logs", jid, "-f", timeout=60)
    assert [ln for ln in res.stdout.splitlines() if ln.startswith("line")] == ["line 1", "line 2", "line 3", "line 4"]
    assert dk.wait(jid, terminal)["state"] == "COMPLETE"
    assert dk.ok("logs", jid, "--tail", "1").stdout.strip() == "line 4"


def test_a_container_removed_outside_the_bank_is_unknown_never_complete(dk):
    jid = dk.submit("--", "sh", "-c", "sleep 600")["id"]
    dk.wait(jid, lambda v: v["state"] == "RUNNING")
    assert dk.docker("rm", "--force", jid).returncode == 0
    view = dk.status(jid)
    assert view["state"] == "UNKNOWN" and "container is gone" in view["message"], view
    out = dk.tao("status", jid)
    assert out.returncode == 0 and len(out.stdout.strip().splitlines()) == 1 and "UNKNOWN" in out.stdout
    dk.ok("cancel", jid)
