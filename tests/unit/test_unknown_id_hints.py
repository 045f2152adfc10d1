"""A word that is no job's id, said for what it is: a sweep's id (and the verb's sweep form), or a platform's id of a
job as the BACKEND column of ``tao_jobs.py list`` shows it (and the bank's id to use). Every line is one line,
exit 1, and no cluster is contacted (the fake runner answers nothing)."""
from __future__ import annotations

import pytest

from fakeproc import k8s_record, slurm_record
from taobank import records
from taobank.core import record_selection

SWEEP = "dino-sweep-1a2b3c4d"
DOCKER_BASE = "/res"


def sweep_trials(n: int = 2) -> list[str]:
    out = []
    for i in range(n):
        rec = records.open_record("slurm", "none", "dino", "train", "A", f"/lustre/results/{records.ID_PLACEHOLDER}",
                                  backend={"backend_type": "slurm", "partition": "gpu", "container_runtime": "none"},
                                  sweep=(SWEEP, i, {"train.optim.lr": f"0.{i + 1}"}))
        rec = records.mark(rec["id"], "PENDING", backend_ref=f"slurm:900_{i}",
                           backend={"slurm_job_id": f"900_{i}", "array_job_id": "900"})
        out.append(rec["id"])
    return out


def docker_record(container: str) -> str:
    jid = "custom-run-0000000a"
    records.open_record("docker", "img:1", "custom", "run", "A", f"{DOCKER_BASE}/{jid}", job_id=jid,
                        backend={"engine": "docker", "container": jid, "results_dir": f"{DOCKER_BASE}/{jid}"})
    records.mark(jid, "RUNNING", backend_ref=container[:12], backend={"container_id": container})
    return jid


def one_error(out) -> str:
    assert out.rc == 1 and len(out.err_lines) == 1 and out.out == "", out
    return out.err_lines[0]


@pytest.mark.parametrize("verb,says", [
    ("status", f"run tao_jobs.py status --sweep {SWEEP}"),
    ("cancel", f"run tao_jobs.py cancel --sweep {SWEEP}"),
    ("artifacts", f"tao_jobs.py sweep best {SWEEP} --kpi NAME names the best trial and its checkpoint"),
    ("logs", f"logs takes one trial's id (tao_jobs.py list --sweep {SWEEP} shows its trials' ids"),
    ("metrics", f"tao_jobs.py status --sweep {SWEEP} shows the sweep"),
])
def test_a_sweeps_id_given_as_a_job_names_the_sweep_form_of_the_verb(fake, cli, verb, says):
    sweep_trials()
    line = one_error(cli("tao_jobs.py", verb, SWEEP))
    assert line.startswith(f"error: {SWEEP} is a sweep (2 trials), not a job: ") and says in line, line
    assert fake.calls == []


def test_a_platform_helper_names_itself_for_its_own_sweep(fake, cli, slurm):
    sweep_trials()
    line = one_error(cli("tao_slurm.py", "status", SWEEP))
    assert line.endswith(f"run tao_slurm.py status --sweep {SWEEP}"), line
    line = one_error(cli("tao_docker.py", "cancel", SWEEP))  # another platform's sweep: the front door
    assert line.endswith(f"run tao_jobs.py cancel --sweep {SWEEP}"), line


@pytest.mark.parametrize("word", ["slurm:267", "267"])
@pytest.mark.parametrize("verb", ["artifacts", "status", "logs"])
def test_a_slurm_job_id_names_the_banks_job(fake, cli, word, verb):
    jid = slurm_record(slurm_job_id="267")["id"]
    slurm_record(slurm_job_id="268")
    line = one_error(cli("tao_jobs.py", verb, word))
    assert line == (f"error: {word} is job {jid} (its SLURM id, the BACKEND column of tao_jobs.py list): use that id: "
                    f"tao_jobs.py {verb} {jid}")
    assert fake.calls == []


