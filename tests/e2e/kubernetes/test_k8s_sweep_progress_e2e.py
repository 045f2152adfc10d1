"""Issue 37 on real kubelet pods: the trials of a Kubernetes sweep that ended while nobody looked keep their final
epoch and KPIs in the ``status --sweep`` table, read (ONE ``kubectl exec``) through the pod of a sibling trial that
still runs on the shared results volume; once no trial runs, the last one's come from the log its pod left as it
ended (no exec then)."""
from __future__ import annotations

import json
import time

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


def phases(k8s, sweep: str) -> dict[int, str]:
    """Each completion index's pod phase, by kubectl alone."""
    pods = k8s.kjson("get", "pods", "-l", f"tao-sweep={sweep}")["items"]
    return {int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]): p["status"].get("phase")
            for p in pods}


def rows(text: str) -> dict[str, str]:
    """The sweep table's lines by trial number."""
    return {ln.split()[0]: ln for ln in text.splitlines()[1:] if ln.strip()}


def test_finished_trials_keep_progress_and_kpis_in_the_table_while_a_sibling_runs(k8s, trainer_on_pvc):
    proc = k8s.tao("submit", "--json", "--image", BUSYBOX, "--network-arch", "dino", "--action", "train",
                   "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "1", "--no-input-check", "--command",
                   f'sh {trainer_on_pvc} --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs 3 --sleep 5 '
                   "-e spec.yaml", "--sweep", "fake.best_val=300,100,200", "--max-concurrent", "2")
    done = json.loads(proc.stdout)
    sweep, ids = done["sweep"], [j["id"] for j in done["jobs"]]
    k8s.ids += [*ids, sweep]
    end = time.time() + 150
    while True:  # nobody calls the bank: trials 0 and 1 end, trial 2 takes their slot and runs
        seen = phases(k8s, sweep)
        done_ = k8s.kjson("get", "jobs", "-l", f"tao-sweep={sweep}")["items"][0]["status"].get("completedIndexes")
        if done_ in ("0,1", "0-1") and seen.get(2) == "Running":  # counted by the Job controller, 2 still runs
            break
        assert time.time() < end and "Failed" not in seen.values(), seen
        time.sleep(1)
    since = len(k8s.calls())
    table = tao_jobs("status", "--sweep", sweep, env=k8s.env).stdout
    by_trial = rows(table)
    assert "COMPLETE" in by_trial["0"] and "COMPLETE" in by_trial["1"] and "RUNNING" in by_trial["2"], table
    for trial in ("0", "1"):  # their final epoch and KPIs, read through trial 2's running pod
        assert " 3/3 " in by_trial[trial] and "val_loss=" in by_trial[trial], table
    execs = [c for c in k8s.calls()[since:] if c[:1] == ["kubectl"] and "exec" in c]
    assert len(execs) == 1, execs
    view = {r["id"]: r for r in json.loads(tao_jobs("status", "--sweep", sweep, "--json", env=k8s.env).stdout)}
    # each trial's own last KPIs (fake.best_val 300 and 100: trial 1's loss is the lower)
    assert 0 < view[ids[1]]["kpis"]["val_loss"] < view[ids[0]]["kpis"]["val_loss"], view
    end = time.time() + 120
    while not any(c["type"] == "Complete" and c["status"] == "True" for c in k8s.kjson(
            "get", "jobs", "-l", f"tao-sweep={sweep}")["items"][0]["status"].get("conditions") or []):
        assert time.time() < end, "the sweep's Job did not complete"  # (its controller counted trial 2's end)
        time.sleep(1)
    since = len(k8s.calls())
    table = tao_jobs("status", "--sweep", sweep, env=k8s.env).stdout  # no trial runs: no pod to ask
    by_trial = rows(table)  # the last trial's final lines came with the log saved at its end
    assert "COMPLETE" in by_trial["2"] and all(" 3/3 " in by_trial[t] and "val_loss=" in by_trial[t]
                                               for t in ("0", "1", "2")), table
    assert not [c for c in k8s.calls()[since:] if c[:1] == ["kubectl"] and "exec" in c]
    logs = tao_jobs("logs", ids[2], env=k8s.env).stdout
    assert "@@tao-final" not in logs  # the bank's lines, not the job's output
