"""A Kubernetes sweep as ONE Indexed Job, against the fake kubectl: its credentials (one Secret per sweep, values on
stdin only), what is refused before anything is created, how one trial is seen, and the pod's trial prologue run by
a real sh."""
from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from fakeproc import echo_applied, items, k8s_cluster, ok
from taobank import records
from taobank.campaign import sweeps
from taobank.contract import SubmitOptions
from taobank.errors import TaoError
from taobank.platforms.kubernetes import render, status as smap, sweep as sweepmod
from taobank.states import State

SPEC = {"image": "nvcr.io/nvidia/tao/tao-toolkit:x", "args": ["python", "train.py", "-e", "spec.yaml"], "gpus": 1,
        "mounts": [{"pvc": "ws", "mount_path": "/results"}]}
HF = "hf_SweepSecretValue0123456789abcdef"
NGC = "nvapi-SweepNgcKey-0123456789abcdefghij"


def trials(n: int) -> list[dict[str, str]]:
    return [{"train.optim.lr": f"0.{i + 1:03d}"} for i in range(n)]


def test_a_sweep_with_credentials_makes_one_secret_of_each_kind_owned_by_its_job(fake, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", HF)
    monkeypatch.setenv("NGC_KEY", NGC)
    k8s_cluster(fake)
    done = sweeps.submit("kubernetes", SPEC, SubmitOptions(secret_env=("HF_TOKEN",), ngc_pull_secret=True),
                         trials(3), 2)
    (create,) = fake.kubectl_calls("create")  # the Indexed Job (suspended), then what it owns in one apply
    (apply,) = fake.kubectl_calls("apply")
    (job,) = json.loads(create.stdin)["items"]
    *owned, released = json.loads(apply.stdin)["items"]
    assert "-o" in apply.words and apply.words[apply.words.index("-o") + 1] == "name"  # nothing printed back
    assert sorted((o["kind"], o.get("type")) for o in owned) == [
        ("ConfigMap", None), ("Secret", "Opaque"), ("Secret", "kubernetes.io/dockerconfigjson")]
    assert (job["spec"]["suspend"], released["kind"], released["spec"]["suspend"]) == (True, "Job", False)
    uid = f"uid-{job['metadata']['name']}"
    assert all(o["metadata"]["ownerReferences"][0]["uid"] == uid for o in owned)
    pod = job["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": render.pull_secret_name(done.sweep)}]
    assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": render.cred_secret_name(done.sweep)}}]
    for call in fake.calls:  # never on a command line, never in a manifest
        assert HF not in " ".join(call.argv) and NGC not in " ".join(call.argv)
    for call in fake.calls:
        if call is not apply:
            assert HF not in (call.stdin or "") and NGC not in (call.stdin or "")
    for v in done.views:
        text = json.dumps(records.load(v.id))
        assert HF not in text and NGC not in text
    assert [records.load(v.id)["backend"]["index"] for v in done.views] == [0, 1, 2]


@pytest.mark.parametrize("change, said", [
    ({"nodes": 2}, "a sweep on Kubernetes runs single-node trials"),
    ({"storage_tier": "C", "results_dir": "s3://b/p"}, "tier A"),
    ({"mounts": [{"pvc": "ws", "mount_path": "/tao-sweep"}]}, "/tao-sweep"),
])
def test_what_one_indexed_job_cannot_run_is_refused_before_anything(fake, monkeypatch, change, said):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFAKEFAKE1234")
    k8s_cluster(fake)
    fake.kubectl("config", "view", answer={"current-context": "c", "clusters": [{"cluster": {"server": "https://k"}}]})
    # (multi-node: past the NCCL gate, which a cluster without a probe verdict refuses first)
    opts = SubmitOptions(secret_env=("AWS_ACCESS_KEY_ID",) if change.get("storage_tier") else (),
                         skip_nccl_probe=bool(change.get("nodes")))
    with pytest.raises(TaoError, match=said):
        sweeps.submit("kubernetes", {**SPEC, **change}, opts, trials(2), 2)
    assert not fake.kubectl_calls("create") and records.list_records() == []


def test_a_trial_table_over_a_configmap_is_refused_in_one_line_before_anything(fake):
    k8s_cluster(fake)
    long = [{"train.note": f"{i:04d}" + "x" * 2000} for i in range(600)]
    with pytest.raises(TaoError, match=r"more than one ConfigMap holds \(1 MiB\): split it into sweeps of at most"):
        sweeps.submit("kubernetes", SPEC, SubmitOptions(), long, 10)
    assert not fake.calls and records.list_records() == []


def test_a_failed_apply_of_what_it_owns_deletes_the_job_and_every_trial_says_error(fake):
    k8s_cluster(fake)
    fake.kubectl("apply", "--server-side", rc=1, stderr="Error from server (Forbidden): configmaps is forbidden")
    fake.kubectl("delete", answer="")
    with pytest.raises(TaoError, match="forbidden"):
        sweeps.submit("kubernetes", SPEC, SubmitOptions(), trials(3), 2)
    (delete,) = fake.kubectl_calls("delete", "jobs")
    assert delete.words[2:4] == ["-l", f"{sweepmod.SWEEP_LABEL}={records.list_records()[0]['sweep']}"]
    assert {r["state"] for r in records.list_records()} == {"ERROR"}


