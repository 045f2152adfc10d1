"""Kueue queues on Kubernetes against the fake kubectl: --queue / spec queue label the Job and create it
suspended, the namespace's default LocalQueue is used when none is named, bad queues are refused before anything
is created, the capacity gate steps aside, and status reads why Kueue holds a Job in ONE more call."""
from __future__ import annotations

import json

import pytest

from fakeproc import echo_applied, items, job, k8s_cluster, k8s_record, node
from taobank.core import platform
from taobank import records
from taobank.campaign import sweeps
from taobank.contract import SubmitOptions
from taobank.errors import TaoError
from taobank.platforms.kubernetes import gates
from taobank.platforms.kubernetes.spec import spec_from_flags

SPEC = {"image": "nvcr.io/nvidia/tao/tao-toolkit:x", "command": "echo hi", "gpus": 1, "no_results": True}
LQ, CQ = "team-a", "gpu-cq"
QUEUES_READ = f"{gates.LOCAL_QUEUES},{gates.CLUSTER_QUEUES}"


def local_queue(name: str, cq: str = CQ) -> dict:
    return {"apiVersion": gates.LOCAL_QUEUES, "kind": "LocalQueue", "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterQueue": cq}}


def cluster_queue(gpus: int = 4, used: int = 1) -> dict:
    return {"kind": "ClusterQueue", "metadata": {"name": CQ}, "spec": {"resourceGroups": [{
        "coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": "f", "resources": [
            {"name": "cpu", "nominalQuota": "100"}, {"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]},
            "status": {"flavorsReservation": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "total": str(used)}]}]}}


def kueue_cluster(fake, *lqs: dict, cq: dict | None = None) -> None:
    """The usual fake cluster, with Kueue: these LocalQueues in the namespace and the ClusterQueue readable."""
    k8s_cluster(fake)
    fake.kubectl("get", gates.LOCAL_QUEUES, answer=items(list(lqs)))
    fake.kubectl("get", gates.CLUSTER_QUEUES, answer=cq or cluster_queue())
    fake.kubectl("get", gates.GATE_READ, answer=items([*lqs, cq or cluster_queue(), node("gpu-0", 8)]))
    fake.kubectl("get", QUEUES_READ, answer=items([*lqs, cq or cluster_queue()]))


def created_job(fake) -> dict:
    call = fake.kubectl_calls("create", "-f")[0]  # the Job first (what it owns follows, owned by it)
    return json.loads(call.stdin)["items"][0]


def words(fake) -> list[str]:
    return [" ".join(c.words[:2]) for c in fake.of("kubectl")]


def test_label_jobs_labels_and_suspends_only_the_job_and_copies():
    objs = [{"kind": "Job", "metadata": {"name": "j", "labels": {"a": "b"}}, "spec": {}},
            {"kind": "Service", "metadata": {"name": "s"}}]
    out = gates.label_jobs(objs, "q", partial=True)
    assert out[0]["metadata"]["labels"] == {"a": "b", gates.QUEUE_LABEL: "q"} and out[0]["spec"]["suspend"] is True
    assert out[0]["metadata"]["annotations"] == {gates.MIN_PARALLELISM_ANNOTATION: "1"}
    assert out[1] is objs[1] and "suspend" not in objs[0]["spec"]  # the input is not changed


def test_queue_flag_reaches_the_spec_and_the_schema_checks_it():
    assert spec_from_flags(None, {"image": "i", "command": "c", "queue": LQ})["queue"] == LQ
    with pytest.raises(TaoError):
        spec_from_flags(None, {"image": "i", "command": "c", "queue": "Bad Queue"})


def test_a_queued_submit_labels_the_job_suspended_and_skips_the_capacity_gate(fake, state_dir):
    kueue_cluster(fake, local_queue(LQ))
    view = platform.get("kubernetes").submit({**SPEC, "queue": LQ}, SubmitOptions())
    job_ = created_job(fake)
    assert job_["metadata"]["labels"][gates.QUEUE_LABEL] == LQ and job_["spec"]["suspend"] is True
    assert "get nodes,pods" not in words(fake)  # the quota is the queue's, not the nodes'
    dry = [c for c in fake.kubectl_calls("create", "--dry-run=server")][0]
    assert json.loads(dry.stdin)["items"][0]["spec"]["suspend"] is True  # the server judged the very Job created
    rec = records.load(view.id)
    assert (rec["backend"]["queue"], rec["backend"]["cluster_queue"]) == (LQ, CQ)
    assert f"LocalQueue {LQ} -> ClusterQueue {CQ} (GPU quota 4, 1 in use)" in view.extra["gate"]


def test_the_namespaces_default_local_queue_is_used_when_none_is_named_and_said(fake, state_dir):
    kueue_cluster(fake, local_queue("default"), local_queue(LQ))
    view = platform.get("kubernetes").submit(SPEC, SubmitOptions())
    assert created_job(fake)["metadata"]["labels"][gates.QUEUE_LABEL] == "default"
    (note,) = [n for n in view.extra["gate_notes"] if "default LocalQueue" in n]
    assert note.startswith("queued: no --queue given") and "--queue NAME" in note


def test_no_queue_named_and_no_default_queue_is_a_plain_submit(fake, state_dir):
    kueue_cluster(fake, local_queue(LQ))
    view = platform.get("kubernetes").submit(SPEC, SubmitOptions())
    job_ = created_job(fake)
    assert gates.QUEUE_LABEL not in job_["metadata"]["labels"] and "suspend" not in job_["spec"]
    # the capacity gate as before, on the nodes and pods of the gates' one read
    assert "get nodes,pods" not in words(fake) and "gpu-0 8/8 free" in view.extra["gate"]


@pytest.mark.parametrize("lqs, message", [
    ([local_queue(LQ)], "--queue team-b: no LocalQueue team-b in namespace default (its LocalQueues: team-a; "),
    ([], "--queue team-b: no LocalQueue team-b in namespace default (it has none; "),
])
def test_an_unknown_queue_is_refused_in_one_line_before_anything(fake, state_dir, lqs, message):
    kueue_cluster(fake, *lqs)
    with pytest.raises(TaoError) as exc:
        platform.get("kubernetes").submit({**SPEC, "queue": "team-b"}, SubmitOptions())
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)
    assert records.list_records() == [] and not fake.kubectl_calls("create")


