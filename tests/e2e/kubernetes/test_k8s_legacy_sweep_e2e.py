"""A sweep made by 0.3.x still in flight after the upgrade: its trials are Jobs of their own, those past
--max-concurrent created suspended (``held`` in their records). Made here as 0.3.x made them (its Job of each trial
rendered by the bank's own renderer, the held ones with ``suspend: true``, its records bound to them), then the new
bank's ``status --sweep`` releases them as slots free, never more than K at once, until every trial completes on the
real kubelets."""
from __future__ import annotations

import copy
import json
import secrets
import time
from datetime import datetime

import pytest
import k8s_verbs_support
from k8s_verbs_support import NAMESPACE

import testclusters.kubernetes as lk
from taobank import pins, records
from taobank.platforms.kubernetes import render
from taobank.platforms.kubernetes.kubectl import json_objects
from taobank.platforms.kubernetes.render import NO_RESULTS
from taobank.states import State
from tests.support.results_cli import tao_jobs

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s
BUSYBOX = str(pins.resolve("images.busybox"))


def old_sweep(k8s, n: int, k: int) -> tuple[str, list[str]]:
    """What 0.3.x's ``submit --sweep ... --max-concurrent k`` left: n Jobs (tao-sweep label, the ones from k on
    suspended) and n records bound to them, ``held`` where suspended."""
    tag = secrets.token_hex(3)
    sweep, ids = f"dino-sweep-old{tag}", [f"dino-train-old{tag}{i}" for i in range(n)]
    jobs = []
    for i, jid in enumerate(ids):
        spec = {"image": BUSYBOX, "args": ["sh", "-c", f"echo old trial {i}; sleep 3"], "gpus": 1,
                "node_selector": {lk.REAL_NODE_LABEL: "true"}, "no_results": True}
        job = copy.deepcopy(render.find(render.render_manifests(spec, job_id=jid, namespace=NAMESPACE,
                                                                name=render.job_name_for(jid)), "Job"))
        job["metadata"]["labels"]["tao-sweep"] = sweep
        job["spec"]["suspend"] = i >= k
        jobs.append(job)
    k8s.ids += ids
    made = json_objects(k8s.kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": jobs})).stdout)
    for i, (jid, job) in enumerate(zip(ids, made)):
        records.open_record("kubernetes", BUSYBOX, "dino", "train", "A", NO_RESULTS, job_id=jid,
                            backend={"namespace": NAMESPACE, "context": "", "max_concurrent": k},
                            sweep=(sweep, i, {"old.i": str(i)}), check_folder=False)
        records.mark(jid, State.PENDING, backend_ref=f"{NAMESPACE}/{job['metadata']['name']}", message="Job created",
                     backend={"uid": job["metadata"]["uid"], "name": job["metadata"]["name"], "owned": "",
                              "nodes": 1, "held": i >= k})
    return sweep, ids


def test_a_0_3_sweep_in_flight_is_released_by_status_until_every_trial_completes(k8s, monkeypatch):
    monkeypatch.setenv("TAO_STATE_DIR", k8s.env["TAO_STATE_DIR"])
    sweep, ids = old_sweep(k8s, 3, 1)
    end = time.time() + 150
    while True:  # a user looking now and then: each status frees the slot of a trial that ended
        seen = json.loads(tao_jobs("status", "--sweep", sweep, "--json", env=k8s.env).stdout)
        if all(r["state"] == "COMPLETE" for r in seen):
            break
        assert not {r["state"] for r in seen} & {"ERROR", "UNKNOWN", "CANCELED"}, seen
        assert time.time() < end, f"the old sweep did not finish: {seen}"
        time.sleep(2)
    assert [records.load(j)["backend"]["held"] for j in ids] == [False] * 3
    spans = []
    for jid in ids:
        (pod,) = k8s.kjson("get", "pods", "-l", f"tao-job-id={jid}")["items"]
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert term["exitCode"] == 0
        spans.append((datetime.fromisoformat(term["startedAt"].replace("Z", "+00:00")),
                      datetime.fromisoformat(term["finishedAt"].replace("Z", "+00:00"))))
    assert max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans) == 1  # K=1: one at a time
    patches = [c for c in k8s.calls() if "patch" in c and "job" in c]
    assert len(patches) == 2 and all('{"spec":{"suspend":false}}' in c for c in patches), patches
