"""What a sweep costs the cluster, counted on the fake process runner for N = 1, 10, 100 trials: submit, status
--sweep and cancel --sweep take a fixed number of SLURM remote commands / kubectl calls, whatever N is."""
from __future__ import annotations

import json

import pytest

from fakeproc import (KUEUE_GATE_READ, applied_names, echo_applied, items, k8s_cluster, node, ok, sacct_row, squeue_row,
                      sweep_answer)
from taobank import records
from taobank.campaign import sweeps
from taobank.contract import SubmitOptions
from taobank.platforms.kubernetes.sweep import SWEEP_LABEL

SIZES = (1, 10, 100)
K = 2  # --max-concurrent

SLURM_SPEC = {"network_arch": "dino", "action": "train", "container_runtime": "none", "num_gpus": 1,
              "command": ["python", "train.py", "-e", "spec.yaml"]}
K8S_SPEC = {"image": "nvcr.io/nvidia/tao/tao-toolkit:x", "command": "python train.py -e spec.yaml", "gpus": 1,
            "mounts": [{"pvc": "ws", "mount_path": "/results"}]}


def trials(n: int) -> list[dict[str, str]]:
    return [{"train.optim.lr": f"0.{i + 1:03d}"} for i in range(n)]


# ------------------------------------------------------------------ SLURM
def remote_commands(fake, since: int = 0) -> list[str]:
    """The remote commands run over ssh after call ``since`` (ssh -O/-G open none)."""
    return [c.script or c.words[0] for c in fake.calls[since:] if c.program == "ssh" and not c.control]


@pytest.mark.parametrize("n", SIZES)
def test_a_slurm_sweep_costs_the_same_few_remote_commands_for_any_n(slurm, n):
    slurm.ssh("STAGE_MANY")
    slurm.ssh("SBATCH_ARRAY", "777\n")
    done = sweeps.submit("slurm", SLURM_SPEC, SubmitOptions(), trials(n), min(K, n))
    assert remote_commands(slurm) == ["MISSING", "STAGE_MANY", "SBATCH_ARRAY"]  # 3: the preflight (node sizes), one stage, one sbatch
    (sbatch,) = [c for c in slurm.calls if c.script == "SBATCH_ARRAY"]
    assert [v.backend_ref for v in done.views] == [f"slurm:777_{i}" for i in range(n)]
    ids = [v.id for v in done.views]

    # status --sweep: the one SWEEP command (one squeue, one sacct, every trial's status.json) for all N
    running = [squeue_row(f"777_{i}", "RUNNING", ids[i]) for i in range(min(K, n))]
    held = [squeue_row(f"777_{i}", "PENDING", ids[i], "JobArrayTaskLimit") for i in range(K, n)]
    slurm.ssh("SWEEP", sweep_answer(running + held))
    since = len(slurm.calls)
    rows = sweeps.status(done.sweep)
    assert remote_commands(slurm, since) == ["SWEEP"]
    assert [r.state for r in rows] == ["RUNNING"] * min(K, n) + ["PENDING"] * (n - K if n > K else 0)
    assert sbatch.args and len(rows) == n

    # cancel --sweep: ONE scancel of every array task in one remote command (one trial: the plain cancel)
    slurm.ssh("CANCEL_MANY", lambda c: ok("@@scancel\n@@rc 0\n"))
    slurm.ssh("scancel", "")
    slurm.ssh("CANCEL_NAME", "")
    since = len(slurm.calls)
    views, errors = sweeps.cancel(done.sweep)
    assert errors == []
    self_retry = records.load(ids[0])["backend"]["self_retry"]  # a trial that resubmits itself: also by its name
    assert remote_commands(slurm, since) == (["CANCEL_MANY"] if n > 1 else
                                             ["scancel", "CANCEL_NAME"] if self_retry else ["scancel"])
    if n > 1:
        (many,) = [c for c in slurm.calls[since:] if c.script == "CANCEL_MANY"]
        assert many.args[0].split() == [f"777_{i}" for i in range(n)]
        assert many.args[1].split() == (ids if self_retry else [])
    assert {records.load(i)["state"] for i in ids} == {"CANCELED"} and len(views) == n