def test_a_queue_on_a_cluster_without_kueue_is_refused(fake, state_dir):
    k8s_cluster(fake)  # no LocalQueue API
    with pytest.raises(TaoError, match=r"^--queue team-a: this cluster has no Kueue \(no LocalQueue API\)"):
        platform.get("kubernetes").submit({**SPEC, "queue": LQ}, SubmitOptions())
    assert records.list_records() == [] and not fake.kubectl_calls("create")


def test_a_request_over_the_quota_is_warned_naming_it_and_goes_on(fake, state_dir):
    kueue_cluster(fake, local_queue(LQ), cq=cluster_queue(gpus=1, used=0))
    fake.kubectl("config", "view", answer={"current-context": "c", "clusters": [{"cluster": {"server": "https://k"}}]})
    view = platform.get("kubernetes").submit({**SPEC, "queue": LQ, "nodes": 2}, SubmitOptions(skip_nccl_probe=True))
    (warning,) = [n for n in view.extra["gate_notes"] if n.startswith("warning: ")]
    assert "asks 2 nvidia.com/gpu at once but ClusterQueue gpu-cq has a GPU quota of 1" in warning
    job_ = created_job(fake)  # ONE Job, ONE Workload: its 2 pods are admitted together or not at all
    assert job_["spec"]["suspend"] is True and job_["spec"]["parallelism"] == 2


