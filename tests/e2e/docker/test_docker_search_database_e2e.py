"""A search whose study lives in PostgreSQL, on the real local Docker engine: a local PostgreSQL (Debian's, on
127.0.0.1 with a password: testclusters/postgres.py) and 6 trials of TPE with ASHA, at most 2 at once, each
trial's container (tao-local.test/python:1, host network) asking the same database for its learning rate through
the runner and the database libraries staged beside it. The URL is given by NAME (``--study-storage-env``) and
shows nowhere: not in any output, record, staged file or container command line.
"""
from __future__ import annotations

import json
import time

import pytest

from docker_support import BANK, Docker

pytestmark = pytest.mark.e2e

FAKE = f"{BANK / 'testclusters'}:/fake"
TRAIN = 'exec sh /fake/fake_tao_train.sh --results "$RESULTS_DIR" --epochs 4 --sleep 1 "$@"'
TRIALS, K = 6, 2
NAME = "TAO_STUDY_DB"


@pytest.fixture()
def database():
    from testclusters import postgres

    with postgres.running() as db:
        yield db


def test_trials_in_containers_share_one_study_in_postgresql_and_the_url_shows_nowhere(docker_cluster, tmp_path,
                                                                                     database):
    from testclusters.docker import PYTHON_IMAGE

    dk = Docker(docker_cluster, tmp_path)
    dk.image = PYTHON_IMAGE
    dk.env[NAME] = database.url
    said = []
    res = dk.ok("submit", "--json", "--image", dk.image, "--gpus", "0", "--network", "host", "--network-arch", "dino",
                "--action", "train", "--mount", FAKE, "--stop-grace", "5", "--search", "tpe", "--trials", str(TRIALS),
                "--max-concurrent", str(K), "--kpi", "val_loss", "--space", "train.optim.lr=loguniform(1e-5,1e-1)",
                "--prune", "asha", "--study-storage-env", NAME,
                "--", "sh", "-c", TRAIN, "tao", "-e", "spec.yaml", "fake.lr_optimum=0.001")
    said.append(res.stdout + res.stderr)
    done = json.loads(res.stdout)
    sweep, ids = done["sweep"], [j["id"] for j in done["jobs"]]
    assert f"study database ${NAME} reached from here: study {sweep} created" in done["gate"]
    assert f"study database ${NAME} reached from a trial's container" in done["gate"]
    folder = dk.results / sweep / "search"
    assert {p.name for p in folder.iterdir()} >= {"search.pyz", "study.json", "search-db-0.zip"}

    def stored(jid: str) -> str:
        return json.loads((dk.tmp / "state" / f"{jid}.json").read_text())["state"]

    end = time.time() + 600
    while any(stored(j) in ("PENDING", "RUNNING") for j in ids):
        assert time.time() < end, [stored(j) for j in ids]
        time.sleep(2)
    res = dk.run("tao_jobs.py", "status", "--sweep", sweep, "--json")
    said.append(res.stdout + res.stderr)
    rows = json.loads(res.stdout)
    assert {r["state"] for r in rows} <= {"COMPLETE", "PRUNED"} and "COMPLETE" in {r["state"] for r in rows}, rows
    for r in rows:  # each trial's values and state read back from the database
        assert set(r["overrides"]) == {"train.optim.lr"} and r["study"]["state"] == r["state"], r
    assert not (folder / "journal.log").exists()  # the study never touched a journal file
    res = dk.run("tao_jobs.py", "study", sweep, "--json")
    said.append(res.stdout + res.stderr)
    study = json.loads(res.stdout)
    assert sorted(t["job_id"] for t in study["trials"]) == sorted(ids) and study["best"] is not None
    res = dk.run("tao_jobs.py", "sweep", "best", sweep, "--json")
    said.append(res.stdout + res.stderr)
    assert json.loads(res.stdout)["id"] == study["best"]["job_id"]
    for jid in ids:
        res = dk.run("tao_docker.py", "logs", jid)
        said.append(res.stdout + res.stderr)
        assert "tao-search: trial " in res.stdout
    # the URL's password nowhere: outputs, records, the staged settings, the logs
    seen = "".join(said) + "".join(p.read_text() for p in (dk.tmp / "state").rglob("*.json"))
    seen += (folder / "study.json").read_text()
    assert database.password not in seen and NAME in (folder / "study.json").read_text()
    res = dk.run("tao_jobs.py", "study", sweep, drop=(NAME,))  # the database is read with this shell's URL
    assert res.returncode != 0 and f"{NAME} is not set" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    # on the engine's default network, 127.0.0.1 is the container's own: refused at submit, nothing made
    before = dk.records()
    res = dk.tao("submit", "--image", dk.image, "--gpus", "0", "--network-arch", "dino", "--action", "train",
                 "--search", "tpe", "--trials", "2", "--kpi", "val_loss", "--space", "train.optim.lr=uniform(0.1,0.2)",
                 "--study-storage-env", NAME, "--", "sh", "-c", TRAIN, "tao")
    assert res.returncode != 0 and "a trial's container cannot reach its study database" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and database.password not in res.stdout + res.stderr
    assert dk.records() == before
