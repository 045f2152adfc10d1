"""A sweep on real kubelet pods: every trial Job in one create, the ones past --max-concurrent suspended and
released as slots free, the trials ranked by status.json and cancelled as one unit.

Each trial runs testclusters/fake_tao_train.sh from the PVC (busybox); ``fake.best_val`` sets its lowest
val_loss, so the best trial is known in advance.
"""
from __future__ import annotations

import json
import time
from datetime import datetime

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


def submit(k8s, trainer: str, *flags: str, sleep: int) -> dict:
    proc = k8s.tao("submit", "--json", "--image", BUSYBOX, "--network-arch", "dino", "--action", "train",
                   "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "1", "--no-input-check", "--command",
                   f'sh {trainer} --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs 3 --sleep {sleep} '
                   "-e spec.yaml", *flags)
    out = json.loads(proc.stdout)
    k8s.ids += [j["id"] for j in out["jobs"]]
    return out


def creates(k8s) -> int:
    """kubectl create calls that made objects (not the gate's server dry-run nor its can-i questions)."""
    return sum(1 for argv in k8s.calls() if argv[0].endswith("kubectl") and "create" in argv and "-f" in argv
               and "--dry-run=server" not in argv)


def test_a_sweep_holds_all_but_k_and_best_names_the_lowest(k8s, trainer_on_pvc):
    done = submit(k8s, trainer_on_pvc, "--sweep", "fake.best_val=300,100,200", "--max-concurrent", "2", sleep=2)
    assert creates(k8s) == 1  # every trial Job in one kubectl create
    sweep, ids = done["sweep"], [j["id"] for j in done["jobs"]]
    assert [j["backend"]["held"] for j in done["jobs"]] == [False, False, True]
    deadline = time.time() + 240
    while True:
        seen = json.loads(tao_jobs("status", "--sweep", sweep, "--json", env=k8s.env).stdout)
        if all(r["state"] in ("COMPLETE", "ERROR", "CANCELED") for r in seen) or time.time() > deadline:
            break
        time.sleep(2)
    assert [r["state"] for r in seen] == ["COMPLETE"] * 3, seen
    assert [r["overrides"] for r in seen] == [{"fake.best_val": v} for v in ("300", "100", "200")]
    # issue 37: the trials that ended while another ran keep their final epoch and KPIs (read through its pod)
    assert [(r["progress"], "val_loss" in r["kpis"]) for r in seen[:2]] == [("3/3", True)] * 2, seen
    # the pods' own start and end: never more than 2 trials ran at once
    spans = []
    for jid in ids:
        (pod,) = k8s.kjson("get", "pods", "-l", f"tao-job-id={jid}")["items"]
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        spans.append((datetime.fromisoformat(term["startedAt"].replace("Z", "+00:00")),
                      datetime.fromisoformat(term["finishedAt"].replace("Z", "+00:00"))))
    assert max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans) <= 2
    assert "override fake.best_val=100" in tao_jobs("logs", ids[1], env=k8s.env).stdout
    best = json.loads(tao_jobs("sweep", "best", sweep, "--kpi", "val_loss", "--json", env=k8s.env).stdout)
    assert best["id"] == ids[1] and best["trial"] == 1 and abs(best["value"] - 0.1) < 1e-9
    assert best["checkpoints"] == ["train/model_epoch_001_step_00020.pth"]


def test_cancel_sweep_leaves_nothing_running(k8s, trainer_on_pvc):
    done = submit(k8s, trainer_on_pvc, "--sweep", "fake.best_val=1,2", "--max-concurrent", "1", sleep=30)
    tao_jobs("cancel", "--sweep", done["sweep"], env=k8s.env)
    listed = json.loads(tao_jobs("list", "--sweep", done["sweep"], "--json", env=k8s.env).stdout)
    assert {r["state"] for r in listed} == {"CANCELED"} and len(listed) == 2
    selector = f"tao-job-id in ({','.join(j['id'] for j in done['jobs'])})"
    deadline = time.time() + 60  # deleted in the background: the Jobs and their pods go within seconds
    while k8s.kubectl("get", "jobs,pods", "-l", selector, "-o", "name").stdout.strip():
        assert time.time() < deadline, "trial Jobs or pods still there after cancel --sweep"
        time.sleep(1)