@pytest.mark.parametrize("stderr, said", [
    ('Error from server (NotFound): namespaces "default" not found', "namespace default does not exist"),
    ('Error from server (Forbidden): jobs.batch is forbidden: User "u" cannot create resource "jobs" in API group '
     '"batch"', "you may not create jobs"),
])
def test_the_server_refusing_the_suspended_job_makes_nothing_and_says_why(fake, stderr, said):
    """The sweep's Job create is its server check: refused, nothing was made (no delete), one line says why."""
    k8s_cluster(fake)
    fake.kubectl("create", "-f", "-", "-o", "json", rc=1, stderr=stderr)
    with pytest.raises(TaoError, match=said) as err:
        sweeps.submit("kubernetes", SPEC, SubmitOptions(), trials(2), 2)
    assert "could not delete" not in str(err.value)
    assert not fake.kubectl_calls("delete") and not fake.kubectl_calls("apply")
    assert {r["state"] for r in records.list_records()} == {"ERROR"}


@pytest.mark.parametrize("dropped", ["backoffLimitPerIndex", "podFailurePolicy"])
def test_a_server_that_drops_per_trial_failure_gets_the_job_deleted(fake, dropped):
    """A server that keeps neither field would let one trial's failure end the sweep: its Job is deleted before
    any pod (it was created suspended) and the submit says to upgrade."""
    k8s_cluster(fake)

    def create(call):
        made = json.loads(echo_applied()(call).stdout)["items"]
        made[0]["spec"].pop(dropped)
        return ok(json.dumps(items(made)))

    fake.kubectl("create", answer=create)
    fake.kubectl("delete", answer="")
    with pytest.raises(TaoError, match=f"{dropped}.*upgrade"):
        sweeps.submit("kubernetes", SPEC, SubmitOptions(), trials(2), 2)
    assert fake.kubectl_calls("delete", "jobs") and not fake.kubectl_calls("apply")


def test_status_of_one_trial_reads_its_sweeps_job_and_its_own_pods(fake):
    k8s_cluster(fake)
    done = sweeps.submit("kubernetes", SPEC, SubmitOptions(), trials(3), 2)
    job = json.loads(fake.kubectl_calls("create")[0].stdin)["items"][0]
    job = {**job, "metadata": {**job["metadata"], "uid": f"uid-{job['metadata']['name']}"},
           "status": {"completedIndexes": "0", "failedIndexes": "1"}}

    def pod(i: int, phase: str, code: int | None = None) -> dict:
        term = {"terminated": {"exitCode": code, "reason": "Error"}} if code is not None else {"running": {}}
        return {"kind": "Pod", "metadata": {"name": f"p{i}", "labels": {
            "tao-job-id": done.sweep, "batch.kubernetes.io/job-completion-index": str(i)},
            "ownerReferences": [{"uid": job["metadata"]["uid"]}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "main", "state": term}]}}

    fake.kubectl("get", "jobs,pods", answer=items([job, pod(0, "Succeeded", 0), pod(1, "Failed", 3),
                                                   pod(2, "Running")]))
    fake.kubectl("logs", answer="boom\n")
    from taobank.core import platform as core

    views = core.status(None, [done.views[1].id])
    (get,) = fake.kubectl_calls("get", "jobs,pods")
    assert get.words[3] == f"tao-job-id={done.sweep}"
    assert views[0].state == State.ERROR and views[0].exit_code == 3 and "p1" in views[0].message
    views = core.status(None, [v.id for v in done.views])
    assert [v.state for v in views] == [State.COMPLETE, State.ERROR, State.RUNNING]