def test_slurm_cancel_sweep_keeps_a_trial_scancel_refused_and_counts_gone_ones_cancelled(slurm):
    slurm.ssh("STAGE_MANY")
    slurm.ssh("SBATCH_ARRAY", "777\n")
    done = sweeps.submit("slurm", SLURM_SPEC, SubmitOptions(), trials(3), K)
    said = ("scancel: error: Kill job error on job id 777_1: Access/permission denied\n"
            "scancel: error: Kill job error on job id 777_2: Job/step already completing or completed\n")
    slurm.ssh("CANCEL_MANY", lambda c: ok(f"@@scancel\n{said}@@rc 1\n"))
    views, errors = sweeps.cancel(done.sweep)
    ids = [v.id for v in done.views]
    assert [records.load(i)["state"] for i in ids] == ["CANCELED", "PENDING", "CANCELED"]
    assert errors == [f"{ids[1]}: scancel 777_1 failed: Access/permission denied"]
    assert "already gone" in records.load(ids[2])["message"]


def test_a_chained_slurm_sweep_warns_each_task_and_status_and_cancel_follow_the_next_attempt(slurm):
    """--max-attempts with --no-requeue in a sweep: the array asks SLURM for USR1, each trial's record is a chain,
    status follows a trial's hop from its array task, and cancel --sweep stops the jobs the trials resubmitted."""
    import base64
    import io
    import tarfile

    slurm.ssh("STAGE_MANY")
    slurm.ssh("SBATCH_ARRAY", "777\n")
    done = sweeps.submit("slurm", {**SLURM_SPEC, "max_attempts": 3, "use_requeue": False}, SubmitOptions(),
                         trials(3), K)
    (stage,) = [c for c in slurm.calls if c.script == "STAGE_MANY"]
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(stage.stdin))) as tar:
        array = tar.extractfile(f"{done.sweep}/sbatch/array.sbatch").read().decode()
    assert "#SBATCH --signal=B:USR1@300" in array.splitlines()
    ids = [v.id for v in done.views]
    backends = [records.load(i)["backend"] for i in ids]
    assert [(b["walltime_chain"], b["max_attempts"], b["self_retry"]) for b in backends] == [(True, 3, False)] * 3

    hops = backends[1]["staged_dir"] + "/meta/retries.jsonl"
    line = '{"from":"777_1","next":"790","attempt":2,"reason":"walltime","run_seconds":3300}\n'
    slurm.ssh("SWEEP", sweep_answer([squeue_row(f"777_{i}", "RUNNING", ids[i]) for i in (0, 2)],
                                    [sacct_row("777_1", ids[1], "COMPLETED")], markers={hops: line}))
    rows = sweeps.status(done.sweep)
    moved = records.load(ids[1])
    assert moved["backend"]["slurm_job_id"] == "790" and moved["backend"]["chain_attempt"] == 2
    assert moved["backend"]["log_dir"].endswith(f"/slurm-logs/{ids[1]}-790")
    assert [r.state for r in rows] == ["RUNNING", "PENDING", "RUNNING"]

    slurm.ssh("CANCEL_MANY", lambda c: ok("@@scancel\n@@rc 0\n"))
    sweeps.cancel(done.sweep)
    (many,) = [c for c in slurm.calls if c.script == "CANCEL_MANY"]
    assert many.args[0].split() == ["777_0", "790", "777_2"]
    assert many.args[1].split() == ids  # every trial's name: a next attempt runs under another id


