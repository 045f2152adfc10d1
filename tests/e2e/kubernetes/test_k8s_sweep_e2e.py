"""A sweep on real kubelet pods: ONE Indexed Job whose Job controller runs every trial, at most --max-concurrent at
once, with nobody calling the bank after submit; the trials ranked by status.json; one trial canceled alone while
the others finish; the whole sweep canceled in one call.

Each trial runs testclusters/fake_tao_train.sh from the PVC; ``fake.best_val`` sets its lowest val_loss, so the
best trial is known in advance. Completion is checked with kubectl alone.
"""
from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
import k8s_verbs_support
from k8s_verbs_support import ON_REAL

import testclusters.kubernetes as lk
from taobank import pins
from tests.support.results_cli import tao_jobs

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s
trainer_on_pvc = k8s_verbs_support.trainer_on_pvc
BUSYBOX = str(pins.resolve("images.busybox"))
#: Served only by the local registry, which demands the $oauthtoken credentials.
TAO_IMAGE = str(pins.resolve("images.tao_toolkit.pyt"))


def submit(k8s, trainer: str, *flags: str, sleep: int, image: str = BUSYBOX, env: dict | None = None) -> dict:
    proc = k8s.tao("submit", "--json", "--image", image, "--network-arch", "dino", "--action", "train",
                   "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "1", "--no-input-check", "--command",
                   f'sh {trainer} --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs 3 --sleep {sleep} '
                   "-e spec.yaml", *flags, env=env)
    out = json.loads(proc.stdout)
    k8s.ids += [j["id"] for j in out["jobs"]]
    k8s.ids.append(out["sweep"])  # the sweep's Job, table and Secrets carry the sweep id as their job-id label
    return out


def the_job(k8s, sweep: str) -> dict:
    (job,) = k8s.kjson("get", "jobs", "-l", f"tao-sweep={sweep}")["items"]
    return job


def wait_job_end(k8s, sweep: str, timeout: float = 240) -> dict:
    """kubectl alone: the sweep's Job until it has ended (Complete or Failed)."""
    end = time.time() + timeout
    while True:
        job = the_job(k8s, sweep)
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
               for c in job["status"].get("conditions") or []):
            return job
        assert time.time() < end, f"the sweep's Job did not end: {job['status']}"
        time.sleep(2)


def pods(k8s, sweep: str) -> list[dict]:
    return k8s.kjson("get", "pods", "-l", f"tao-sweep={sweep}")["items"]


def index(pod: dict) -> int:
    return int(pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])


def test_a_sweep_runs_by_itself_pulls_with_its_one_secret_and_best_names_the_lowest(k8s, trainer_on_pvc):
    lk.forget_image(TAO_IMAGE)  # every trial's pull needs the sweep's pull Secret
    key = Path(k8s.env[lk.NGC_KEY_FILE_ENV]).read_text().strip()
    done = submit(k8s, trainer_on_pvc, "--sweep", "fake.best_val=300,100,200,250", "--max-concurrent", "2",
                  "--ngc-pull-secret", sleep=2, image=TAO_IMAGE, env={"NGC_KEY": key})
    sweep, ids = done["sweep"], [j["id"] for j in done["jobs"]]
    calls_at_submit = len(k8s.calls())
    job = the_job(k8s, sweep)
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 2)
    assert [r["action"] for r in spec["podFailurePolicy"]["rules"]] == ["Count", "FailIndex"]
    uid = job["metadata"]["uid"]
    owned = k8s.kjson("get", "secrets,configmaps", "-l", f"tao-job-uid={uid}")["items"]
    assert sorted(o["kind"] for o in owned) == ["ConfigMap", "Secret"]  # ONE Secret for the 4 trials
    assert all(o["metadata"]["ownerReferences"][0]["uid"] == uid for o in owned)
    import base64  # made by a server-side apply: no value in its metadata (no last-applied annotation)
    for o in owned:
        meta = json.dumps(o["metadata"])
        assert key not in meta and base64.b64encode(key.encode()).decode()[:16] not in meta, o["metadata"]
        assert "kubectl.kubernetes.io/last-applied-configuration" not in (o["metadata"].get("annotations") or {})
    # nobody calls the bank from here on: the Job controller runs all 4 trials, 2 at a time
    job = wait_job_end(k8s, sweep)
    assert job["status"].get("completedIndexes") == "0-3" and not job["status"].get("failedIndexes"), job["status"]
    assert len(k8s.calls()) == calls_at_submit
    spans = []
    for pod in pods(k8s, sweep):
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        spans.append((datetime.fromisoformat(term["startedAt"].replace("Z", "+00:00")),
                      datetime.fromisoformat(term["finishedAt"].replace("Z", "+00:00"))))
    assert len(spans) == 4 and max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans) <= 2
    for text in (k8s.call_log.read_text(), json.dumps(job), *(json.dumps(k8s.record(i)) for i in ids)):
        assert key not in text
    best = json.loads(tao_jobs("sweep", "best", sweep, "--kpi", "val_loss", "--json", env=k8s.env).stdout)
    assert best["id"] == ids[1] and best["trial"] == 1 and abs(best["value"] - 0.1) < 1e-9
    assert best["checkpoints"] == ["train/model_epoch_001_step_00020.pth"]
    seen = json.loads(tao_jobs("status", "--sweep", sweep, "--json", env=k8s.env).stdout)
    assert [r["state"] for r in seen] == ["COMPLETE"] * 4
    assert [r["overrides"] for r in seen] == [{"fake.best_val": v} for v in ("300", "100", "200", "250")]
    assert "override fake.best_val=100" in tao_jobs("logs", ids[1], env=k8s.env).stdout
    # the sweep ended: its status deleted the Secret (the table stays with the Job until its TTL)
    assert not k8s.kjson("get", "secrets", "-l", f"tao-job-uid={uid}")["items"]


