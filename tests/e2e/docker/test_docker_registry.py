"""The NGC flow against the local registry that demands credentials (the Kubernetes cluster's): a pull without
a login is refused before any record; tao_docker.py login (key on stdin) lets the job's image be pulled and run;
the key appears in no argv, record or output."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from docker_support import Docker, terminal

pytestmark = pytest.mark.e2e


def test_a_private_image_needs_the_login(docker_cluster, k8s_cluster, tmp_path):
    from testclusters.kubernetes import NGC_KEY_FILE_ENV, realnodes
    from testclusters.kubernetes.cluster_state import _load_cluster
    from taobank import pins

    dk = Docker({**docker_cluster, "DOCKER_CONFIG": str(tmp_path / "client")}, tmp_path)
    registry = _load_cluster()["registry"]
    image = f"{registry}/{realnodes.registry_path(pins.resolve('images.tao_toolkit.pyt'))}"
    dk.docker("image", "rm", "--force", image)
    denied = dk.tao("submit", "--image", image, "--gpus", "0", "--", "echo", "pulled and ran")
    assert denied.returncode == 1 and dk.records() == [], denied.stderr
    assert "tao_docker.py login --registry" in denied.stderr
    key = Path(k8s_cluster[NGC_KEY_FILE_ENV]).read_text().strip()
    login = dk.ok("login", "--registry", registry, env={"NGC_KEY": key})
    assert "logged in" in login.stdout
    job = dk.ok("submit", "--image", image, "--gpus", "0", "--json", "--", "echo", "pulled and ran")
    assert "Pull complete" in job.stderr or "Downloaded" in job.stderr  # the pull's progress is shown
    jid = json.loads(job.stdout)["id"]
    assert dk.wait(jid, terminal)["state"] == "COMPLETE"
    assert "pulled and ran" in dk.ok("logs", jid).stdout
    for text in (dk.call_log.read_text(), *(p.read_text() for p in (tmp_path / "state").glob("*.json")),
                 login.stdout + login.stderr + job.stdout):
        assert key not in text
