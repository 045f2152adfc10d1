"""tao_k8s.py preflight against the fake kubectl: true GPU figures, can-i, PVC Bound, version skew."""
from __future__ import annotations

import json

from fakeproc import items
from test_k8s_gates import node

from taobank.kubernetes import preflight

V = {"clientVersion": {"gitVersion": "v1.34.1"}, "serverVersion": {"gitVersion": "v1.34.4"}}


def cluster(fake, *, version=V, nodes=None, can_i="yes\n") -> None:
    fake.kubectl("version", answer=version)
    fake.kubectl("get", "namespace", answer="namespace/default\n")
    fake.kubectl("auth", "can-i", answer=can_i)
    fake.kubectl("get", "nodes", answer=items(nodes if nodes is not None else [node("a"), node("b")]))
    fake.kubectl("get", "pvc", "ws", answer={"status": {"phase": "Bound"}})


def test_gpu_figure_counts_only_schedulable_nodes(fake, cli):
    # the reported case: 24 allocatable, 16 usable (one node cordoned)
    cluster(fake, nodes=[node("a"), node("b"), node("c", cordoned=True)])
    out = cli("tao_k8s.py", "preflight", "--pvc", "ws")
    assert out.rc == 0, out
    assert "OK: schedulable nvidia.com/gpu: 16 on 2 node(s), at most 8 per node of 24 allocatable; not schedulable: " \
           "c (cordoned)" in out.out
    assert "OK: PVC ws is Bound" in out.out and "WARN" not in out.out


def test_no_create_jobs_and_unbound_pvc_are_missing_exit_1(fake, cli):
    cluster(fake, can_i="no\n")
    fake.kubectl("get", "pvc", "ws", answer={"status": {"phase": "Pending"}})
    out = cli("tao_k8s.py", "preflight", "--pvc", "ws", "--json")
    assert out.rc == 1
    levels = {f["check"]: f["level"] for f in json.loads(out.out)}
    assert levels["rbac"] == "MISSING" and levels["pvc"] == "MISSING"
    asked = [c.words[2:4] for c in fake.kubectl_calls("auth", "can-i")]
    assert asked == [["create", "jobs"]]


def test_version_skew_beyond_one_minor_is_reported(fake):
    from taobank.kubernetes.kubectl import Kubectl

    cluster(fake, version={"clientVersion": {"gitVersion": "v1.32.4-dispatcher"},
                           "serverVersion": {"gitVersion": "v1.34.4"}})
    found = preflight.run(Kubectl())
    (skew,) = [f for f in found if f.check == "version-skew"]
    assert skew.level == "WARN" and "kubectl v1.32" in skew.message and "v1.34" in skew.message
    assert not [f for f in preflight.version_findings({"clientVersion": {"gitVersion": "v1.33.0"},
                                                       "serverVersion": {"gitVersion": "v1.34.4"}})
                if f.check == "version-skew"]


def test_unreachable_cluster_stops_at_the_first_check(fake, cli):
    fake.kubectl("version", rc=1, answer=json.dumps({"clientVersion": {"gitVersion": "v1.34.0"}}),
                 stderr="The connection to the server localhost:8080 was refused")
    out = cli("tao_k8s.py", "preflight")
    assert out.rc == 1 and out.out.startswith("MISSING: no reachable cluster") and len(fake.of("kubectl")) == 1


def test_spec_mounts_name_the_pvcs_and_no_node_permission_warns(fake, cli, tmp_path):
    cluster(fake)
    fake.kubectl("get", "nodes", rc=1, stderr='Error from server (Forbidden): nodes is forbidden')
    spec = tmp_path / "job.yaml"
    spec.write_text("image: i\ncommand: c\nmounts: [{pvc: ws, mount_path: /results}]\n")
    out = cli("tao_k8s.py", "preflight", "--spec", str(spec))
    assert out.rc == 0 and "OK: PVC ws is Bound" in out.out and "WARN: you may not list nodes" in out.out, out


def test_gpu_figure_follows_the_spec_tolerations_like_the_submit_gate(fake, cli, tmp_path):
    taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    cluster(fake, nodes=[node("a", taints=taint), node("b", taints=taint)])
    out = cli("tao_k8s.py", "preflight")
    assert "no schedulable nvidia.com/gpu of 16 allocatable" in out.out
    spec = tmp_path / "job.yaml"
    spec.write_text("image: i\ntolerations:\n- {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n")
    out = cli("tao_k8s.py", "preflight", "--spec", str(spec))
    assert out.rc == 0 and "OK: schedulable nvidia.com/gpu: 16 on 2 node(s)" in out.out, out