def test_the_backend_form_is_the_one_list_shows(fake, cli):
    """The word recognised is what `tao_jobs.py list` prints under BACKEND, for every platform."""
    jobs = [slurm_record(slurm_job_id="267")["id"], k8s_record(namespace="team")["id"], docker_record("0a1b2c3d4e5f" * 5)]
    shown = cli("tao_jobs.py", "list", "--no-headers")
    backend = {line.split()[0]: line.split()[4] for line in shown.out.splitlines()}
    for jid in jobs:
        line = one_error(cli("tao_jobs.py", "status", backend[jid]))
        assert f"is job {jid} (" in line and line.endswith(f"use that id: tao_jobs.py status {jid}"), line
    assert backend[jobs[1]] == f"team/{jobs[1]}" and backend[jobs[2]] == "0a1b2c3d4e5f"


def test_no_match_says_where_ids_come_from(fake, cli):
    slurm_record(slurm_job_id="267")
    line = one_error(cli("tao_jobs.py", "artifacts", "slurm:999"))
    assert line == ("error: 'slurm:999' is not a job id: a job's id is the one submit printed (dino-train-1a2b3c4d), "
                    "and tao_jobs.py list shows each job's under ID")
    assert "tao_job_record.py open" not in line
    line = one_error(cli("tao_jobs.py", "status", "no-such-job-1234abcd"))
    assert line.startswith("error: no job record no-such-job-1234abcd in ")


def test_a_number_of_several_jobs_names_them_all(fake, cli):
    a, b = slurm_record(slurm_job_id="267")["id"], slurm_record(slurm_job_id="267")["id"]  # two clusters
    line = one_error(cli("tao_jobs.py", "status", "267"))
    assert line == (f"error: 267 is the platform's id of 2 jobs ({a}, {b}; the BACKEND column of tao_jobs.py list): "
                    "give status the id of the one you mean")


def test_a_slurm_array_id_names_its_sweep(fake, cli):
    sweep_trials(3)
    line = one_error(cli("tao_jobs.py", "cancel", "900"))
    assert line == f"error: 900 is the SLURM array of sweep {SWEEP}, not a job: run tao_jobs.py cancel --sweep {SWEEP}"
    line = one_error(cli("tao_jobs.py", "status", "900_1"))  # one task of the array: that trial
    assert "is job " in line and "(its SLURM id," in line


def test_the_records_are_read_only_on_the_error_path(fake, cli, monkeypatch):
    """A known id costs no look for a sweep or a backend id (no listing of every record)."""
    jid = slurm_record(slurm_job_id="267", state="COMPLETE")["id"]
    monkeypatch.setattr(record_selection, "explained", lambda *a: pytest.fail("explained on the normal path"))
    monkeypatch.setattr(records, "find", lambda *a, **k: pytest.fail("every record read on the normal path"))
    assert record_selection.load_for(jid, None, "status").id == jid


def test_parent_given_a_sweep_or_a_backend_id_says_which_job(fake, cli):
    from taobank.campaign import lineage
    from taobank.errors import TaoError

    sweep_trials()
    with pytest.raises(TaoError) as got:
        lineage.with_parent("slurm", {"command": "true"}, SWEEP)
    assert str(got.value).startswith(f"--parent {SWEEP} is a sweep (2 trials), not a job: tao_jobs.py sweep best "
                                     f"{SWEEP} --kpi NAME") and str(got.value).endswith("nothing was submitted")
    jid = slurm_record(slurm_job_id="267")["id"]
    with pytest.raises(TaoError) as got:
        lineage.with_parent("slurm", {"command": "true"}, "slurm:267")
    assert f"--parent slurm:267 is job {jid} (its SLURM id" in str(got.value) and f"use that id: --parent {jid}" in \
        str(got.value)


@pytest.mark.parametrize("argv", [("status", "--sweep"), ("cancel", "--sweep"), ("sweep", "best")])
def test_a_jobs_id_given_as_a_sweep_says_it_is_a_job(fake, cli, argv):
    trial = sweep_trials()[1]
    jid = docker_record("c0ffee" * 10)
    extra = ["--kpi", "val_loss"] if argv[0] == "sweep" else []
    line = one_error(cli("tao_jobs.py", *argv, jid, *extra))
    assert line == f"error: {jid} is a job, not a sweep: tao_jobs.py status {jid} shows it", line
    line = one_error(cli("tao_jobs.py", *argv, trial, *extra))
    assert line == f"error: {trial} is trial 1 of sweep {SWEEP}, not a sweep: use the sweep's id {SWEEP}", line
    assert fake.calls == []
