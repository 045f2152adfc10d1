"""Against the local cluster's real Kueue (built from its module, started by ``up``): jobs submitted with --queue
wait for the ClusterQueue's quota, are admitted by Kueue alone, and run; a 2-node job over the quota stays queued
whole; cancel leaves no Workload; bad queues are refused before anything is created.

Each test makes its OWN ClusterQueue (1 GPU of quota) and LocalQueue with unique names: other tests' GPU use and
the cluster's own ``tao-local`` queue never matter.
"""
from __future__ import annotations

import json
import secrets
import time

import pytest
from k8s_verbs_support import NAMESPACE, ON_KWOK, k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk
from testclusters.kubernetes import kueue

pytestmark = [pytest.mark.e2e, pytest.mark.kubernetes]

BUSYBOX = "docker.io/library/busybox:1.37.0"
BASE = ["--image", BUSYBOX, "--network-arch", "deformable_detr", "--action", "train", "--no-results", *ON_KWOK,
        "--command", "true"]
WRITES = ("create", "apply", "patch", "delete", "replace", "label", "annotate", "scale")


@pytest.fixture()
def queue(k8s):
    """A ClusterQueue with 1 GPU of quota and a LocalQueue pointing at it, both unique to this test."""
    name = f"e2e-kq-{secrets.token_hex(4)}"
    objs = kueue.queue_objects(cluster_queue=name, local_queue=name, namespace=NAMESPACE, flavor=kueue.LOCAL_FLAVOR,
                               gpus=1)[1:]  # the cluster's flavor: every node
    k8s.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    end = time.time() + 60
    while k8s.kubectl("get", "clusterqueue", name, "-o", "jsonpath={.status.conditions[?(@.type==\"Active\")]"
                      ".status}").stdout.strip() != "True":
        assert time.time() < end, f"ClusterQueue {name} never became Active"
        time.sleep(1)
    yield name
    k8s.cleanup()
    k8s.kubectl("delete", "localqueue", name, "--ignore-not-found", "--wait=false", check=False)
    k8s.kubectl("delete", "clusterqueue", name, "--ignore-not-found", "--wait=false", check=False)


def workloads_of(k8s, uid: str) -> list[dict]:
    return k8s.kjson("get", "workloads", "-l", f"kueue.x-k8s.io/job-uid={uid}").get("items") or []


def pods_of(k8s, job_id: str) -> list[dict]:
    return k8s.kjson("get", "pods", "-l", f"tao-job-id={job_id}").get("items") or []


def bank_writes(k8s, since: int) -> list[list[str]]:
    """kubectl calls of the bank since call ``since`` that change the cluster."""
    return [c for c in k8s.calls()[since:] if c[:1] == ["kubectl"] and any(w in c for w in WRITES)]


def test_a_second_job_waits_for_the_quota_and_kueue_alone_admits_it_when_the_first_ends(k8s, queue):
    first = k8s.submit(*BASE, "--gpus", "1", "--queue", queue, "--pod-annotation", f"{lk.RUN_DURATION_ANNOTATION}=25s")
    assert first["backend"]["queue"] == queue and first["backend"]["cluster_queue"] == queue
    k8s.wait(first["id"], lambda s: s["state"] == "RUNNING", timeout=60)
    second = k8s.submit(*BASE, "--gpus", "1", "--queue", queue, "--pod-annotation", f"{lk.RUN_DURATION_ANNOTATION}=2s")
    since = len(k8s.calls())
    job = k8s.kjson("get", "job", second["name"])
    assert job["metadata"]["labels"][kueue.QUEUE_LABEL] == queue and job["spec"]["suspend"] is True
    st = k8s.wait(second["id"], lambda s: "QUEUED" in (s.get("message") or ""), timeout=30)
    assert st["state"] == "PENDING" and st["message"].startswith(f"QUEUED: waiting for quota in ClusterQueue {queue}")
    assert "insufficient unused quota for nvidia.com/gpu" in st["message"], st  # Kueue's own words
    assert pods_of(k8s, second["id"]) == []
    k8s.wait(first["id"], lambda s: s["state"] == "COMPLETE", timeout=90)
    done = k8s.wait(second["id"], lambda s: s["state"] in ("COMPLETE", "ERROR"), timeout=120)
    assert done["state"] == "COMPLETE", done
    # between the second's submit and its end the bank only read: Kueue admitted it, the Job controller ran it
    assert bank_writes(k8s, since) == []
    (wl,) = workloads_of(k8s, second["uid"])
    assert wl["status"]["admission"]["clusterQueue"] == queue
    assert any(c["type"] == "Admitted" and c["status"] == "True" for c in wl["status"]["conditions"])
    assert k8s.kjson("get", "job", second["name"])["spec"]["suspend"] is False  # unsuspended by Kueue


