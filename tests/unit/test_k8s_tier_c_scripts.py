"""The tier C container scripts, run with the real /bin/sh and a stand-in `aws` that records its argv.

They are the exact strings render.py puts into the manifest: fetch copies every
input, the main wrapper keeps the user's exit code, the uploader waits for the
exit marker (or for the main process to die without one) and reports only the upload.
"""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from taobank.platforms.kubernetes import render

FAKE_AWS = """#!/bin/sh
printf '%s\\n' "$*" >> "$AWS_LOG"
[ -n "${AWS_FAIL:-}" ] && exit 1
[ "$3" = "--recursive" ] || true
exit 0
"""


@pytest.fixture()
def box(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    aws = bindir / "aws"
    aws.write_text(FAKE_AWS)
    aws.chmod(0o755)
    stage = tmp_path / "stage"
    stage.mkdir()
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "AWS_LOG": str(tmp_path / "aws.log"), "TAO_STAGING_DIR": str(stage)}
    return tmp_path, stage, env


def sh(script: str, args: list[str], env: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", script, "tao", *args], env=env, capture_output=True, text=True, timeout=30, **kw)


def test_fetch_copies_each_pair_prefix_recursively(box):
    tmp, stage, env = box
    weird = "s3://b/odd name/$(id)'\""
    proc = sh(render.FETCH_SCRIPT, ["s3://b/coco/", f"{stage}/coco", weird, f"{stage}/x/y"],
              {**env, "S3_ENDPOINT_URL": "http://minio:9000"})
    assert proc.returncode == 0, proc.stderr
    assert (tmp / "aws.log").read_text().splitlines() == [
        f"s3 cp --recursive s3://b/coco/ {stage}/coco",
        f"s3 cp {weird} {stage}/x/y",
    ]
    assert (stage / "x").is_dir()


def test_fetch_failure_fails_the_init_container(box):
    _, stage, env = box
    assert sh(render.FETCH_SCRIPT, ["s3://b/k", f"{stage}/k"], {**env, "AWS_FAIL": "1"}).returncode != 0


@pytest.mark.parametrize("code", [0, 3, 137])
def test_main_wrapper_keeps_the_user_exit_code(box, code):
    _, stage, env = box
    proc = sh(render.MAIN_WRAPPER, ["/bin/sh", "-c", f"echo run; exit {code}"], env)
    assert proc.returncode == code and proc.stdout == "run\n"
    assert (stage / ".tao-exit").read_text().strip() == str(code)


def test_main_wrapper_passes_native_argv_untouched(box):
    _, _, env = box
    proc = sh(render.MAIN_WRAPPER, ["printf", "%s|", "a b", "$(id)", "'q'"], env)
    assert proc.stdout == "a b|$(id)|'q'|"


FAKE_SLEEP = """#!/bin/sh
printf '%s\\n' "$*" >> "$SLEEP_LOG"
exec /bin/sleep 0.05
"""


def test_uploader_waits_for_marker_then_uploads(box):
    """It polls (sleep 5 between looks; a stand-in sleep logs the interval and returns at once) until the
    marker appears, then uploads."""
    tmp, stage, env = box
    fake_sleep = tmp / "bin" / "sleep"
    fake_sleep.write_text(FAKE_SLEEP)
    fake_sleep.chmod(0o755)
    log = tmp / "sleep.log"
    env = {**env, "SLEEP_LOG": str(log)}
    (stage / "out").mkdir()
    up = subprocess.Popen(["/bin/sh", "-c", render.UPLOAD_SCRIPT, "tao", f"{stage}/out", "s3://b/r/"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 15
    while (not log.exists() or len(log.read_text().splitlines()) < 3) and time.monotonic() < end:
        time.sleep(0.02)
    assert up.poll() is None  # still waiting: the main container has not finished
    assert set(log.read_text().splitlines()) == {"5"}, log.read_text()  # it looked 3 times, 5 s apart
    assert not (tmp / "aws.log").exists()
    (stage / ".tao-exit").write_text("3\n")
    assert up.wait(timeout=15) == 0  # the upload worked: exit 0 whatever the user's code was
    assert (tmp / "aws.log").read_text().splitlines() == [f"s3 cp --recursive {stage}/out s3://b/r/"]


def test_uploader_stops_waiting_when_main_dies_without_marker(box):
    tmp, stage, env = box
    dead = subprocess.Popen(["true"])
    dead.wait()
    (stage / ".tao-main-pid").write_text(f"{dead.pid}\n")
    (stage / "model.pth").write_text("w")
    proc = sh(render.UPLOAD_SCRIPT, [f"{stage}/model.pth", "s3://b/m.pth", f"{stage}/missing", "s3://b/x/"], env)
    assert proc.returncode == 1 and "missing does not exist" in proc.stderr
    assert (tmp / "aws.log").read_text().splitlines() == [f"s3 cp {stage}/model.pth s3://b/m.pth"]
