"""GPU-only checks of the Docker platform. They need an NVIDIA driver (nvidia-smi) and, for the job, the NVIDIA
Container Toolkit in the engine. Where nvidia-smi does not work they are NOT RUN and the run says so at its end
(tests/conftest.py): never skipped in silence, never faked."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from docker_support import SCRIPTS, Docker, terminal

pytestmark = pytest.mark.gpu


def _nvidia_smi_l() -> list[str]:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=True).stdout
    return [ln for ln in out.splitlines() if ln.startswith("GPU ")]


def test_preflight_counts_the_hosts_gpus_and_checks_driver_and_capability():
    res = subprocess.run([sys.executable, str(SCRIPTS / "tao_docker.py"), "preflight", "--json"], capture_output=True,
                         text=True, timeout=120)
    report = json.loads(res.stdout)
    found = {f["check"]: f for f in report["findings"]}
    assert found["gpus"]["level"] == "OK" and len(found["gpus"]["data"]) == len(_nvidia_smi_l()), found["gpus"]
    assert found["driver"]["level"] in ("OK", "MISSING") and "CUDA" in found["driver"]["message"]
    assert found["compute_capability"]["level"] in ("OK", "MISSING")
    gpu0 = found["gpus"]["data"][0]
    assert gpu0["uuid"].startswith(("GPU-", "MIG-")) and gpu0["compute_cap"].count(".") == 1


@pytest.mark.e2e
def test_a_job_gets_the_gpu_it_asked_for(docker_cluster, tmp_path):
    dk = Docker(docker_cluster, tmp_path)
    job = json.loads(dk.ok("submit", "--json", "--image", dk.image, "--gpus", "1", "--", "nvidia-smi", "-L").stdout)
    view = dk.wait(job["id"], terminal, timeout=120)
    assert view["state"] == "COMPLETE", view
    listed = [ln for ln in dk.ok("logs", job["id"]).stdout.splitlines() if ln.startswith("GPU ")]
    assert len(listed) == 1
