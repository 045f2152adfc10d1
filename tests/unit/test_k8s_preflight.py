"""tao_k8s.py preflight against the fake kubectl: true GPU figures, can-i, PVC Bound, version skew."""
from __future__ import annotations

import json

from fakeproc import NO_KUEUE, items
from test_k8s_gates import node

from taobank.platforms.kubernetes import preflight

V = {"clientVersion": {"gitVersion": "v1.34.1"}, "serverVersion": {"gitVersion": "v1.34.4"}}


def cluster(fake, *, version=V, nodes=None, can_i="yes\n") -> None:
    fake.kubectl("version", answer=version)
    fake.kubectl("get", "namespace", answer="namespace/default\n")
    fake.kubectl("auth", "can-i", answer=can_i)
    fake.kubectl("get", "nodes", answer=items(nodes if nodes is not None else [node("a"), node("b")]))
    fake.kubectl("get", "pvc", "ws", answer={"status": {"phase": "Bound"}})
    fake.kubectl("get", "localqueues.kueue.x-k8s.io", rc=1, stderr=NO_KUEUE)


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
    from taobank.platforms.kubernetes.kubectl import Kubectl

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


def test_unreachable_cluster_lists_each_sites_kubeconfig_command(fake, cli):
    fake.kubectl("version", rc=1, answer=json.dumps({"clientVersion": {"gitVersion": "v1.34.0"}}),
                 stderr="The connection to the server localhost:8080 was refused")
    out = cli("tao_k8s.py", "preflight")
    first, *rest = out.out.splitlines()
    assert first.startswith("MISSING: no reachable cluster") and len(first) < 200
    assert "  EKS: aws eks update-kubeconfig --name CLUSTER --region REGION" in rest
    assert "  GKE: gcloud container clusters get-credentials CLUSTER --region REGION" in rest
    assert "  AKS: az aks get-credentials --resource-group RG --name CLUSTER" in rest
    (local,) = [line for line in rest if line.startswith("  local: ")]
    assert local.endswith('scripts/local_cluster.py env kubernetes)"') and local.startswith('  local: eval "$(python3 ')
    (found,) = json.loads(cli("tao_k8s.py", "preflight", "--json").out)
    assert found["level"] == "MISSING" and set(found["data"]["kubeconfig_commands"]) == {"EKS", "GKE", "AKS", "local"}
    assert len(found["details"]) == 4


def test_gpu_nodes_say_which_can_run_the_job_and_why_not(fake, cli, tmp_path):
    taint = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"},
             {"key": "soft", "effect": "PreferNoSchedule"}]
    runs = {"site.example/runs-containers": "true"}
    cluster(fake, nodes=[node("a", labels=runs), node("b"), node("c", cordoned=True, labels=runs),
                         node("d", taints=taint, labels=runs), node("cpu", gpus=0)])
    spec = tmp_path / "job.yaml"
    spec.write_text("image: i\nnode_selector: {site.example/runs-containers: 'true'}\n")
    out = cli("tao_k8s.py", "preflight", "--spec", str(spec))
    assert out.rc == 0, out
    lines = out.out.splitlines()
    at = lines.index("INFO: GPU nodes that can run the job with node_selector site.example/runs-containers=true: 1 of 4")
    assert lines[at + 1:at + 5] == [
        "  a: 8 GPUs, can run it",
        "  b: 8 GPUs, node_selector does not match",
        "  c: 8 GPUs, cordoned",
        "  d: 8 GPUs, untolerated taint(s) dedicated=infer:NoSchedule",
    ]
    (nodes,) = [f for f in json.loads(cli("tao_k8s.py", "preflight", "--spec", str(spec), "--json").out)
                if f["check"] == "nodes"]
    by = {r["name"]: r for r in nodes["data"]}
    assert set(by) == {"a", "b", "c", "d"} and by["a"]["can_run"] and by["b"]["matches_node_selector"] is False
    assert by["d"]["untolerated_taints"] == ["dedicated=infer:NoSchedule"] and by["d"]["matches_node_selector"]


def test_gpu_node_list_without_a_selector_and_capped_in_text(fake, cli):
    cluster(fake, nodes=[node(f"n{i:02d}") for i in range(preflight.MAX_NODE_LINES + 3)])
    out = cli("tao_k8s.py", "preflight")
    assert f"INFO: GPU nodes that can run the job: {preflight.MAX_NODE_LINES + 3} of " in out.out
    assert "  ... 3 more GPU nodes (--json lists all)" in out.out
    assert "matches_node_selector" not in out.out


