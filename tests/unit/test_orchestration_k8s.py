"""Kubernetes orchestration (submit, adopt, status sweep, cancel) against the fake kubectl: no cluster."""
from __future__ import annotations

import json

import pytest

from fakeproc import KUEUE_GATE_READ, echo_applied, items, job, k8s_cluster, k8s_record, node, ok, pod
from taobank.contract import SubmitOptions
from taobank.core import platform
from taobank import records
from taobank.errors import TaoError

SPEC = {"image": "nvcr.io/nvidia/tao/tao-toolkit:x", "command": "echo hi", "gpus": 4,
        "mounts": [{"pvc": "ws", "mount_path": "/results"}]}


def busy_pod(node_name: str, gpus: int) -> dict:
    """Another user's running pod holding ``gpus`` on ``node_name``."""
    return {"kind": "Pod", "metadata": {"name": "theirs", "namespace": "other"},
            "spec": {"nodeName": node_name, "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Running"}}


def cluster(fake, *, gpus_per_node: int = 8) -> None:
    """A one-node cluster that lets us do everything and echoes what is applied."""
    k8s_cluster(fake, [node("gpu-0", gpus_per_node)])


def writes(fake) -> list:
    """kubectl calls that change the cluster."""
    return [c for c in fake.of("kubectl") if c.words[0] in ("apply", "create", "replace", "patch", "delete")]


# ------------------------------------------------------------------ submit
def test_capacity_gate_refusal_opens_no_record_and_applies_nothing(fake, state_dir):
    cluster(fake, gpus_per_node=2)
    with pytest.raises(TaoError, match="can never run here: need 1 node with 4 nvidia.com/gpu"):
        platform.get("kubernetes").submit(SPEC, SubmitOptions())
    assert records.list_records() == []
    assert writes(fake) == []
    # the one read of queues, nodes and pods (refused: no Kueue here, so remembered), then nodes and pods alone
    assert [c.words[:2] for c in fake.of("kubectl")] == [["get", KUEUE_GATE_READ], ["get", "nodes,pods"]]


def test_gate_refusal_through_the_cli_is_one_line_exit_1(fake, cli):
    cluster(fake, gpus_per_node=2)
    out = cli("tao_k8s.py", "submit", "--image", "img", "--command", "echo hi", "--gpus", "4", "--no-results")
    assert out.rc == 1 and len(out.err_lines) == 1 and "insufficient GPUs" in out.err, out
    assert records.list_records() == [] and writes(fake) == []


JOBS_FORBIDDEN = ('Error from server (Forbidden): error when creating "STDIN": jobs.batch is forbidden: User "me" '
                  'cannot create resource "jobs" in API group "batch" in the namespace "default"')
REFUSALS = {
    "rbac": (lambda f: f.kubectl("create", "--dry-run=server", rc=1, stderr=JOBS_FORBIDDEN),
             "you may not create jobs in namespace default: ask for a Role"),
    "namespace": (lambda f: f.kubectl("create", "--dry-run=server", rc=1,
                                      stderr='Error from server (NotFound): namespaces "default" not found'),
                  "namespace default does not exist"),
}
NODES_FORBIDDEN = 'Error from server (Forbidden): nodes is forbidden: User "me" cannot list resource "nodes"'


@pytest.mark.parametrize("why", REFUSALS, ids=list(REFUSALS))
def test_every_gate_refusal_opens_no_record_and_launches_nothing(fake, why):
    cluster(fake)
    setup, message = REFUSALS[why]
    setup(fake)
    with pytest.raises(TaoError, match=message):
        platform.get("kubernetes").submit(SPEC, SubmitOptions())
    assert records.list_records() == []
    assert [c for c in writes(fake) if "--dry-run=server" not in c.words] == []