def test_an_unreadable_cluster_queue_leaves_the_quota_unknown(fake, state_dir):
    kueue_cluster(fake, local_queue(LQ))
    forbidden = 'Error from server (Forbidden): clusterqueues is forbidden'
    fake.kubectl("get", QUEUES_READ, rc=1, stderr=forbidden)  # so the one read is refused: step by step
    fake.kubectl("get", gates.CLUSTER_QUEUES, rc=1, stderr=forbidden)
    view = platform.get("kubernetes").submit({**SPEC, "queue": LQ}, SubmitOptions())
    assert "GPU quota not readable" in view.extra["gate"]


def test_a_queued_sweep_is_one_suspended_workload_admitted_partially(fake, state_dir):
    kueue_cluster(fake, local_queue(LQ))
    fake.kubectl("create", "-f", answer=echo_applied())
    done = sweeps.submit("kubernetes", {**SPEC, "queue": LQ}, SubmitOptions(),
                         [{"train.optim.lr": f"0.{i}"} for i in range(3)], 2)
    (call,) = fake.kubectl_calls("create", "-f")
    job_ = json.loads(call.stdin)["items"][0]
    (owned,) = fake.kubectl_calls("apply", "--server-side")
    assert [o["kind"] for o in json.loads(owned.stdin)["items"]] == ["ConfigMap"]  # Kueue unsuspends it, not us
    assert job_["spec"]["completionMode"] == "Indexed" and job_["spec"]["suspend"] is True
    assert job_["metadata"]["labels"][gates.QUEUE_LABEL] == LQ
    assert job_["metadata"]["annotations"][gates.MIN_PARALLELISM_ANNOTATION] == "1"
    assert all(records.load(v.id)["backend"]["queue"] == LQ for v in done.views)


# ------------------------------------------------------------------ status
def held(jid: str, uid: str) -> dict:
    j = job(jid, uid, condition="Suspended")
    j["metadata"]["labels"][gates.QUEUE_LABEL] = LQ
    j["spec"]["suspend"] = True
    return j


def workload(uid: str, **conds: tuple[str, str, str]) -> dict:
    return {"kind": "Workload", "metadata": {"name": f"job-{uid}", "labels": {gates.JOB_UID_LABEL: uid}},
            "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": m}
                                      for t, (s, r, m) in conds.items()]}}


def queued_record() -> dict:
    rec = k8s_record(state="PENDING")
    return records.mark(rec["id"], "PENDING", backend={"queue": LQ, "cluster_queue": CQ})


def test_status_says_queued_waiting_for_quota_with_one_workloads_call_for_all(fake, state_dir):
    recs = [queued_record() for _ in range(3)]
    fake.kubectl("get", "jobs,pods", answer=items([held(r["id"], f"uid-{r['id']}") for r in recs]))
    msg = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor f"
    fake.kubectl("get", gates.WORKLOADS, answer=items(
        [workload(f"uid-{r['id']}", QuotaReserved=("False", "Pending", msg)) for r in recs]))
    views = platform.status("kubernetes")
    assert [v.state for v in views] == ["PENDING"] * 3
    assert all(v.message == f"QUEUED: waiting for quota in ClusterQueue {CQ}: {msg}" for v in views), views[0].message
    (wl_call,) = fake.kubectl_calls("get", gates.WORKLOADS)
    assert wl_call.words[2:4] == ["-l", f"{gates.JOB_UID_LABEL} in ({','.join(sorted('uid-' + r['id'] for r in recs))})"]
    assert len(fake.of("kubectl")) == 2


def test_status_of_a_job_kueue_does_not_hold_costs_no_workloads_call(fake, state_dir):
    rec = queued_record()
    running = job(rec["id"], f"uid-{rec['id']}")
    running["metadata"]["labels"][gates.QUEUE_LABEL] = LQ  # admitted: unsuspended
    fake.kubectl("get", "jobs,pods", answer=items([running]))
    platform.status("kubernetes", [rec["id"]])
    assert not fake.kubectl_calls("get", gates.WORKLOADS)


