"""A 2-node job whose rank 0 name resolves late still trains on 2 nodes (the two real kubelet nodes, CoreDNS).

Rank 0's name ``<job>-0.<service>`` exists in the cluster DNS only once the job's headless Service selects its
pod. Here the bank's rendered Job is applied alone and its Service only after both pods have started, so
neither pod can resolve the name when it begins (a Service created late, as when it is applied after the Job
or the DNS lags). TAO's entrypoint, meeting an unresolvable MASTER_ADDR, would train each node on its own
(the TAO stand-in in testclusters/tao_lightning does what TAO's validate_configs does: resolve the name, then
rewrite the spec file in place). The bank's node guard (taobank.multinode) makes each pod wait for the name,
then run TAO on its own copy of the spec file: both nodes train together, the shared spec file is untouched.
"""
from __future__ import annotations

import json
import secrets
import shutil
import time

import pytest
import yaml
from k8s_verbs_support import NAMESPACE, k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk
from taobank import multinode
from taobank.platforms.kubernetes import render
from testclusters import tao_lightning
from testclusters.kubernetes import torch_image
from tests.support import lightning_ranks

pytestmark = pytest.mark.e2e


@pytest.fixture()
def pvc_folder():
    """A fresh folder of the local PVC: (its host path, its path in a pod mounting the PVC at /results)."""
    folder = f".e2e-late-dns-{secrets.token_hex(4)}"
    host = lk.state_root() / "pv" / folder
    tao_lightning.install_standin(host, "/usr/bin/python3")  # the image's Debian Python
    yield host, f"/results/{folder}"
    shutil.rmtree(host, ignore_errors=True)


def pod_logs(k8s, job_name: str) -> dict[str, str]:
    pods = k8s.kjson("get", "pods", "-l", f"job-name={job_name}")["items"]
    return {p["metadata"]["name"]: k8s.kubectl("logs", p["metadata"]["name"], check=False).stdout for p in pods}


def why_not(k8s, job_name: str, logs: dict[str, str]) -> str:
    """What a failed run says first (a long message is cut at its end): the Job's conditions, each container's
    end, then the tail of each pod's log."""
    conds = [(c.get("type"), c.get("reason"), c.get("message"))
             for c in (k8s.kjson("get", "job", job_name).get("status") or {}).get("conditions") or []]
    ends = {p["metadata"]["name"]: [(cs.get("state") or {}).get("terminated") or cs.get("state")
                                    for cs in (p.get("status") or {}).get("containerStatuses") or []]
            for p in k8s.kjson("get", "pods", "-l", f"job-name={job_name}")["items"]}
    tails = {pod: text[-1500:] for pod, text in logs.items()}
    return f"conditions={conds} containers={ends} logs={tails}"


def wait_for(what: str, check, timeout: float) -> None:
    end = time.time() + timeout
    while not check():
        if time.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(2)


def test_two_nodes_train_together_when_rank0s_service_comes_late(k8s, pvc_folder):
    host, in_pod = pvc_folder
    image = torch_image.ensure()  # built once per version, imported into each real node when missing
    spec_text = "# one spec for both ranks (a rewrite drops this comment)\ntrain:\n  num_epochs: 1\n"
    (host / "train.yaml").write_text(spec_text)  # ONE spec file on shared storage, named by both ranks
    job_id = f"dino-train-{secrets.token_hex(4)}"
    spec = {"image": image, "command": f"{in_pod}/dino train -e {in_pod}/train.yaml", "network_arch": "dino",
            "action": "train", "gpus": 2, "nodes": 2, "one_pod_per_node": True,
            # under a loaded CI machine, longer than the waits below (a deadline is no part of what is tested)
            "active_deadline_seconds": 900, "env": {"TAO_STANDIN_PG_TIMEOUT_S": "600"},
            "node_selector": {lk.REAL_NODE_LABEL: "true"},
            "mounts": [{"pvc": lk.PVC_NAME, "mount_path": "/results"}]}
    objs = render.render_manifests(spec, job_id=job_id, namespace=NAMESPACE)
    job, service = render.find(objs, "Job"), render.find(objs, "Service")
    assert job is not None and service is not None and len(objs) == 2
    name = job["metadata"]["name"]
    k8s.ids.append(job_id)  # cleanup deletes the Job, its pods and the Service by the job label
    k8s.kubectl("apply", "-f", "-", stdin=json.dumps(job))

    def running() -> bool:
        pods = k8s.kjson("get", "pods", "-l", f"job-name={name}")["items"]
        states = [cs.get("state") or {} for p in pods for cs in (p.get("status") or {}).get("containerStatuses") or []]
        return len(states) == 2 and all("running" in s or "terminated" in s for s in states)

    wait_for("both pods to start", running, timeout=240)  # with no Service yet: rank 0's name does not resolve
    time.sleep(15)  # and it stays so a while (each pod has begun long before the name exists)
    logs = pod_logs(k8s, name)
    assert not any("resolves" in text for text in logs.values()), logs
    k8s.kubectl("apply", "-f", "-", stdin=json.dumps(service))

    def finished() -> bool:
        st = k8s.kjson("get", "job", name).get("status") or {}
        return int(st.get("succeeded") or 0) == 2 or int(st.get("failed") or 0) > 0

    wait_for("the Job to end", finished, timeout=600)
    logs = pod_logs(k8s, name)
    wait = multinode.rank0_name_wait_s()
    status = k8s.kjson("get", "job", name).get("status") or {}
    assert int(status.get("succeeded") or 0) == 2, why_not(k8s, name, logs)
    for pod, text in logs.items():
        assert "[Multinode]" not in text, (pod, text)  # TAO's multi-node set-up went through on this node
        assert f"tao: waiting up to {wait} s for rank 0's name {name}-0.{name}" in text, (pod, text)
        assert f"rank 0's name {name}-0.{name} resolves" in text, (pod, text)
        assert "num_gpus=2 num_nodes=2 multinode=True" in text, (pod, text)  # TAO's entrypoint: two nodes
    by_node = lightning_ranks.check(lightning_ranks.read(lk.state_root() / "pv" / job_id), nodes=2, per_node=2)
    assert sorted(by_node) == [0, 1]
    # each rank rewrote its own copy of the spec file: the shared one is as it was written
    assert (host / "train.yaml").read_text() == spec_text
    assert yaml.safe_dump(yaml.safe_load(spec_text)) != spec_text  # (a rewrite would show)
    shutil.rmtree(lk.state_root() / "pv" / job_id, ignore_errors=True)