def test_without_node_list_permission_the_gate_warns_and_submit_goes_on(fake, cli):
    cluster(fake)
    fake.kubectl("create", answer=echo_applied())
    fake.kubectl("get", "nodes,pods", rc=1, stderr=NODES_FORBIDDEN)
    fake.kubectl("get", "nodes", rc=1, stderr=NODES_FORBIDDEN)
    out = cli("tao_k8s.py", "submit", "--image", "img", "--command", "echo hi", "--no-results", "--quiet")
    assert out.rc == 0 and out.out.strip() == records.list_records()[0]["id"], out
    assert "warning:" in out.err and "may not list nodes" in out.err
    refused = cli("tao_k8s.py", "submit", "--image", "img", "--command", "echo hi", "--no-results", "--require-free")
    assert refused.rc == 1 and "--require-free needs to list nodes" in refused.err


def test_busy_gpus_queue_the_job_with_per_node_figures_unless_require_free(fake, cli):
    cluster(fake)
    fake.kubectl("create", answer=echo_applied())
    fake.kubectl("get", "nodes,pods", answer=items([node("gpu-0"), busy_pod("gpu-0", 6)]))
    refused = cli("tao_k8s.py", "submit", "--image", "img", "--command", "x", "--gpus", "4", "--no-results",
                  "--require-free")
    assert refused.rc == 1 and "insufficient free GPUs now" in refused.err and "gpu-0 2/8 free" in refused.err
    assert records.list_records() == []
    out = cli("tao_k8s.py", "submit", "--image", "img", "--command", "x", "--gpus", "4", "--no-results")
    assert out.rc == 0, out
    assert "note:" in out.err and "the Job waits until 1 node with 4 nvidia.com/gpu free up" in out.err
    assert "gate: queued:" in out.out and "gpu-0 2/8 free" in out.out
    assert [c for c in writes(fake) if "--dry-run=server" not in c.words and c.words[0] in ("apply", "create")]


def test_a_plain_submit_costs_four_kubectl_calls_then_three(fake):
    cluster(fake)
    view = platform.get("kubernetes").submit(SPEC, SubmitOptions())
    # kept as a sequence: a call-cost test, and the order is the contract (the gate, then the server dry run,
    # then the one create)
    calls = [c.words[:2] for c in fake.of("kubectl")]
    assert calls == [["get", KUEUE_GATE_READ], ["get", "nodes,pods"], ["create", "--dry-run=server"],
                     ["create", "-f"]], calls
    # the cluster is now known to have no Kueue: the next submit reads nodes and pods alone
    n = len(fake.calls)
    platform.get("kubernetes").submit(SPEC, SubmitOptions())
    assert [c.words[:2] for c in fake.calls[n:] if c.program == "kubectl"] == \
        [["get", "nodes,pods"], ["create", "--dry-run=server"], ["create", "-f"]]
    job = json.loads(fake.kubectl_calls("create", "-f")[-1].stdin)["items"][0]
    assert "podFailurePolicy" in job["spec"] and "pod disruptions (drain, preemption, eviction) retried" in view.extra["gate"]


def _dropping_policy(call):
    """A server that does not keep podFailurePolicy (before 1.26, or the feature off): it drops the field."""
    body = json.loads(call.stdin)
    for o in body["items"]:
        o["spec"].pop("podFailurePolicy", None)
    return ok(json.dumps(body))


def test_the_dry_run_names_every_create_the_role_forbids_and_keeps_other_refusals(fake):
    two_nodes(fake)
    both = (JOBS_FORBIDDEN + "\n" + 'Error from server (Forbidden): error when creating "STDIN": services is '
            'forbidden: User "me" cannot create resource "services" in API group "" in the namespace "default"')
    fake.kubectl("create", "--dry-run=server", rc=1, stderr=both)
    with pytest.raises(TaoError, match="you may not create jobs, create services in namespace default"):
        platform.get("kubernetes").submit({**SPEC, "nodes": 2}, SubmitOptions(skip_nccl_probe=True))
    # a webhook that refuses the field is the cluster's rule, not an old server: refused, retries never dropped
    fake.kubectl("create", "--dry-run=server", rc=1,
                 stderr='Error from server (Forbidden): admission webhook "policy.example" denied the request: '
                        'Jobs must not set spec.podFailurePolicy')
    before = len(fake.kubectl_calls("create", "--dry-run=server"))
    with pytest.raises(TaoError, match="dry-run=server failed .*must not set spec.podFailurePolicy"):
        platform.get("kubernetes").submit(SPEC, SubmitOptions())
    assert len(fake.kubectl_calls("create", "--dry-run=server")) == before + 1  # no second try without the field
    assert records.list_records() == [] and not fake.kubectl_calls("create", "-f")


