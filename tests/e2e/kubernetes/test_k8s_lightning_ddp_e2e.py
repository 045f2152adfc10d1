"""Real PyTorch Lightning DDP (CPU, gloo) through the bank on the two real kubelet nodes (not kwok).

Each pod runs the TAO stand-in (testclusters/tao_lightning: ``dino train``, TAO's own rules for GPU and node
counts, then Lightning with ``strategy='ddp'``, which starts the pod's second process itself) in the local
torch-cpu image (Debian's PyTorch plus the pinned Lightning wheels); the stand-in's files sit on the results
volume, so the image does not change with them. The command is a TAO command that names no GPU or node
count: it passes only when the bank appends ``train.num_gpus=2 train.num_nodes=2`` (without num_nodes, TAO's
Lightning network trains as if alone: each pod's ranks never meet the other's) and gives each pod TAO's
rendezvous (WORLD_SIZE = nodes, NODE_RANK from the pod's index, MASTER_ADDR of pod 0) with no RANK/LOCAL_RANK.
"""
from __future__ import annotations

import json
import secrets
import shutil

import pytest
import yaml
from k8s_verbs_support import ON_REAL, k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk
from testclusters import tao_lightning
from testclusters.kubernetes import torch_image
from tests.support import lightning_ranks

pytestmark = pytest.mark.e2e


@pytest.fixture()
def standin_on_pvc():
    """The stand-in in a folder of the local PVC (its host path): ``/results/<folder>`` in a pod mounting it."""
    folder = f".e2e-lightning-{secrets.token_hex(4)}"
    host = lk.state_root() / "pv" / folder
    tao_lightning.install_standin(host, "/usr/bin/python3")  # the image's Debian Python
    yield f"/results/{folder}"
    shutil.rmtree(host, ignore_errors=True)


def terminal(st: dict) -> bool:
    return st["state"] in ("COMPLETE", "ERROR", "CANCELED")


def test_lightning_ddp_on_two_real_nodes_gets_every_rank_and_the_world_size(k8s, standin_on_pvc, tmp_path):
    image = torch_image.ensure()  # built once per version, imported into each real node when missing
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"one_pod_per_node": True}))  # each pod on its own real node
    # the gate: this test is about ranks, not the network path (the gloo-cpu probe tests prove that)
    out = k8s.submit("--spec", str(spec), "--image", image, "--network-arch", "dino", "--action", "train",
                     "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "2", "--nodes", "2",
                     "--skip-nccl-probe", "--active-deadline", "300", "--command", f"{standin_on_pvc}/dino train")
    st = k8s.wait(out["id"], terminal, timeout=360)
    logs = k8s.tao("logs", out["id"], check=False).stdout
    assert st["state"] == "COMPLETE", json.dumps(st) + logs
    assert logs.count("num_gpus=2 num_nodes=2 multinode=True") == 2, logs  # TAO's entrypoint, in each pod
    pods = k8s.kjson("get", "pods", "-l", f"tao-job-id={out['id']}")["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(lk.REAL_NODES)

    by_node = lightning_ranks.check(lightning_ranks.read(lk.state_root() / "pv" / out["id"]), nodes=2, per_node=2)
    for n, group in by_node.items():
        # the pod of index n is node rank n, and both its processes ran in it
        assert {line["hostname"] for line in group} == {f"{out['name']}-{n}"}, group
        for line in group:
            task = line["task_env"]  # what the pod gave TAO, before Lightning rewrote it for its children
            assert task["present"]["WORLD_SIZE"] == "2" and task["present"]["NODE_RANK"] == str(n), task
            assert task["present"]["MASTER_ADDR"] == f"{out['name']}-0.{out['name']}", task
            assert "RANK" not in task["present"] and "LOCAL_RANK" not in task["present"], task
            assert task["slurm_detect"] is False, task
