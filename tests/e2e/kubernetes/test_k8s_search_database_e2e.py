"""A search whose study lives in PostgreSQL, on real kubelet pods: a local PostgreSQL (Debian's, testclusters/
postgres.py) listening on the host address the pods reach, and 4 trials of TPE, at most 2 at once, in ONE Indexed
Job. The URL is given by NAME (``--study-storage-env``): it reaches each pod in the sweep's Secret (sent on stdin),
referenced by env; the database's libraries ride in ConfigMaps of 1 MiB each, mounted together at /tao-search. The
site pod checks the image's python3 and leaves out the journal's lock. The password shows in no output, record,
Job or ConfigMap.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import k8s_verbs_support
from k8s_verbs_support import ON_REAL

import testclusters.kubernetes as lk
from testclusters.kubernetes import search_image
from tests.support.results_cli import tao_jobs

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s
trainer_on_pvc = k8s_verbs_support.trainer_on_pvc
TRIALS, K = 4, 2
NAME = "TAO_STUDY_DB"


@pytest.fixture()
def database():
    from testclusters import postgres

    host = urlsplit(lk.s3_endpoint()).hostname  # the host's address the pods reach (the local S3 listens there)
    with postgres.running(listen=(str(host), "127.0.0.1")) as db:
        yield db


def test_pods_share_one_study_in_postgresql_and_the_url_shows_nowhere(k8s, trainer_on_pvc, database):
    image = search_image.ensure()
    env = {NAME: database.url}
    proc = k8s.tao("submit", "--json", "--image", image, "--network-arch", "dino", "--action", "train",
                   "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "0", "--no-input-check", "--command",
                   f'sh {trainer_on_pvc} --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs 3 '
                   "--sleep 1 -e spec.yaml fake.lr_optimum=0.001",
                   "--search", "tpe", "--trials", str(TRIALS), "--max-concurrent", str(K), "--kpi", "val_loss",
                   "--space", "train.optim.lr=loguniform(1e-5,1e-1)", "--prune", "none", "--study-storage-env", NAME,
                   env=env, timeout=400)
    said = [proc.stdout + proc.stderr]
    done = json.loads(proc.stdout)
    sweep = done["sweep"]
    k8s.ids += [j["id"] for j in done["jobs"]] + [sweep]
    assert f"study database ${NAME} reached from here: study {sweep} created" in done["gate"]
    assert "search site ok on the results volume (the image's python3 with numpy" in done["gate"]
    objs = k8s.kjson("get", "jobs,configmaps", "-l", f"tao-sweep={sweep}")["items"]
    maps = [o for o in objs if o["kind"] == "ConfigMap" and "binaryData" in o]
    assert len(maps) >= 3 and any("search-db-0.zip" in m["binaryData"] for m in maps)
    assert database.password not in json.dumps(objs)  # in no Job, no ConfigMap (the Secret holds it)
    end = time.time() + 600
    while True:  # kubectl alone: the Indexed Job until it has ended
        (job,) = k8s.kjson("get", "jobs", "-l", f"tao-sweep={sweep}")["items"]
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
               for c in job["status"].get("conditions") or []):
            break
        assert time.time() < end, job["status"]
        time.sleep(3)
    res = tao_jobs("status", "--sweep", sweep, "--json", env={**k8s.env, **env})
    said.append(res.stdout + res.stderr)
    rows = json.loads(res.stdout)
    failed = [r["id"] for r in rows if r["state"] != "COMPLETE"]
    logs = {i: tao_jobs("logs", i, "--tail", "30", env={**k8s.env, **env}).stdout[-3000:] for i in failed}
    assert len(rows) == TRIALS and not failed, ([(r["id"], r["state"], r.get("message")) for r in rows], logs)
    for r in rows:
        assert set(r["overrides"]) == {"train.optim.lr"} and r["study"]["state"] == "COMPLETE", r
    res = tao_jobs("study", sweep, "--json", env={**k8s.env, **env})
    said.append(res.stdout + res.stderr)
    study = json.loads(res.stdout)
    assert sorted(t["job_id"] for t in study["trials"]) == sorted(j["id"] for j in done["jobs"])
    for j in done["jobs"]:
        res = k8s.tao("logs", j["id"], check=False)
        said.append(res.stdout + res.stderr)
    assert database.password not in "".join(said)
    state = Path(k8s.env["TAO_STATE_DIR"])
    assert database.password not in "".join(p.read_text(errors="replace") for p in state.rglob("*.json"))