def test_a_two_node_job_over_the_quota_stays_queued_whole_and_cancel_leaves_no_workload(k8s, queue):
    proc = k8s.tao("submit", "--json", *BASE, "--gpus", "1", "--nodes", "2", "--skip-nccl-probe", "--queue", queue)
    out = json.loads(proc.stdout)
    k8s.ids.append(out["id"])
    assert f"asks 2 nvidia.com/gpu at once but ClusterQueue {queue} has a GPU quota of 1" in proc.stderr
    end = time.time() + 60
    while not workloads_of(k8s, out["uid"]):
        assert time.time() < end, "Kueue made no Workload for the Job"
        time.sleep(1)
    (wl,) = workloads_of(k8s, out["uid"])  # ONE Workload for both pods: all or nothing
    assert [ps["count"] for ps in wl["spec"]["podSets"]] == [2]
    st = k8s.wait(out["id"], lambda s: "QUEUED" in (s.get("message") or ""), timeout=30)
    assert st["state"] == "PENDING", st
    time.sleep(5)
    assert pods_of(k8s, out["id"]) == [] and k8s.kjson("get", "job", out["name"])["spec"]["suspend"] is True
    (res,) = json.loads(k8s.tao("cancel", out["id"], "--json").stdout)
    assert res["state"] == "CANCELED", res
    end = time.time() + 60
    while workloads_of(k8s, out["uid"]) or k8s.kubectl("get", "job", out["name"], "--ignore-not-found", "-o",
                                                        "name").stdout.strip():
        assert time.time() < end, "the Job or its Workload stayed after cancel"
        time.sleep(1)
    # nothing stays reserved or pending in the queue (its status follows within seconds)
    end = time.time() + 30
    while True:
        status = k8s.kjson("get", "clusterqueue", queue).get("status") or {}
        if not status.get("reservingWorkloads") and not status.get("pendingWorkloads"):
            break
        assert time.time() < end, f"ClusterQueue {queue} still counts the canceled Job: {status}"
        time.sleep(1)


def test_an_unknown_queue_is_refused_in_one_line_and_nothing_is_created(k8s, queue):
    since = len(k8s.calls())
    proc = k8s.tao("submit", "--json", *BASE, "--gpus", "1", "--queue", queue + "-nope", check=False)
    assert proc.returncode != 0
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert f"no LocalQueue {queue}-nope in namespace {NAMESPACE}" in line and queue in line
    assert bank_writes(k8s, since) == []


def test_a_queued_sweep_is_one_workload_admitted_partially_and_runs_every_trial(k8s, queue):
    """3 trials, 2 slots, 1 GPU of quota: Kueue admits the sweep's one Indexed Job with 1 pod (partial admission)
    rather than keep it waiting for 2, and every trial runs."""
    proc = k8s.tao("submit", "--json", *BASE, "--gpus", "1", "--queue", queue, "--sweep", "train.optim.lr=1,2,3",
                   "--max-concurrent", "2", "--pod-annotation", f"{lk.RUN_DURATION_ANNOTATION}=2s")
    out = json.loads(proc.stdout)
    views = out["jobs"]
    k8s.ids += [out["sweep"]]  # its one Job carries the sweep's id
    uid = views[0]["backend"]["uid"]
    end = time.time() + 60
    while not (workloads_of(k8s, uid) and (workloads_of(k8s, uid)[0].get("status") or {}).get("admission")):
        assert time.time() < end, "Kueue did not admit the sweep's Job"
        time.sleep(1)
    (wl,) = workloads_of(k8s, uid)
    assert [a["count"] for a in wl["status"]["admission"]["podSetAssignments"]] == [1]
    for v in views:
        assert k8s.wait(v["id"], lambda s: s["state"] in ("COMPLETE", "ERROR"), timeout=120)["state"] == "COMPLETE"