def test_slurm_cancel_of_one_trial_alone_is_the_plain_cancel(slurm, cli):
    slurm.ssh("STAGE_MANY")
    slurm.ssh("SBATCH_ARRAY", "777\n")
    done = sweeps.submit("slurm", SLURM_SPEC, SubmitOptions(), trials(3), K)
    slurm.ssh("scancel", "")
    slurm.ssh("CANCEL_NAME", "")
    since = len(slurm.calls)
    out = cli("tao_slurm.py", "cancel", done.views[1].id)
    assert out.rc == 0, out
    assert [c.words for c in slurm.calls[since:] if c.program == "ssh" and not c.control][0] == ["scancel", "777_1"]
    assert [records.load(v.id)["state"] for v in done.views] == ["PENDING", "CANCELED", "PENDING"]


# ------------------------------------------------------------------ Kubernetes
class Cluster:
    """A fake API server for one sweep: its one Indexed Job (what the create made), the trial table and Secrets
    created owned by it, a pod per index that runs (at most ``parallelism``), indexes completed or failed."""

    def __init__(self, fake) -> None:
        self.job: dict | None = None
        self.owned: list[dict] = []
        self.done: set[int] = set()
        self.failed: set[int] = set()
        self.deleted = False
        k8s_cluster(fake)
        fake.kubectl("create", answer=self.create)
        fake.kubectl("apply", "--server-side", answer=self.apply)
        fake.kubectl("get", "jobs,pods", answer=lambda c: items(self.objects()))
        fake.kubectl("get", "job", answer=lambda c: self.objects()[0] if self.job else "")
        fake.kubectl("exec", answer="")
        fake.kubectl("logs", answer="last words\n")
        fake.kubectl("logs", "-l", answer=lambda c: "".join(
            f"[pod/{o['metadata']['name']}/main] words of {self.job_id(o)}\n" for o in self.objects()
            if o["kind"] == "Pod" and o["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] in
            c.words[2].split("(")[1].rstrip(")").split(",")))
        fake.kubectl("delete", answer="")
        fake.kubectl("patch", "configmap", answer="")
        fake.kubectl("delete", "--raw", answer=self.delete)

    def create(self, call):
        made = echo_applied()(call)
        if "--dry-run=server" not in call.words:
            sent = json.loads(made.stdout)["items"]
            if sent[0]["kind"] == "Job":
                self.job = sent[0]
            else:
                self.owned += sent
        return made

    def apply(self, call):
        """The server-side apply of what the Job owns, and of the Job itself (released: suspend false)."""
        for o in json.loads(call.stdin)["items"]:
            if o["kind"] == "Job":
                self.job = {**self.job, "spec": {**self.job["spec"], "suspend": o["spec"]["suspend"]}}
            else:
                self.owned.append(o)
        return applied_names(call)

    def delete(self, call):
        self.deleted = True
        return ok(json.dumps(self.objects()[0]))

    def job_id(self, pod: dict) -> str:
        """The trial record id of a pod, as its table says."""
        table = next(o for o in self.owned if o["kind"] == "ConfigMap")
        return table["data"][pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] + ".id"]

    def status(self) -> dict:
        def text(s):
            return ",".join(str(i) for i in sorted(s))
        return {"completedIndexes": text(self.done), "failedIndexes": text(self.failed),
                **({"conditions": [{"type": "Complete", "status": "True"}]}
                   if len(self.done) == self.job["spec"]["completions"] else {})}

    def objects(self) -> list[dict]:
        j = self.job
        out = [{**j, "kind": "Job", "status": self.status()}]
        k, running = j["spec"]["parallelism"], 0
        for i in range(j["spec"]["completions"]):
            ended = i in self.done or i in self.failed
            if not ended and running >= k:
                continue
            running += not ended
            out.append({"kind": "Pod", "metadata": {
                "name": f"{j['metadata']['name']}-{i}-abcde",
                "labels": {**j["spec"]["template"]["metadata"]["labels"], "batch.kubernetes.io/job-completion-index": str(i)},
                "ownerReferences": [{"kind": "Job", "uid": j["metadata"]["uid"]}]},
                "spec": {"nodeName": "gpu-0"},
                "status": {"phase": "Succeeded" if i in self.done else "Failed" if i in self.failed else "Running"}})
        return out


