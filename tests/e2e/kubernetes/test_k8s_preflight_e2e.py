"""tao_k8s.py preflight against the local cluster: the figures it prints are the cluster's real ones."""
from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest
from k8s_verbs_support import k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk

pytestmark = pytest.mark.e2e


def findings(proc) -> dict:
    return {f["check"] + ("" if f["check"] != "pvc" else ":" + f["message"].split()[1]): f
            for f in json.loads(proc.stdout)}


def test_preflight_counts_schedulable_gpus_and_checks_pvcs_and_can_i(k8s):
    pending = f"unbound-{secrets.token_hex(3)}"
    k8s.kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": pending},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "no-such-class",
                 "resources": {"requests": {"storage": "1Gi"}}}}))
    try:
        proc = k8s.tao("preflight", "--pvc", lk.PVC_NAME, "--pvc", pending, "--json", check=False)
        assert proc.returncode == 1, proc.stderr
        got = findings(proc)
        nodes = json.loads(k8s.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        total = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in nodes)
        usable = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in nodes
                     if not n["spec"].get("unschedulable"))
        assert usable < total  # the cordoned node holds GPUs that no Job can use
        assert got["gpus"]["level"] == "OK"
        assert f"schedulable nvidia.com/gpu: {usable} on" in got["gpus"]["message"]
        assert f"of {total} allocatable" in got["gpus"]["message"] and f"{lk.CORDONED_NODE} (cordoned)" in got["gpus"]["message"]
        assert got[f"pvc:{lk.PVC_NAME}"]["level"] == "OK"
        assert got[f"pvc:{pending}"]["level"] == "MISSING" and "Pending, not Bound" in got[f"pvc:{pending}"]["message"]
        assert got["rbac"]["level"] == "OK"
    finally:
        k8s.kubectl("delete", "pvc", pending, "--wait=false", check=False)


def test_preflight_reports_kubectl_server_skew_beyond_one_minor(k8s):
    server_kubectl = Path(os.environ.get("TAO_LOCAL_K8S_KUBECTL") or k8s.env["TAO_LOCAL_K8S_KUBECTL"])
    skewed = k8s.tao("preflight", "--json", check=False)  # the machine's own kubectl
    client = json.loads(k8s.kubectl("version", "-o", "json", check=False).stdout)["clientVersion"]["gitVersion"]
    minor = int(client.split(".")[1])
    if abs(minor - 34) > 1:
        assert findings(skewed)["version-skew"]["level"] == "WARN", skewed.stdout
    same = k8s.tao("preflight", "--json", env={"PATH": f"{server_kubectl.parent}:{os.environ['PATH']}"})
    assert "version-skew" not in findings(same) and findings(same)["cluster"]["message"].endswith("v1.34")


def test_preflight_says_missing_when_the_user_may_not_create_jobs(k8s):
    proc = k8s.tao("preflight", "--namespace", "default", "--json", check=False,
                   env={"KUBECONFIG": k8s.env["TAO_LOCAL_K8S_USER_KUBECONFIG"]})
    assert proc.returncode == 1
    got = findings(proc)
    assert got["rbac"]["level"] == "MISSING" and "may not create jobs in namespace default" in got["rbac"]["message"]


def test_preflight_lists_the_gpu_nodes_a_node_selector_picks(k8s, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(json.dumps({"image": "i", "command": "true",
                                "node_selector": {lk.REAL_NODE_LABEL: "true"}}))
    proc = k8s.tao("preflight", "--spec", str(spec), "--json")
    (nodes,) = [f for f in json.loads(proc.stdout) if f["check"] == "nodes"]
    by = {r["name"]: r for r in nodes["data"]}
    assert {n for n, r in by.items() if r["can_run"]} == set(lk.REAL_NODES)
    assert all(by[n]["matches_node_selector"] is False for n in lk.GPU_NODES)
    assert "cordoned" in by[lk.CORDONED_NODE]["why_not"]
    assert nodes["message"].endswith(f": {len(lk.REAL_NODES)} of {len(by)}")
    text = k8s.tao("preflight", "--spec", str(spec)).stdout
    assert f"  {sorted(lk.REAL_NODES)[0]}: 8 GPUs, can run it" in text
