"""Bad input on a real engine: one line, exit 1, and nothing half-done (no record, no container, no folder)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from docker_support import SCRIPTS, Docker

pytestmark = pytest.mark.e2e


@pytest.fixture()
def dk(docker_cluster, tmp_path) -> Docker:
    return Docker(docker_cluster, tmp_path)


def refused(dk: Docker, *args: str, env: dict | None = None) -> str:
    before = dk.docker("ps", "-aq", "--filter", "label=org.tao-skill-bank.managed").stdout.split()
    res = dk.tao("submit", *args, env=env)
    assert res.returncode == 1, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert dk.records() == [] and list(dk.results.iterdir()) == []
    assert dk.docker("ps", "-aq", "--filter", "label=org.tao-skill-bank.managed").stdout.split() == before
    return lines[0]


def test_no_engine(dk, tmp_path):
    line = refused(dk, "--image", dk.image, "--gpus", "0", "--", "true",
                   env={"DOCKER_HOST": f"unix://{tmp_path}/no-such.sock"})
    assert "no docker engine answers" in line


def test_gpus_asked_on_a_host_without_gpus(dk):
    if shutil.which("nvidia-smi"):
        pytest.fail("this host has nvidia-smi: the GPU-less refusal is tested on hosts without one")
    line = refused(dk, "--image", dk.image, "--gpus", "1", "--", "true")
    assert "asks for GPUs (1) but this host has none" in line


def test_an_unknown_image(dk):
    line = refused(dk, "--image", "tao-local.test/no-such-image:1", "--gpus", "0", "--pull", "never", "--", "true")
    assert "is not on this host" in line


def test_a_bind_mount_path_that_does_not_exist(dk, tmp_path):
    line = refused(dk, "--image", dk.image, "--gpus", "0", "--mount", f"{tmp_path}/no-data:/data", "--", "true")
    assert "does not exist" in line


def test_no_permission_on_the_socket(dk, tmp_path):
    """A user outside the docker group: the engine's socket refuses them (run here as nobody)."""
    home = tmp_path / "nobody"
    home.mkdir()
    os.chown(home, 65534, 65534)
    env = {k: v for k, v in dk.env.items() if k != "TAO_CALL_LOG"}
    env.update({"HOME": str(home), "TAO_STATE_DIR": str(home / "state"), "TAO_DOCKER_RESULTS_DIR": str(home)})
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                          str(SCRIPTS / "tao_docker.py"), "preflight", "--no-gpus"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "permission denied on the engine's socket" in res.stdout, (res.stdout, res.stderr)


def test_a_run_the_engine_refuses_at_start_takes_back_its_container_and_folder(dk, tmp_path):
    """Issue 37, all or nothing: a refusal only the runtime can make (a bind mount onto /proc: the container is
    created, its start fails) removes the container and the results folder it made; the record says ERROR and why."""
    data = tmp_path / "data"
    data.mkdir()
    res = dk.tao("submit", "--json", "--image", dk.image, "--gpus", "0", "--mount", f"{data}:/proc/tao-x", "--",
                 "true")
    assert res.returncode == 1, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing was left running" in lines[0], res.stderr
    (name,) = dk.records()
    job_id = name[:-len(".json")]
    rec = json.loads((tmp_path / "state" / name).read_text())
    assert rec["state"] == "ERROR" and rec["message"].startswith("submit failed before launch: ")
    assert dk.docker("ps", "-aq", "--filter", f"name=^{job_id}$").stdout.split() == []  # created, then removed
    assert list(dk.results.iterdir()) == []


def test_more_cpus_than_the_engine_has_is_refused_before_any_record(dk):
    line = refused(dk, "--image", dk.image, "--gpus", "0", "--cpus", "1024", "--", "true")
    assert "cpus 1024" in line and "more than the engine's host has" in line


#: made here, so no scanner of this repository flags the file; the shape of an NGC API key
TOKEN = "nvapi-" + "Zq8Xw3Lp9Rt2Vb6Nm4Kc7Hd1Fg5Js0Ya" * 2


@pytest.mark.parametrize("flags", [(), ("--dry-run",), ("--dry-run", "--check")], ids=["submit", "dry-run", "check"])
def test_what_the_record_refuses_is_refused_by_every_dry_run_before_the_engine_is_asked(dk, flags):
    """A credential in --name or in the image (user:pass@registry): the dry run refuses it as the submit does, and
    neither asks the engine anything first (no inspect or pull with the password on its command line)."""
    name = refused(dk, "--image", dk.image, "--gpus", "0", "--name", f"coco {TOKEN}", *flags, "--", "true")
    image = refused(dk, "--image", f"bob:hunter2pass@{dk.image}", "--gpus", "0", *flags, "--", "true")
    assert "the job name/description (--name) looks like it carries a credential" in name and TOKEN not in name
    assert "image carries credentials" in image and "hunter2pass" not in image
    log = dk.call_log.read_text() if dk.call_log.exists() else ""
    assert "docker" not in log and TOKEN not in log and "hunter2pass" not in log