@pytest.mark.parametrize("server", ["drops", "rejects"])
def test_a_server_without_pod_failure_policy_gets_a_job_without_retry(fake, server):
    cluster(fake)
    if server == "drops":
        fake.kubectl("create", "--dry-run=server", answer=_dropping_policy)
    else:  # before the field existed: strict validation refuses it, the dry run without it passes
        fake.kubectl("create", "--dry-run=server", rc=1, times=1,
                     stderr='Error from server (BadRequest): error when creating "STDIN": Job in version "v1" '
                            'cannot be handled as a Job: strict decoding error: unknown field "spec.podFailurePolicy"')
    view = platform.get("kubernetes").submit(SPEC, SubmitOptions())
    job = json.loads(fake.kubectl_calls("create", "-f")[-1].stdin)["items"][0]
    assert "podFailurePolicy" not in job["spec"] and job["spec"]["backoffLimit"] == 0
    assert "does not keep podFailurePolicy" in view.extra["gate"] and "no retry (backoffLimit 0)" in view.extra["gate"]
    assert not fake.kubectl_calls("version")  # a single-node submit never asks the version


def test_without_cluster_wide_pod_reads_the_gate_counts_the_namespace_and_says_so(fake, cli):
    cluster(fake)
    pods_forbidden = ('Error from server (Forbidden): pods is forbidden: User "me" cannot list resource "pods" '
                      'in API group "" at the cluster scope')
    fake.kubectl("get", "nodes,pods", rc=1, stderr=pods_forbidden)
    fake.kubectl("get", "nodes", answer=items([node("gpu-0")]))
    fake.kubectl("get", "pods", "--all-namespaces", rc=1, stderr=pods_forbidden)
    fake.kubectl("get", "pods", "-o", answer=items([busy_pod("gpu-0", 6)]))
    out = cli("tao_k8s.py", "submit", "--image", "img", "--command", "x", "--gpus", "4", "--no-results")
    assert out.rc == 0, out
    assert "gpu-0 2/8 free" in out.out and "pods outside namespace default are not visible to you" in out.out


def two_nodes(fake) -> None:
    cluster(fake)
    fake.kubectl("get", "nodes,pods", answer=items([node("gpu-0"), node("gpu-1")]))
    fake.kubectl("config", "view", answer={"current-context": "lab", "clusters": [{"cluster": {"server": "https://k"}}]})


