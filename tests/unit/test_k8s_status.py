"""Status mapping from recorded kubectl JSON (shapes as `kubectl get jobs,pods -o json` prints them)."""
from __future__ import annotations

import pytest

from taobank.platforms.kubernetes import status
from taobank.platforms.kubernetes.status import observe
from taobank.states import next_move

UID = "1111-2222"


def job(conditions=(), active=0, succeeded=0, failed=0, uid=UID, deleting=False):
    meta = {"name": "dino-train-1a2b3c4d", "uid": uid, "labels": {"tao-job-id": "dino-train-1a2b3c4d"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"kind": "Job", "metadata": meta,
            "status": {"conditions": [dict(c) for c in conditions], "active": active, "succeeded": succeeded, "failed": failed}}


def cond(ctype, status_="True", reason=None, message=None):
    c = {"type": ctype, "status": status_}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def pod(name="p-0", phase="Pending", rank=None, owner=UID, conditions=(), statuses=(), init=(), reason=None):
    meta = {"name": name, "labels": {"tao-job-id": "dino-train-1a2b3c4d"}, "ownerReferences": [{"uid": owner}]}
    if rank is not None:
        meta["labels"][status.INDEX_LABEL] = str(rank)
    st = {"phase": phase, "conditions": list(conditions), "containerStatuses": list(statuses),
          "initContainerStatuses": list(init)}
    if reason:
        st["reason"] = reason
    return {"kind": "Pod", "metadata": meta, "spec": {"nodeName": "tao-gpu-0"}, "status": st}


def terminated(code, reason="Error", name="main"):
    return {"name": name, "image": "img", "state": {"terminated": {"exitCode": code, "reason": reason}}}


def waiting(reason, message="", name="main"):
    return {"name": name, "image": "nvcr.io/x:1", "state": {"waiting": {"reason": reason, "message": message}}}


def test_conditions_selected_by_type_not_position():
    # Kubernetes >= 1.31 puts FailureTarget / SuccessCriteriaMet before Failed / Complete
    j = job([cond("SuccessCriteriaMet"), cond("Complete")], succeeded=1)
    assert observe(j, []).state == "COMPLETE"
    j = job([cond("FailureTarget", reason="BackoffLimitExceeded"), cond("Failed", reason="BackoffLimitExceeded")], failed=1)
    assert observe(j, [pod(phase="Failed", statuses=[terminated(3)])]).state == "ERROR"
    # a False condition first must not win either
    j = job([cond("Failed", "False"), cond("Complete")], succeeded=1)
    assert observe(j, []).state == "COMPLETE"


def test_running_when_all_live_pods_run():
    o = observe(job(active=2), [pod("a", "Running", 0), pod("b", "Running", 1)])
    assert o.state == "RUNNING" and [p["rank"] for p in o.pods] == [0, 1]


@pytest.mark.parametrize("message,reason", [
    ("0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu.", "InsufficientGPU"),
    ('0/3 nodes are available: persistentvolumeclaim "nope" not found.', "MissingPVC"),
    ("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.", "NoMatchingNode"),
])
def test_pending_scheduler_diagnosis(message, reason):
    p = pod(conditions=[cond("PodScheduled", "False", "Unschedulable", message)])
    o = observe(job(active=1), [p])
    assert (o.state, o.reason) == ("PENDING", reason) and message in o.message


@pytest.mark.parametrize("why", ["ImagePullBackOff", "ErrImagePull"])
def test_pending_image_pull(why):
    o = observe(job(active=1), [pod(statuses=[waiting(why, "pull access denied")])])
    assert (o.state, o.reason) == ("PENDING", why) and "imagePullSecrets" in o.message


def test_pending_missing_secret():
    o = observe(job(active=1), [pod(statuses=[waiting("CreateContainerConfigError", 'secret "tao-creds-x" not found')])])
    assert o.state == "PENDING" and o.reason == "CreateContainerConfigError"


def test_error_oomkilled_is_infra():
    j = job([cond("Failed", reason="BackoffLimitExceeded")], failed=1)
    o = observe(j, [pod(phase="Failed", statuses=[terminated(137, "OOMKilled")])])
    assert (o.state, o.err_class, o.reason, o.exit_code) == ("ERROR", "ERR_INFRA", "OOMKilled", 137)


def test_error_eviction_and_disruption_are_infra():
    j = job([cond("Failed")], failed=1)
    o = observe(j, [pod(phase="Failed", reason="Evicted")])
    assert o.err_class == "ERR_INFRA"
    o = observe(j, [pod(phase="Failed", conditions=[cond("DisruptionTarget", reason="PreemptionByScheduler")],
                        statuses=[terminated(143)])])
    assert o.err_class == "ERR_INFRA" and o.reason == "PreemptionByScheduler"


def test_error_exit_code_is_program_with_log_tail():
    j = job([cond("Failed")], failed=1)
    p = pod("p-0", phase="Failed", statuses=[terminated(3)])
    o = observe(j, [p], logs={"p-0": "step 1\nTraceback ...\nValueError: bad spec\n"})
    assert (o.err_class, o.exit_code) == ("ERR_PROGRAM", 3)
    assert "code 3" in o.message and "ValueError: bad spec" in o.message


def test_error_log_with_infra_pattern_is_infra():
    from taobank import failures

    j = job([cond("Failed")], failed=1)
    sample = "NCCL WARN NET/Socket : connection closed by remote peer\n"
    if failures.infra_log_match(sample) is None:
        pytest.skip("core infra patterns do not cover this sample")  # pattern list is the core's
    o = observe(j, [pod("p-0", phase="Failed", statuses=[terminated(1)])], logs={"p-0": sample})
    assert o.err_class == "ERR_INFRA"


def test_upload_sidecar_failure_after_clean_exit_is_infra():
    j = job([cond("Failed")], failed=1)
    o = observe(j, [pod(phase="Failed", statuses=[terminated(0, "Completed"), terminated(1, name="upload")])])
    assert (o.err_class, o.reason) == ("ERR_INFRA", "UploadFailed")


def test_main_exit_reported_before_sidecar():
    j = job([cond("Failed")], failed=1)
    o = observe(j, [pod(phase="Failed", statuses=[terminated(1, name="upload"), terminated(3)])])
    assert o.exit_code == 3 and o.err_class == "ERR_PROGRAM"


def test_job_gone_is_unknown_and_terminal_record_stays():
    o = observe(None, [])
    assert o.state == "UNKNOWN"
    assert next_move("COMPLETE", "UNKNOWN", o.message).state is None
    assert next_move("RUNNING", "UNKNOWN", o.message).state == "UNKNOWN"
    assert next_move("UNKNOWN", "PENDING", "waiting").state == "UNKNOWN"  # the table forbids UNKNOWN -> PENDING
    assert next_move("RUNNING", "RUNNING", "x").state == "RUNNING"


def test_other_uid_job_is_not_ours():
    jobs = [job(uid="other")]
    assert status.pick_job(jobs, UID, "dino-train-1a2b3c4d") is None
    assert status.pick_job([job()], UID, None)["metadata"]["uid"] == UID
    mine, theirs = pod("a"), pod("b", owner="other")
    assert status.pods_of(job(), [mine, theirs]) == [mine]


def test_group_items_splits_one_list_call():
    items = [job(), pod("a"), {"kind": "Pod", "metadata": {"name": "x", "labels": {}}}]
    g = status.group_items(items)
    assert list(g) == ["dino-train-1a2b3c4d"] and len(g["dino-train-1a2b3c4d"]["pods"]) == 1


def test_deleting_job_reads_canceled():
    assert observe(job(active=1, deleting=True), []).state == "CANCELED"