def test_a_canceled_trial_stops_alone_while_the_others_finish(k8s, trainer_on_pvc):
    done = submit(k8s, trainer_on_pvc, "--sweep", "fake.best_val=1,2,3,4", "--max-concurrent", "2", sleep=4)
    sweep, ids = done["sweep"], [j["id"] for j in done["jobs"]]
    end = time.time() + 90
    while not any(index(p) == 1 and p["status"].get("phase") == "Running" for p in pods(k8s, sweep)):
        assert time.time() < end, "trial 1 never ran"
        time.sleep(1)
    # trial 1 runs (its pod is deleted), trial 3 has not started (its table key makes it exit at once)
    out = json.loads(tao_jobs("cancel", ids[1], ids[3], "--json", env=k8s.env).stdout)
    assert [v["state"] for v in out] == ["CANCELED", "CANCELED"], out
    job = wait_job_end(k8s, sweep)
    assert job["status"].get("completedIndexes") == "0,2", job["status"]
    assert job["status"].get("failedIndexes") == "1,3", job["status"]
    by_index = {}
    for pod in pods(k8s, sweep):
        by_index.setdefault(index(pod), []).append(pod)
    (three,) = by_index[3]
    logs = k8s.kubectl("logs", three["metadata"]["name"]).stdout
    assert "sweep trial 3 was canceled" in logs and "override fake.best_val" not in logs
    seen = json.loads(tao_jobs("status", "--sweep", sweep, "--json", env=k8s.env).stdout)
    assert [r["state"] for r in seen] == ["COMPLETE", "CANCELED", "COMPLETE", "CANCELED"]


def test_cancel_sweep_is_one_delete_and_leaves_nothing_running(k8s, trainer_on_pvc):
    done = submit(k8s, trainer_on_pvc, "--sweep", "fake.best_val=1,2", "--max-concurrent", "1", sleep=30)
    since = len(k8s.calls())
    tao_jobs("cancel", "--sweep", done["sweep"], env=k8s.env)
    assert [c for c in k8s.calls()[since:] if c[0].endswith("kubectl")] and \
        len([c for c in k8s.calls()[since:] if c[0].endswith("kubectl")]) == 1
    listed = json.loads(tao_jobs("list", "--sweep", done["sweep"], "--json", env=k8s.env).stdout)
    assert {r["state"] for r in listed} == {"CANCELED"} and len(listed) == 2
    deadline = time.time() + 60  # the pods go first (foreground), then the Job and what it owns
    while k8s.kubectl("get", "jobs,pods,configmaps", "-l", f"tao-sweep={done['sweep']}", "-o", "name").stdout.strip():
        assert time.time() < deadline, "the sweep's Job, pods or table still there after cancel --sweep"
        time.sleep(1)


def test_a_sweep_the_server_refuses_leaves_nothing_on_the_cluster_and_says_why_in_one_line(k8s):
    """No dry run for a sweep: its suspended Job's create is the server's check. A namespace that does not exist:
    one line naming it, every trial record ERROR with that line, no Job anywhere."""
    proc = k8s.tao("submit", "--json", "--image", BUSYBOX, "--network-arch", "dino", "--action", "train", "--gpus", "0",
                   "--no-results", "--no-input-check", *ON_REAL, "--namespace", "tao-no-such-ns", "--args-json",
                   json.dumps(["sh", "-c", "exit 0", "tao"]), "--sweep", "t.x=1,2", check=False)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "namespace tao-no-such-ns does not exist" in proc.stderr, proc.stderr
    listed = json.loads(tao_jobs("list", "--json", env=k8s.env).stdout)
    assert len(listed) == 2 and {r["state"] for r in listed} == {"ERROR"}, listed
    sweep = k8s.record(listed[0]["id"])["sweep"]
    assert "does not exist" in k8s.record(listed[0]["id"])["message"]
    assert not k8s.kubectl("get", "jobs", "-A", "-l", f"tao-sweep={sweep}", "-o", "name", ns="default").stdout.strip()