def kubectl_calls(fake, since: int = 0) -> list[str]:
    return [" ".join(c.words[:2]) for c in fake.calls[since:] if c.program == "kubectl"]


@pytest.mark.parametrize("n", SIZES)
def test_a_kubernetes_sweep_costs_the_same_few_kubectl_calls_for_any_n(fake, n):
    cluster = Cluster(fake)
    fake.kubectl("get", KUEUE_GATE_READ, answer=items([node("gpu-0", 8)]))  # Kueue there, no queue for us
    done = sweeps.submit("kubernetes", K8S_SPEC, SubmitOptions(), trials(n), min(K, n))
    calls = kubectl_calls(fake)
    # the gates' ONE read of the Kueue queues, nodes and pods (a single submit pays it too), then ONE create of the
    # Indexed Job, suspended (its server check: no dry run), and ONE server-side apply of what it owns and of the
    # Job released: 3 kubectl calls for any N
    assert calls == [f"get {KUEUE_GATE_READ}", "create -f", "apply --server-side"], calls
    created = json.loads(fake.kubectl_calls("create")[0].stdin)["items"][0]
    assert created["spec"]["suspend"] is True  # no pod before its table and Secrets exist
    applied = json.loads(fake.kubectl_calls("apply")[0].stdin)["items"]
    assert [o["kind"] for o in applied] == ["ConfigMap", "Job"] and applied[-1]["spec"]["suspend"] is False
    job = cluster.job
    assert (job["spec"]["completionMode"], job["spec"]["completions"], job["spec"]["parallelism"]) == \
        ("Indexed", n, min(K, n))
    assert job["spec"]["suspend"] is False and job["metadata"]["labels"][SWEEP_LABEL] == done.sweep
    assert [r["action"] for r in job["spec"]["podFailurePolicy"]["rules"]] == ["Count", "FailIndex"]
    (table,) = cluster.owned
    assert table["kind"] == "ConfigMap" and table["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    ids = [v.id for v in done.views]
    assert [table["data"][f"{i}.id"] for i in range(n)] == ids
    assert [records.load(i)["backend"]["index"] for i in ids] == list(range(n))

    # status --sweep: ONE get of the Job and its pods, ONE exec reading the running trials' status files
    since = len(fake.calls)
    rows = sweeps.status(done.sweep)
    assert kubectl_calls(fake, since) == ["get jobs,pods", "exec job/" + job["metadata"]["name"]]
    assert [r.state for r in rows] == ["RUNNING"] * min(K, n) + ["PENDING"] * max(0, n - K)

    # a trial ends: nothing to release (the Job controller starts the next), the finished one's logs saved
    cluster.done.add(0)
    since = len(fake.calls)
    rows = sweeps.status(done.sweep)
    got = kubectl_calls(fake, since)
    # + ONE logs call saving the trials that ended since (trial 0 alone here), + the exec of the running ones
    assert got == ["get jobs,pods", "logs -l"] + (["exec job/" + job["metadata"]["name"]] if n > 1 else []), got
    assert rows[0].state == "COMPLETE"
    assert (records.artifact_dir(ids[0]) / "logs.txt").read_text() == f"words of {ids[0]}\n"

    # cancel --sweep: ONE delete of the Job (UID precondition); its answer says which trial had ended
    cluster.done.add(n - 1)
    since = len(fake.calls)
    views, errors = sweeps.cancel(done.sweep)
    assert errors == []
    got = kubectl_calls(fake, since)
    if n > 1:
        assert got == ["delete --raw"], got
        (raw,) = fake.kubectl_calls("delete", "--raw")
        assert json.loads(raw.stdin)["preconditions"] == {"uid": job["metadata"]["uid"]}
    states = [records.load(i)["state"] for i in ids]
    assert states == ["COMPLETE"] + ["CANCELED"] * (n - 2) + ["COMPLETE"] * (n > 1)


def test_kubernetes_cancel_of_one_trial_stops_its_index_alone(fake):
    """One trial: the table marks it canceled (an index not started exits at once), its pod is deleted (exit 143:
    FailIndex); the Job and the other trials are never touched."""
    cluster = Cluster(fake)
    done = sweeps.submit("kubernetes", K8S_SPEC, SubmitOptions(), trials(4), K)
    ids = [v.id for v in done.views]
    from taobank.core import platform as core

    views, errors = core.cancel(None, [ids[1], ids[3]])
    assert errors == [] and not cluster.deleted
    assert [records.load(i)["state"] for i in ids] == ["PENDING", "CANCELED", "PENDING", "CANCELED"]
    patches = fake.kubectl_calls("patch", "configmap")  # one job at a time (cancel ID ID): one patch each
    assert {p.words[2] for p in patches} == {cluster.owned[0]["metadata"]["name"]}
    assert [sorted(json.loads(p.words[p.words.index("-p") + 1])["data"]) for p in patches] == [["1.cancel"],
                                                                                              ["3.cancel"]]
    pods = fake.kubectl_calls("delete", "pods")
    assert {c.words[3] for c in pods} == {f"batch.kubernetes.io/controller-uid={cluster.job['metadata']['uid']},"
                                          f"batch.kubernetes.io/job-completion-index in ({i})" for i in (1, 3)}
    assert not fake.kubectl_calls("delete", "jobs")


def test_kubernetes_cancel_of_trials_together_is_one_patch_and_one_delete(fake):
    cluster = Cluster(fake)
    done = sweeps.submit("kubernetes", K8S_SPEC, SubmitOptions(), trials(5), K)
    ids = [v.id for v in done.views]
    cluster.done.add(2)  # ended after the last status: the record still says PENDING
    from taobank.core import platform as core

    views, errors = core.cancel(None, ids[1:4], batch=True)
    assert errors == [] and not cluster.deleted
    (patch,) = fake.kubectl_calls("patch", "configmap")
    assert sorted(json.loads(patch.words[patch.words.index("-p") + 1])["data"]) == ["1.cancel", "3.cancel"]
    (pods,) = fake.kubectl_calls("delete", "pods")
    assert pods.words[3].endswith("batch.kubernetes.io/job-completion-index in (1,3)")
    assert [records.load(i)["state"] for i in ids] == ["PENDING", "CANCELED", "COMPLETE", "CANCELED", "PENDING"]


def test_kubernetes_cancel_sweep_that_cannot_delete_leaves_the_trials_active_with_one_line_each(fake):
    Cluster(fake)
    done = sweeps.submit("kubernetes", K8S_SPEC, SubmitOptions(), trials(3), K)
    fake.kubectl("delete", "--raw", rc=1, stderr='Error from server (Forbidden): jobs.batch is forbidden')
    views, errors = sweeps.cancel(done.sweep)
    ids = [v.id for v in done.views]
    assert len(errors) == 3 and all("forbidden" in e for e in errors)
    assert {records.load(i)["state"] for i in ids} == {"PENDING"}


# ------------------------------------------------------------------ benchmarks/sweep.py --check (no cluster)
def test_the_sweep_benchmark_check_flags_every_broken_count():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "sweep.py"
    spec = importlib.util.spec_from_file_location("sweep_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ssh_cmd = ["ssh", "-l", "u", "--", "login", "sh -c 'scancel $ids' tao 1_0 1_1"]
    good = {"platform": "slurm", "n": 4, "trials": 4, "after_cancel": ["CANCELED"] * 4,
            "sweep_submit": {"calls": 2, "connections": 1, "writes": 0, "wall_s": 1.0},
            "sweep_status": {"calls": 1, "connections": 0, "writes": 0, "wall_s": 1.0},
            "sweep_cancel": {"calls": 1, "connections": 0, "writes": 0, "wall_s": 1.0},
            "one_submit": {"calls": 3}, "cancel_log": [ssh_cmd]}
    assert mod.check([good]) == []
    bad = {**good, "sweep_submit": {**good["sweep_submit"], "calls": 4},
           "sweep_status": {**good["sweep_status"], "calls": 3}, "cancel_log": [ssh_cmd, ssh_cmd],
           "after_cancel": ["CANCELED", "RUNNING", "CANCELED", "CANCELED"]}
    got = mod.check([bad])
    assert len(got) == 5, got  # 4 > 3 commands, more than one submit's 3, status 3 > 2, two scancels, one running
    delete = ["kubectl", "-n", "ns", "delete", "--raw", "/apis/batch/v1/namespaces/ns/jobs/x"]
    k8s = {**good, "platform": "kubernetes", "sweep_submit": {**good["sweep_submit"], "calls": 3, "writes": 2},
           "one_submit": {"calls": 3},
           "cancel_log": [delete]}
    assert mod.check([k8s]) == []  # the gates' read, the Indexed Job, then its table and the Job released
    dearer = mod.check([{**k8s, "sweep_submit": {**k8s["sweep_submit"], "calls": 4}}])
    assert len(dearer) == 2 and "took 4 kubectl calls" in dearer[0] and "more than one single submit" in dearer[1]
    k8s = {**k8s, "sweep_submit": {**good["sweep_submit"], "calls": 6, "writes": 4}, "one_submit": {"calls": 6},
           "sweep_status": {**good["sweep_status"], "calls": 2},
           "cancel_log": [["kubectl", "-n", "ns", "get", "jobs"], delete]}
    got = mod.check([k8s])
    assert len(got) == 3 and "took 6 kubectl calls" in got[0] and "at most 1" in got[1] and "get, delete" in got[2], got


# ------------------------------------------------------------------ sweep best
@pytest.mark.parametrize("n", (1, 10))
def test_slurm_sweep_best_lists_every_trial_in_one_remote_command(slurm, tmp_path, monkeypatch, n):
    """Each trial's folder written by the fake trainer (fake.best_val = its value); the fake login node runs the
    real listing script on them: ONE remote command ranks all N."""
    import subprocess
    from pathlib import Path

    from taobank import results_shell

    monkeypatch.setenv("SLURM_BASE_RESULTS_DIR", str(tmp_path / "base"))
    slurm.ssh("STAGE_MANY")
    slurm.ssh("SBATCH_ARRAY", "777\n")
    values = [str(300 + (i * 37) % 200) for i in range(n)]
    done = sweeps.submit("slurm", SLURM_SPEC, SubmitOptions(), [{"fake.best_val": v} for v in values], min(K, len(values)))
    trainer = Path(__file__).resolve().parents[2] / "testclusters" / "fake_tao_train.sh"
    for v, view in zip(values, done.views):
        folder = records.load(view.id)["backend"]["results_dir"]
        subprocess.run(["sh", str(trainer), "--results", folder, "--epochs", "3", "--action", "train",
                        f"fake.best_val={v}"], check=True, capture_output=True)

    def login(call):
        p = subprocess.run(["sh", "-c", results_shell.LIST_MANY, "tao", *call.args], capture_output=True, text=True)
        return ok(p.stdout, p.returncode, p.stderr)

    slurm.ssh("LIST_MANY", login)
    since = len(slurm.calls)
    win = sweeps.best(done.sweep, "val_loss", "min")
    assert remote_commands(slurm, since) == ["LIST_MANY"]
    low = min(range(n), key=lambda i: int(values[i]))
    assert win.id == done.views[low].id and abs(win.value - int(values[low]) / 1000) < 1e-9
    assert win.checkpoints == ["train/model_epoch_001_step_00020.pth"] and len(win.ranked) == n
    assert [e["value"] for e in win.ranked] == sorted(int(v) / 1000 for v in values)
