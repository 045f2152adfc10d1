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


def _private_image(dk: Docker) -> tuple[str, str]:
    from testclusters.kubernetes import realnodes
    from testclusters.kubernetes.cluster_state import _load_cluster
    from taobank import pins

    registry = _load_cluster()["registry"]
    image = f"{registry}/{realnodes.registry_path(pins.resolve('images.tao_toolkit.pyt'))}"
    dk.docker("image", "rm", "--force", image)
    return registry, image


def test_submit_ngc_pull_secret_logs_the_engine_in_from_ngc_key_and_pulls(docker_cluster, k8s_cluster, tmp_path):
    """Issue 49: submit --ngc-pull-secret logs the engine in to the image's registry with NGC_KEY on stdin just
    before the pull (as Kubernetes makes its pull Secret); without NGC_KEY it is one line before any record."""
    from testclusters.kubernetes import NGC_KEY_FILE_ENV

    dk = Docker({**docker_cluster, "DOCKER_CONFIG": str(tmp_path / "client")}, tmp_path)
    registry, image = _private_image(dk)
    key = Path(k8s_cluster[NGC_KEY_FILE_ENV]).read_text().strip()
    words = ("submit", "--image", image, "--gpus", "0", "--ngc-pull-secret", "--json", "--", "echo", "pulled with the key")
    no_key = dk.tao(*words, drop=("NGC_KEY",))
    assert no_key.returncode == 1 and "NGC_KEY" in no_key.stderr and dk.records() == [], no_key.stderr
    job = dk.ok(*words, env={"NGC_KEY": key})
    assert f"logged in to {registry} as $oauthtoken" in job.stderr, job.stderr
    jid = json.loads(job.stdout)["id"]
    assert dk.wait(jid, terminal)["state"] == "COMPLETE"
    assert "pulled with the key" in dk.ok("logs", jid).stdout
    for text in (dk.call_log.read_text(), *(p.read_text() for p in (tmp_path / "state").glob("*.json")),
                 job.stdout + job.stderr + no_key.stderr):
        assert key not in text


def test_mcp_submit_docker_pulls_with_the_stored_key_by_name(docker_cluster, k8s_cluster, tmp_path):
    """submit_docker takes the pull credential by name (ngc_pull_secret): the key comes from the user's
    credentials file, reaches the engine's login on stdin, and shows in no MCP message, record or argv."""
    from testclusters.kubernetes import NGC_KEY_FILE_ENV
    from tests.support.mcp_client import Session

    dk = Docker({**docker_cluster, "DOCKER_CONFIG": str(tmp_path / "client")}, tmp_path)
    registry, image = _private_image(dk)
    key = Path(k8s_cluster[NGC_KEY_FILE_ENV]).read_text().strip()
    creds = tmp_path / "cfg" / ".env"
    creds.parent.mkdir(mode=0o700)
    creds.write_text(f"NGC_KEY={key}\n")
    creds.chmod(0o600)
    env = {k: v for k, v in dk.env.items() if k != "NGC_KEY"}
    with Session({**env, "TAO_ENV_FILE": str(creds)}, capabilities={"elicitation": {"url": {}}},
                 protocol="2025-11-25") as mcp:
        jid = mcp.ok("submit_docker", image=image, gpus_per_node=0, ngc_pull_secret=True,
                     command=["echo", "pulled by name"])["id"]
        stderr = mcp.close()
    assert not [n for n in mcp.notifications if n.get("method") == "elicitation/create"]  # found in the file
    assert dk.wait(jid, terminal)["state"] == "COMPLETE"
    assert "pulled by name" in dk.ok("logs", jid).stdout
    for text in ("\n".join(mcp.traffic) + stderr, dk.call_log.read_text(),
                 *(p.read_text() for p in (tmp_path / "state").glob("*.json"))):
        assert key not in text