def test_status_of_an_unqueued_suspended_job_stays_suspended(fake, state_dir):
    rec = k8s_record(state="PENDING")
    fake.kubectl("get", "jobs,pods", answer=items([job(rec["id"], f"uid-{rec['id']}", condition="Suspended")]))
    (view,) = platform.status("kubernetes", [rec["id"]])
    assert view.message == "the Job is suspended" and not fake.kubectl_calls("get", gates.WORKLOADS)


@pytest.mark.parametrize("conds, reason, text", [
    ({"QuotaReserved": ("False", "Inadmissible", "LocalQueue team-a is stopped")}, "Inadmissible",
     "QUEUED, inadmissible: LocalQueue team-a is stopped"),
    ({"Evicted": ("True", "Preempted", "Preempted to accommodate a higher priority Workload")}, "Evicted",
     "QUEUED again: evicted by Kueue (Preempted: Preempted to accommodate a higher priority Workload); it waits for "
     "quota in ClusterQueue gpu-cq"),
])
def test_explain_inadmissible_and_evicted(conds, reason, text):
    j = held("j", "u")
    assert gates.explain(j, workload("u", **conds), CQ) == (reason, text)


def test_explain_before_kueue_made_the_workload():
    assert gates.explain(held("j", "u"), None, None) == (
        "Queued", "QUEUED in LocalQueue team-a: waiting for Kueue to make its Workload")


def test_a_preempted_running_job_goes_back_to_pending_with_kueues_reason(fake, state_dir):
    rec = queued_record()
    records.mark(rec["id"], "RUNNING")
    fake.kubectl("get", "jobs,pods", answer=items([held(rec["id"], f"uid-{rec['id']}")]))
    fake.kubectl("get", gates.WORKLOADS, answer=items([workload(
        f"uid-{rec['id']}", Evicted=("True", "Preempted", "preempted"))]))
    (view,) = platform.status("kubernetes", [rec["id"]])
    assert view.state == "PENDING" and view.message.startswith("QUEUED again: evicted by Kueue (Preempted")


def test_gpu_quota_and_usage_read_from_the_queues():
    assert gates.gpu_quota(cluster_queue(gpus=3)) == 3
    assert gates.gpu_quota({"spec": {"resourceGroups": [{"flavors": [{"resources": [{"name": "cpu"}]}]}]}}) is None
    assert gates.gpu_usage(cluster_queue(used=2)["status"]) == 2


def test_a_named_queue_reads_no_node_or_pod_even_when_they_could_never_fit(fake, state_dir):
    kueue_cluster(fake, local_queue(LQ), cq=cluster_queue(gpus=64))
    fake.kubectl("get", "nodes,pods", answer=items([node("gpu-0", 1)]))  # the nodes alone would refuse 8 GPUs
    platform.get("kubernetes").submit({**SPEC, "queue": LQ, "gpus": 8}, SubmitOptions())
    assert created_job(fake)["spec"]["suspend"] is True
    assert [w for w in words(fake) if w.startswith("get ")] == [f"get {QUEUES_READ}"]  # one read, no pods


def test_a_user_who_may_not_list_it_all_is_remembered_and_read_step_by_step_without_a_refused_read(fake, state_dir):
    kueue_cluster(fake, local_queue(LQ))
    fake.kubectl("get", gates.GATE_READ, rc=1, stderr="Error from server (Forbidden): clusterqueues.kueue.x-k8s.io "
                 'is forbidden: User "u" cannot list resource "clusterqueues" at the cluster scope')
    submit = platform.get("kubernetes").submit
    submit(SPEC, SubmitOptions())
    assert [w for w in words(fake) if w.startswith("get ")] == [
        f"get {gates.GATE_READ}", f"get {gates.LOCAL_QUEUES}", "get nodes,pods"]
    n = len(fake.calls)
    submit(SPEC, SubmitOptions())
    assert gate_reads(fake, n) == [f"get {gates.LOCAL_QUEUES}", "get nodes,pods"]  # as before the one read


