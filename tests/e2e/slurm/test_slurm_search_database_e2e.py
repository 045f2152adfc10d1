"""A search whose study lives in PostgreSQL, on the local SLURM cluster: a local PostgreSQL (Debian's, on 127.0.0.1
with a password: testclusters/postgres.py; the local nodes run on this host) and 4 trials of TPE, at most 2 at
once, in ONE job array. The URL is given by NAME (``--study-storage-env``): it reaches each array task in the
credentials file staged on stdin, never on a command line, in the sbatch script, a record or any output.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from taobank.platforms.slurm.ssh import Connection
from tests.support.results_cli import tao_jobs as jobs

pytestmark = pytest.mark.e2e

BANK = Path(__file__).resolve().parents[3]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"
TRIALS, K = 4, 2
NAME = "TAO_STUDY_DB"


@pytest.fixture()
def database():
    from testclusters import postgres

    with postgres.running() as db:
        yield db


def test_array_tasks_share_one_study_in_postgresql_and_the_url_shows_nowhere(slurm_env, tmp_path, database,
                                                                            monkeypatch):
    monkeypatch.setenv(NAME, database.url)
    spec = {"network_arch": "dino", "action": "train", "num_gpus": 1, "max_num_gpus_per_node": 8, "cpus_per_task": 1,
            "time_hours": 0.5, "container_runtime": "none", "spec_files": {"fake_tao_train.sh": str(TRAINER)},
            "command": ["sh", "-c", 'f=$1; shift; exec sh "$f" --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" '
                        '--epochs 3 --sleep 1 "$@"', "tao", "{specs}/fake_tao_train.sh", "-e", "spec.yaml",
                        "fake.lr_optimum=0.001"]}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_slurm.py"), "submit", "--spec", str(path),
                           "--search", "tpe", "--trials", str(TRIALS), "--max-concurrent", str(K), "--kpi", "val_loss",
                           "--space", "train.optim.lr=loguniform(1e-5,1e-1)", "--prune", "none",
                           "--study-storage-env", NAME, "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    said = [proc.stdout + proc.stderr]
    done = json.loads(proc.stdout)
    sweep = done["sweep"]
    assert f"study database ${NAME} reached from here: study {sweep} created" in done["gate"]
    aid = done["jobs"][0]["backend_ref"].split(":")[1].split("_")[0]
    conn = Connection()
    deadline = time.time() + 600
    while conn.remote(["squeue", "-h", "-r", "-j", aid], check=False).stdout.strip():
        assert time.time() < deadline, "the search's array still runs after 10 minutes"
        time.sleep(5)
    res = jobs("status", "--sweep", sweep, "--json")
    said.append(res.stdout + res.stderr)
    rows = json.loads(res.stdout)
    assert len(rows) == TRIALS and {r["state"] for r in rows} == {"COMPLETE"}, rows
    for r in rows:
        assert set(r["overrides"]) == {"train.optim.lr"} and r["study"]["state"] == "COMPLETE", r
    res = jobs("study", sweep, "--json")
    said.append(res.stdout + res.stderr)
    study = json.loads(res.stdout)
    assert sorted(t["job_id"] for t in study["trials"]) == sorted(j["id"] for j in done["jobs"])
    for j in done["jobs"]:
        res = jobs("logs", j["id"])
        said.append(res.stdout + res.stderr)
    assert database.password not in "".join(said), "the URL's password was printed"
    from taobank import records

    for j in done["jobs"]:  # neither the record nor the trial's staged script holds it
        rec = records.load(j["id"])
        assert database.password not in json.dumps(rec) and rec["backend"]["search_storage_env"] == NAME
        script = conn.remote(["cat", rec["backend"]["script"]]).stdout
        assert "search.pyz --settings" in script and database.password not in script