def test_multi_node_needs_an_ok_nccl_verdict_or_a_recorded_skip(fake, cli):
    from taobank.core import nccl_probe

    two_nodes(fake)
    argv = ["tao_k8s.py", "submit", "--image", "img", "--command", "x", "--nodes", "2", "--gpus", "1", "--no-results"]
    out = cli(*argv)
    assert out.rc == 1 and "need an ok NCCL probe and no probe has run" in out.err and "--skip-nccl-probe" in out.err
    assert records.list_records() == [] and writes(fake) == []
    nccl_probe.save_verdict("kubernetes", "lab@https://k", {"verdict": "failed", "job_id": "p-1"})
    out = cli(*argv)
    assert out.rc == 1 and "the last probe said failed (job p-1)" in out.err
    skipped = cli(*argv, "--skip-nccl-probe", "--json")
    assert skipped.rc == 0, skipped
    view = json.loads(skipped.out)
    assert records.load(view["id"])["backend"]["nccl_probe"] == "skipped" and "NCCL probe skipped" in view["gate"]
    nccl_probe.save_verdict("kubernetes", "lab@https://k", {"verdict": "ok", "job_id": "p-2",
                                                             "checked_at": nccl_probe.datetime.now(
                                                                 nccl_probe.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})
    ok = cli(*argv, "--json")
    assert ok.rc == 0, ok
    rec = records.load(json.loads(ok.out)["id"])
    assert rec["backend"]["nccl_probe"] == "ok" and rec["backend"]["nccl_probe_job"] == "p-2"


def test_multi_node_on_an_old_server_is_refused_before_the_record(fake):
    two_nodes(fake)
    fake.kubectl("version", answer={"serverVersion": {"gitVersion": "v1.27.3"}})
    with pytest.raises(TaoError, match="multi-node jobs need Kubernetes >= 1.28"):  # (the NCCL gate comes first)
        platform.get("kubernetes").submit({**SPEC, "nodes": 2}, SubmitOptions(skip_nccl_probe=True))
    assert records.list_records() == [] and writes(fake) == []


def test_a_failed_create_after_the_job_marks_the_record_error_and_deletes_the_job(fake, monkeypatch):
    monkeypatch.setenv("NGC_KEY", "value-1234")
    cluster(fake)
    fake.kubectl("delete", answer="")
    fake.kubectl("create", "-f", rc=1, stderr="error: admission webhook denied the request",
                 where=lambda c: json.loads(c.stdin).get("kind") == "Secret")
    with pytest.raises(TaoError, match="admission webhook"):
        platform.get("kubernetes").submit(SPEC, SubmitOptions(secret_env=("NGC_KEY",)))
    (rec,) = records.list_records()
    assert rec["state"] == "ERROR" and "before launch" in rec["message"]
    (delete,) = fake.kubectl_calls("delete")  # the Job, by UID: its owned objects go with it
    assert delete.words[:2] == ["delete", "--raw"] and delete.words[2].endswith(f"/jobs/{rec['id']}")
    assert json.loads(delete.stdin)["preconditions"] == {"uid": f"uid-{rec['id']}"}


def test_submit_creates_the_job_then_its_objects_already_owned_and_never_patches(fake, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_value-1234")
    two_nodes(fake)
    fake.kubectl("version", answer={"serverVersion": {"gitVersion": "v1.34.4"}})
    view = platform.get("kubernetes").submit({**SPEC, "nodes": 2}, SubmitOptions(description="first try", secret_env=("HF_TOKEN",), skip_nccl_probe=True))
    rec = records.load(view.id)
    assert rec["backend_ref"] == f"default/{view.id}" and rec["backend"]["uid"] == f"uid-{view.id}"
    assert rec["description"] == "first try" and view.state == "PENDING"
    creates = [c for c in fake.kubectl_calls("create") if "--dry-run=server" not in c.words]
    kinds = [json.loads(c.stdin).get("kind") for c in creates]
    assert kinds == ["List", "Secret", "List"]
    assert [o["kind"] for o in json.loads(creates[0].stdin)["items"]] == ["Job"]  # the Job first
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": view.id, "uid": f"uid-{view.id}"}
    assert json.loads(creates[1].stdin)["metadata"]["ownerReferences"] == [owner]
    (svc,) = json.loads(creates[2].stdin)["items"]
    assert svc["kind"] == "Service" and svc["metadata"]["ownerReferences"] == [owner]
    assert not fake.kubectl_calls("patch") and not fake.kubectl_calls("apply")
    # can-i only for what the server dry run did not authorize: the Secret (the Job and Service were in it)
    asked = [c.words[2:4] for c in fake.kubectl_calls("auth", "can-i")]
    assert asked == [["create", "secrets"]]
    (dry,) = fake.kubectl_calls("create", "--dry-run=server")
    assert sorted(o["kind"] for o in json.loads(dry.stdin)["items"]) == ["Job", "Service"]


def test_a_generic_command_is_recorded_as_custom_run_as_on_slurm(fake):
    cluster(fake)
    view = platform.get("kubernetes").submit(SPEC, SubmitOptions())  # no network_arch, no action: `echo hi`
    rec = records.load(view.id)
    assert (rec["network_arch"], rec["action"]) == ("custom", "run") and rec["id"].startswith("custom-run-")


def test_interrupted_submit_is_adopted_by_job_id_never_created_twice(fake, cli):
    rec = k8s_record(launched=False)  # the record opened, the Job created, then the process died
    jid = rec["id"]
    fake.kubectl("get", "jobs", "-l", f"tao-job-id={jid}", answer=items([job(jid, "uid-live")]))
    fake.kubectl("get", "secrets", answer=items([]))
    fake.kubectl("get", "services", answer=items([]))
    fake.kubectl("get", "configmaps", answer=items([]))
    out = cli("tao_k8s.py", "submit", "--image", "img", "--command", "echo hi", "--no-results", "--job-id", jid, "--json")
    assert out.rc == 0, out
    view = json.loads(out.out)
    assert view["id"] == jid and view["reconciled"] is True
    after = records.load(jid)
    assert after["backend_ref"] == f"default/{jid}" and after["backend"]["uid"] == "uid-live"
    assert writes(fake) == []  # no apply, no create: the Job that exists is the job
    assert not fake.kubectl_calls("get", "nodes")  # and no gate: nothing new is launched


def test_adopt_refuses_a_terminal_record(fake, cli):
    rec = k8s_record(launched=False)
    records.mark(rec["id"], "CANCELED")
    out = cli("tao_k8s.py", "submit", "--image", "img", "--command", "echo hi", "--no-results", "--job-id", rec["id"])
    assert out.rc == 1 and "CANCELED already" in out.err and fake.of("kubectl") == []


def test_job_id_without_a_job_launches_on_the_existing_record(fake):
    rec = k8s_record(launched=False)
    cluster(fake)
    fake.kubectl("get", "jobs", "-l", answer=items([]))
    view = platform.get("kubernetes").submit(SPEC, SubmitOptions(job_id=rec["id"]))
    assert view.id == rec["id"] and len(records.list_records()) == 1
    assert len([c for c in fake.kubectl_calls("create") if "--dry-run=server" not in c.words]) == 1


# ------------------------------------------------------------------ status
def test_status_sweep_is_one_kubectl_call_for_many_records(fake):
    recs = [k8s_record(state="PENDING") for _ in range(5)]
    objs = []
    for r in recs:
        objs += [job(r["id"], f"uid-{r['id']}"), pod(r["id"], f"uid-{r['id']}")]
    fake.kubectl("get", "jobs,pods", "-l", "tao-job-id", answer=items(objs))
    views = platform.status("kubernetes")
    assert [v.state for v in views] == ["RUNNING"] * 5
    assert len(fake.of("kubectl")) == 1
    assert all(records.load(r["id"])["state"] == "RUNNING" for r in recs)


def test_status_ignores_a_same_name_job_with_another_uid(fake):
    rec = k8s_record()
    jid = rec["id"]
    fake.kubectl("get", "jobs,pods", answer=items([job(jid, "uid-someone-else", condition="Complete")]))
    (view,) = platform.status("kubernetes", [jid])
    # not ours: its Complete is not our job's end (ours is not found)
    assert view.state == "UNKNOWN" and records.load(jid)["state"] == "UNKNOWN"


# ------------------------------------------------------------------ cancel
def _cancel_cluster(fake, jid: str, uid_now: str) -> None:
    fake.kubectl("get", "job", jid, answer=job(jid, uid_now))
    fake.kubectl("get", "pods", "-l", answer=items([pod(jid, uid_now)]))
    fake.kubectl("logs", answer="last words\n")


def test_cancel_deletes_the_job_with_a_uid_precondition(fake):
    rec = k8s_record()
    jid = rec["id"]
    _cancel_cluster(fake, jid, f"uid-{jid}")
    fake.kubectl("delete", "--raw", answer="{}")
    fake.kubectl("delete", "secret,service,configmap", answer="")
    views, errors = platform.cancel("kubernetes", [jid])
    assert errors == [] and views[0].state == "CANCELED" and views[0].extra["deleted"] is True
    (raw,) = fake.kubectl_calls("delete", "--raw")
    assert json.loads(raw.stdin)["preconditions"] == {"uid": f"uid-{jid}"}
    assert raw.words[2] == f"/apis/batch/v1/namespaces/default/jobs/{jid}"


def test_uid_conflict_on_delete_marks_canceled_and_leaves_the_other_job(fake):
    rec = k8s_record()
    jid = rec["id"]
    _cancel_cluster(fake, jid, f"uid-{jid}")
    fake.kubectl("delete", "--raw", rc=1, stderr='Error from server (Conflict): Operation cannot be fulfilled: '
                 'Precondition failed: UID in precondition: uid-a, UID in object meta: uid-b')
    views, errors = platform.cancel("kubernetes", [jid])
    assert errors == []
    assert views[0].state == "CANCELED" and views[0].extra["deleted"] is False
    assert "another UID" in views[0].message
    assert records.load(jid)["state"] == "CANCELED"
    # the only write was the refused delete: the other Job and the objects labelled for it are untouched
    assert [c.words[:2] for c in writes(fake)] == [["delete", "--raw"]]


def test_cancel_when_the_name_already_has_another_uid_deletes_nothing(fake):
    rec = k8s_record()
    jid = rec["id"]
    fake.kubectl("get", "job", jid, answer=job(jid, "uid-replacement"))
    views, errors = platform.cancel("kubernetes", [jid])
    assert errors == [] and views[0].state == "CANCELED" and views[0].extra["deleted"] is False
    assert "left alone" in views[0].message and writes(fake) == []


def test_cancel_of_an_interrupted_submit_without_a_job(fake):
    rec = k8s_record(launched=False)
    jid = rec["id"]
    fake.kubectl("get", "jobs", "-l", f"tao-job-id={jid}", answer=items([]))
    fake.kubectl("delete", "secret,service,configmap", answer="")
    views, errors = platform.cancel("kubernetes", [jid])
    assert errors == [] and views[0].state == "CANCELED" and views[0].extra["deleted"] is False
    # a Secret the interrupted submit may have created goes too, found by the job-id label
    (d,) = writes(fake)
    assert d.words[:4] == ["delete", "secret,service,configmap", "-l", f"tao-job-id={jid}"]
    assert records.load(jid)["state"] == "CANCELED"


def test_cancel_of_an_interrupted_submit_whose_job_exists_deletes_that_job(fake):
    rec = k8s_record(launched=False)
    jid = rec["id"]
    fake.kubectl("get", "jobs", "-l", f"tao-job-id={jid}", answer=items([job(jid, "uid-found")]))
    _cancel_cluster(fake, jid, "uid-found")
    fake.kubectl("delete", "--raw", answer="{}")
    fake.kubectl("delete", "secret,service,configmap", answer="")
    views, errors = platform.cancel("kubernetes", [jid])
    assert errors == [] and views[0].extra["deleted"] is True
    (raw,) = fake.kubectl_calls("delete", "--raw")
    assert json.loads(raw.stdin)["preconditions"] == {"uid": "uid-found"}


def test_cancel_of_a_finished_job_marks_its_real_end(fake):
    rec = k8s_record()
    jid = rec["id"]
    fake.kubectl("get", "job", jid, answer=job(jid, f"uid-{jid}", condition="Complete"))
    fake.kubectl("get", "pods", "-l", answer=items([pod(jid, f"uid-{jid}", "Succeeded")]))
    fake.kubectl("logs", answer="done\n")
    views, errors = platform.cancel("kubernetes", [jid])
    assert views[0].state == "COMPLETE" and records.load(jid)["state"] == "COMPLETE"
    assert writes(fake) == []


def test_status_sweep_is_one_call_per_namespace(fake):
    recs = [k8s_record(state="PENDING", namespace=ns) for ns in ("team-a", "team-b", "team-a")]
    fake.kubectl("get", "jobs,pods", answer=lambda c: items(
        [o for r in recs if r["backend"]["namespace"] == c.namespace
         for o in (job(r["id"], f"uid-{r['id']}"), pod(r["id"], f"uid-{r['id']}"))]))
    views = platform.status("kubernetes")
    assert [v.state for v in views] == ["RUNNING"] * 3
    assert sorted(c.namespace for c in fake.of("kubectl")) == ["team-a", "team-b"]


def test_cancel_many_one_fails_the_others_are_still_cancelled(fake, cli):
    recs = [k8s_record() for _ in range(3)]
    bad = recs[1]["id"]
    fake.kubectl("get", "job", answer=lambda c: job(c.words[2], f"uid-{c.words[2]}"))
    fake.kubectl("get", "pods", "-l", answer=items([]))
    fake.kubectl("delete", answer="")
    fake.kubectl("delete", "--raw", rc=1, stderr='Error from server (Forbidden): jobs.batch "x" is forbidden',
                 where=lambda c: c.words[2].endswith("/" + bad))
    out = cli("tao_k8s.py", "cancel", *[r["id"] for r in recs])
    assert out.rc == 1, out
    assert [records.load(r["id"])["state"] for r in recs] == ["CANCELED", "RUNNING", "CANCELED"]
    assert len(out.err_lines) == 1 and bad in out.err and "forbidden" in out.err


def test_cancel_marks_canceled_once_the_job_is_deleted_even_if_cleanup_fails(fake):
    rec = k8s_record()
    jid = rec["id"]
    _cancel_cluster(fake, jid, f"uid-{jid}")
    fake.kubectl("delete", "--raw", answer="{}")
    fake.kubectl("delete", "secret,service,configmap", rc=1, stderr="error: the server was unable to return a response")
    views, errors = platform.cancel("kubernetes", [jid])
    assert records.load(jid)["state"] == "CANCELED"


def test_watch_of_a_never_launched_record_does_not_poll_forever(fake):
    rec = k8s_record(launched=False)
    fake.kubectl("get", "jobs,pods", answer=items([]))
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        if len(slept) > 200:
            raise AssertionError(f"still watching after {len(slept)} polls ({sum(slept) / 3600:.1f} h)")

    views = platform.watch("kubernetes", [rec["id"]], on_line=lambda _: None, sleep=sleep)
    assert platform.watch_exit_code(views) == 1


def test_adopt_looks_where_the_record_says_its_job_went(fake):
    rec = k8s_record(launched=False, namespace="team-a")  # submitted with --namespace team-a, then interrupted
    jid = rec["id"]
    cluster(fake)
    fake.kubectl("get", "jobs", "-l", answer=lambda c: items([job(jid, "uid-a")] if c.namespace == "team-a" else []))
    for kind in ("secrets", "services", "configmaps"):
        fake.kubectl("get", kind, answer=items([]))
    platform.get("kubernetes").submit(SPEC, SubmitOptions(job_id=jid))  # resumed without --namespace
    assert writes(fake) == [] and records.load(jid)["backend"]["uid"] == "uid-a"


def test_logs_tail_applies_to_the_saved_copy_too(fake, cli):
    rec = k8s_record()
    jid = rec["id"]
    records.mark(jid, "COMPLETE")
    (records.artifact_dir(jid) / "logs.txt").write_text("".join(f"line {i}\n" for i in range(100)))
    fake.kubectl("get", "pods", "-l", answer=items([]))  # TTL removed the pods
    out = cli("tao_k8s.py", "logs", jid, "--tail", "5")
    assert out.rc == 0 and out.out.splitlines() == [f"line {i}" for i in range(95, 100)], out