def test_one_index_in_the_bank_s_vocabulary():
    job = {"metadata": {"uid": "u"}, "spec": {"parallelism": 2},
           "status": {"completedIndexes": "0-2,5", "failedIndexes": "4"}}
    assert smap.index_set("0-2,5") == {0, 1, 2, 5} and smap.index_set("") == set()
    assert smap.observe_index(job, 5, []).state == State.COMPLETE
    waiting = smap.observe_index(job, 7, [])
    assert waiting.state == State.PENDING and waiting.reason == "WaitingForSlot" and "at most 2" in waiting.message
    failed = smap.observe_index(job, 4, [])
    assert failed.state == State.ERROR
    deadline = {**job, "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}}
    assert smap.observe_index(deadline, 3, []).reason == "DeadlineExceeded"
    assert smap.observe_index(deadline, 3, []).state == State.ERROR
    going = {**job, "metadata": {"uid": "u", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert smap.observe_index(going, 3, []).state == State.CANCELED
    assert smap.observe_index(None, 3, []).state == State.UNKNOWN


def test_the_prologue_gives_the_pod_its_trial_argv_exactly(tmp_path):
    """Run by a real sh: whatever a word holds (spaces, quotes, $, a newline) arrives as that one word, with the
    trial's id and folder exported; a canceled trial exits 143 before running anything."""
    argv = ["python", "train.py", "-e", "spec.yaml", "a b", "it's", "$HOME", "x\ny", "--", "-n"]
    (tmp_path / "3.id").write_text("dino-train-abc")
    (tmp_path / "3.folder").write_text("dino-train-abc")
    (tmp_path / "3.argv").write_text(shlex.join(argv))
    script = render.SWEEP_PROLOGUE.replace(render.SWEEP_DIR, str(tmp_path)) + \
        'printf "%s\\n" "$TAO_JOB_ID" "$TAO_API_JOB_ID"; printf "<%s>" "$@"; printf "\\n%s" "$RESULTS_DIR"'
    env = {"JOB_COMPLETION_INDEX": "3", "PATH": "/usr/bin:/bin", "TAO_API_RESULTS_DIR": "/results",
           "RESULTS_DIR": "/results/the-sweep"}
    out = subprocess.run(["sh", "-c", script, "tao-main"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n", 3)
    assert lines[:3] == ["tao: sweep trial 3 (dino-train-abc)", "dino-train-abc", "dino-train-abc"]
    assert lines[3] == "".join(f"<{w}>" for w in argv) + "\n/results/dino-train-abc"  # the trial's own folder
    (tmp_path / "3.cancel").write_text("canceled")
    out = subprocess.run(["sh", "-c", script, "tao-main"], capture_output=True, text=True, env=env)
    assert out.returncode == render.CANCELED_EXIT and "canceled" in out.stderr and "<python>" not in out.stdout


def test_the_job_is_indexed_with_a_retry_budget_per_trial_and_fail_index():
    specs = [sweeps.trial_spec(SPEC, t) for t in trials(3)]
    job, table = sweepmod.build(specs, ["a-1", "a-2", "a-3"], "dino-sweep-x", "ns", 2, creds=False, ngc=False)
    s = job["spec"]
    assert (s["completionMode"], s["completions"], s["parallelism"]) == ("Indexed", 3, 2)
    assert "backoffLimit" not in s and s["backoffLimitPerIndex"] >= 1
    assert [r["action"] for r in s["podFailurePolicy"]["rules"]] == ["Count", "FailIndex"]
    main = s["template"]["spec"]["containers"][0]
    assert main["command"][:2] == ["/bin/sh", "-c"] and len(main["command"]) == 4  # no argv: the table has it
    assert {"name": "tao-sweep", "mountPath": render.SWEEP_DIR, "readOnly": True} in main["volumeMounts"]
    assert shlex.split(table["data"]["1.argv"])[-1] == "train.optim.lr=0.002"
    assert table["data"]["2.folder"] == "a-3" and table["metadata"]["name"] == sweepmod.table_name("dino-sweep-x")
    timed = [{**spec, "active_deadline_seconds": 600} for spec in specs]
    job, _ = sweepmod.build(timed, ["a-1", "a-2", "a-3"], "dino-sweep-x", "ns", 2, creds=False, ngc=False)
    assert "activeDeadlineSeconds" not in job["spec"]  # each trial's limit, not the sweep's
    assert job["spec"]["template"]["spec"]["activeDeadlineSeconds"] == 600


def test_cancel_of_a_finished_trial_leaves_the_sweeps_secret_alone(fake, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", HF)
    k8s_cluster(fake)
    done = sweeps.submit("kubernetes", SPEC, SubmitOptions(secret_env=("HF_TOKEN",)), trials(2), 2)
    records.mark(done.views[0].id, State.COMPLETE, message="done")
    fake.kubectl("delete", answer=ok(""))
    from taobank.core import platform as core

    views, errors = core.cancel(None, [done.views[0].id])
    assert errors == [] and not fake.kubectl_calls("delete")



def test_a_trials_argv_is_expanded_as_the_kubelet_expands_a_single_jobs():
    """$(NAME) in a trial's argv: the kubelet never sees the table, so the bank expands it as the kubelet does for
    one job ($(NAME) of a plain env value, the trial's own results folder; $$ is $; unknown names stay)."""
    assert render.kube_expand("$(A)/$(B)-$$(A)-$(NOPE)-$x-$(", {"A": "1", "B": "2"}) == "1/2-$(A)-$(NOPE)-$x-$("
    spec = {**SPEC, "env": {"LR_TAG": "fast"},
            "args": ["sh", "-c", "echo $(TAO_API_RESULTS_DIR)/$(TAO_API_JOB_ID) $(RESULTS_DIR) $(LR_TAG) $(HF_TOKEN)"]}
    specs = [sweeps.trial_spec(spec, t) for t in trials(2)]
    _job, table = sweepmod.build(specs, ["a-1", "a-2"], "dino-sweep-x", "ns", 2, creds=True, ngc=False)
    words = shlex.split(table["data"]["1.argv"])
    assert words[2] == "echo /results/a-2 /results/a-2 fast $(HF_TOKEN)"  # a Secret's key is never expanded here