def test_queues_lists_each_local_queue_with_its_quota_and_says_where_a_submit_goes(fake, cli):
    cluster(fake)
    lq = {"metadata": {"name": "default"}, "spec": {"clusterQueue": "cq"}, "status": {"pendingWorkloads": 2}}
    fake.kubectl("get", "localqueues.kueue.x-k8s.io", answer=items([lq]))
    cq = {"metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"flavors": [{"resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}]},
          "status": {"flavorsReservation": [{"resources": [{"name": "nvidia.com/gpu", "total": "3"}]}]}}
    fake.kubectl("get", "clusterqueues.kueue.x-k8s.io", "cq", answer=cq)
    (found,) = [f for f in preflight.run(preflight.Kubectl("default"), ["ws"]) if f.check == "queues"]
    assert (found.level, found.message) == ("OK", "Kueue LocalQueues in namespace default: 1; a submit goes to "
                                                  "LocalQueue default")
    assert found.details == ("default -> ClusterQueue cq: GPU quota 4, 3 in use",)
    (missing,) = [f for f in preflight.run(preflight.Kubectl("default"), ["ws"], queue="team") if f.check == "queues"]
    assert missing.level == "MISSING" and missing.message.startswith("--queue team: no LocalQueue team in namespace")


def test_queues_without_kueue_is_info_and_missing_when_a_queue_is_named(fake, cli):
    cluster(fake)
    (found,) = [f for f in preflight.run(preflight.Kubectl("default")) if f.check == "queues"]
    assert found.level == "INFO" and found.message == "no Kueue LocalQueue in namespace default: not queued"
    (found,) = [f for f in preflight.run(preflight.Kubectl("default"), placement={"queue": "q"}) if f.check == "queues"]
    assert found.level == "MISSING" and found.message.startswith("--queue q: this cluster has no Kueue")


#: What a cluster's text may hold for a terminal: CSI (7-bit and C1), OSC (a title, a hyperlink), BEL, a line end.
HOSTILE = "\x1b[2J\x1b]0;pwned\x07\x9b31m\x1b]8;;http://evil.example\x1b\\x\nOK: forged"
RAW = ("\x1b", "\x9b", "\x07", "\nOK: forged")


def test_cluster_text_reaches_the_terminal_cleaned(fake, cli):
    """Node, taint, LocalQueue/ClusterQueue and PVC text and kubectl's 'Error from server' (an admission
    webhook's words) are cleaned where they enter (the kubectl client), so no finding prints them raw."""
    taint = [{"key": "k" + HOSTILE, "value": "v" + HOSTILE, "effect": "NoSchedule"}]
    cluster(fake, nodes=[node("a" + HOSTILE), node("b", cordoned=True), node("c" + HOSTILE, taints=taint)])
    lq = {"metadata": {"name": "default"}, "spec": {"clusterQueue": "cq" + HOSTILE}}
    fake.kubectl("get", "localqueues.kueue.x-k8s.io", answer=items([lq]))
    fake.kubectl("get", "clusterqueues.kueue.x-k8s.io", rc=1,
                 stderr=f'Error from server (NotFound): clusterqueues "x{HOSTILE}" not found\n')
    fake.kubectl("get", "pvc", "ws", answer={"status": {"phase": "Pending" + HOSTILE}})
    out = cli("tao_k8s.py", "preflight", "--pvc", "ws")
    shown = out.out + out.err
    assert "\\x1b[2J" in shown and "cq\\x1b[2J" in shown and "Pending\\x1b[2J" in shown, shown
    assert not [r for r in RAW if r in shown], shown
    fake.kubectl("get", "localqueues.kueue.x-k8s.io", rc=1,
                 stderr=f'Error from server (InternalError): admission webhook "q.example" denied: {HOSTILE[:-11]}\n')
    out = cli("tao_k8s.py", "preflight", "--pvc", "ws")
    shown = out.out + out.err
    assert "admission webhook" in shown and not [r for r in RAW if r in shown], shown
    data = json.loads(cli("tao_k8s.py", "preflight", "--pvc", "ws", "--json").out)
    assert not [r for r in RAW if r in json.dumps(data, ensure_ascii=False)]