def test_a_user_who_may_not_list_local_queues_submits_unqueued_with_a_warning_unless_a_queue_is_named(fake, state_dir):
    k8s_cluster(fake)
    forbidden = ('Error from server (Forbidden): localqueues.kueue.x-k8s.io is forbidden: User "u" cannot list '
                 'resource "localqueues"')
    fake.kubectl("get", gates.GATE_READ, rc=1, stderr=forbidden)
    fake.kubectl("get", QUEUES_READ, rc=1, stderr=forbidden)
    fake.kubectl("get", gates.LOCAL_QUEUES, rc=1, stderr=forbidden)
    view = platform.get("kubernetes").submit(SPEC, SubmitOptions())
    assert view.extra["gate_notes"] == ["warning: not queued: you may not list Kueue LocalQueues in namespace default, "
                                        "so a default one is not used either"]
    assert "suspend" not in created_job(fake)["spec"]
    with pytest.raises(TaoError, match="you may not list Kueue LocalQueues in namespace default: ask for"):
        platform.get("kubernetes").submit({**SPEC, "queue": LQ}, SubmitOptions())


def gate_reads(fake, since: int = 0) -> list[str]:
    return [" ".join(c.words[:2]) for c in fake.calls[since:] if c.program == "kubectl" and c.words[0] == "get"]


def test_a_cluster_without_kueue_is_asked_once_then_remembered_for_a_while(fake, state_dir, monkeypatch, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("current-context: a\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    k8s_cluster(fake)
    submit = platform.get("kubernetes").submit
    submit(SPEC, SubmitOptions())
    assert gate_reads(fake) == [f"get {gates.GATE_READ}", "get nodes,pods"]
    n = len(fake.calls)
    submit(SPEC, SubmitOptions())  # remembered: nodes and pods alone
    assert gate_reads(fake, n) == ["get nodes,pods"]
    n = len(fake.calls)
    with pytest.raises(TaoError, match="this cluster has no Kueue"):  # a named queue always asks the cluster
        submit({**SPEC, "queue": LQ}, SubmitOptions())
    assert gate_reads(fake, n) == [f"get {QUEUES_READ}"]
    n = len(fake.calls)
    kubeconfig.write_text("current-context: b, a longer file\n")  # another cluster (or context): asked again
    submit(SPEC, SubmitOptions())
    assert gate_reads(fake, n) == [f"get {gates.GATE_READ}", "get nodes,pods"]
    n = len(fake.calls)
    monkeypatch.setattr(gates, "MEMORY_TTL_S", 0)  # what was learnt has expired: asked again
    submit(SPEC, SubmitOptions())
    assert gate_reads(fake, n) == [f"get {gates.GATE_READ}", "get nodes,pods"]


def test_kueue_installed_later_is_found_once_the_memory_expires_and_a_damaged_memory_is_no_error(fake, state_dir,
                                                                                                monkeypatch):
    k8s_cluster(fake)
    platform.get("kubernetes").submit(SPEC, SubmitOptions())
    assert gates.remembered(gates.Kubectl()) == gates.ABSENT
    (state_dir / gates.MEMORY_FILE).write_text("{not json")
    assert gates.remembered(gates.Kubectl()) is None
    kueue_cluster(fake, local_queue("default"))  # Kueue now, with a default LocalQueue
    view = platform.get("kubernetes").submit(SPEC, SubmitOptions())
    job_ = json.loads(fake.kubectl_calls("create", "-f")[-1].stdin)["items"][0]
    assert job_["metadata"]["labels"][gates.QUEUE_LABEL] == "default"
    assert "default LocalQueue" in " ".join(view.extra["gate_notes"])
    assert gates.remembered(gates.Kubectl()) is None
