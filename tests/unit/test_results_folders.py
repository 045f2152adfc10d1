"""Issue 38 items 1 and 7: no job's results folder nests in another's (prune never deletes a live job's results),
and a damaged record (a sweep field, a backend value, a results folder of ``/``) is one line, never a traceback
or a walk of the whole disk."""
from __future__ import annotations

import json

import pytest

from fakeproc import SLURM_BASE, slurm_record
from taobank import fsio, records
from taobank.errors import TaoError


def docker_rec(folder: str, state: str = "COMPLETE", **kw) -> dict:
    rec = records.open_record("docker", "img", "dino", "train", "A", folder, backend={"engine": "docker"}, **kw)
    jid = rec["id"]
    rec = records.mark(jid, "PENDING", backend={"results_dir": rec["results_dir"], "container": jid})
    return records.mark(jid, state) if state != "PENDING" else rec


# ------------------------------------------------------------------ item 1: folders never nest
def test_a_results_folder_inside_another_jobs_folder_is_refused(fake):
    a = docker_rec("/res/{id}")
    with pytest.raises(TaoError, match=f"inside job {a['id']}'s folder") as err:
        records.open_record("docker", "img", "dino", "train", "A", f"/res/{a['id']}/{{id}}")
    assert "\n" not in str(err.value)
    assert [r["id"] for r in records.list_records()] == [a["id"]]  # nothing was opened


def test_a_results_folder_holding_another_jobs_folder_is_refused(fake):
    a = docker_rec("/res/dino-train-0000aaaa/deep/{id}")
    with pytest.raises(TaoError, match=f"holds job {a['id']}'s folder"):
        records.open_record("docker", "img", "dino", "train", "A", "/res/{id}", job_id="dino-train-0000aaaa")
    # a folder not named after its job is never pruned (prune refuses it), so it may hold others
    records.open_record("docker", "img", "dino", "train", "A", "/res")


def test_a_folder_inside_one_prune_would_never_delete_is_fine(fake):
    outer = records.open_record("docker", "img", "dino", "train", "A", "/shared")  # results_exact: not its own
    records.open_record("docker", "img", "dino", "train", "A", "/shared/{id}")
    assert records.folder_of(outer) == "/shared"


def test_sibling_folders_and_other_platforms_are_fine(fake):
    a = docker_rec("/res/{id}")
    b = docker_rec("/res/{id}")
    assert a["results_dir"] != b["results_dir"]
    records.open_record("kubernetes", "img", "dino", "train", "A", f"/res/{a['id']}/{{id}}")  # another machine


def test_prune_refuses_a_folder_holding_a_live_jobs_results(slurm, cli):
    outer = slurm_record(state="COMPLETE")
    folder = outer["backend"]["results_dir"]
    # made by an older helper, which did not check: its folder is inside the outer job's
    inner = records.open_record("slurm", "none", "dino", "train", "A", f"{folder}/nested/{{id}}", check_folder=False)
    records.mark(inner["id"], "RUNNING")
    slurm.ssh("REMOVE_FOLDER", "@@removed\n")
    out = cli("tao_jobs.py", "prune", outer["id"], "--yes")
    assert out.rc == 1 and inner["id"] in out.err and "RUNNING" in out.err and len(out.err_lines) == 1, out
    assert slurm.count("REMOVE_FOLDER") == 0
    records.mark(inner["id"], "COMPLETE")
    out = cli("tao_jobs.py", "prune", outer["id"], "--yes")
    assert out.rc == 1 and f"prune {outer['id']} {inner['id']}" in out.err and slurm.count("REMOVE_FOLDER") == 0, out
    out = cli("tao_jobs.py", "prune", outer["id"], inner["id"], "--yes")
    assert out.rc == 0 and slurm.count("REMOVE_FOLDER") == 2, out


def test_a_sweep_checks_every_trial_folder_in_one_pass(fake, monkeypatch):
    calls = []
    real = records.store.list_records
    monkeypatch.setattr(records.store, "list_records", lambda *a, **k: calls.append(1) or real(*a, **k))
    records.refuse_nested([(f"/res/t{i}", f"t{i}") for i in range(50)], "docker")
    assert calls == [] and not records.store._state_path().exists()  # no record folder: nothing read, none made
    records.open_record("docker", "img:1", "dino", "train", "A", "/other/{id}")
    records.refuse_nested([(f"/res/t{i}", f"t{i}") for i in range(50)], "docker")
    assert len(calls) == 1


# ------------------------------------------------------------------ item 7: damaged records
def _damage(job_id: str, **changes) -> None:
    path = records.record_path(job_id)
    rec = json.loads(path.read_text())
    for key, value in changes.items():
        if key == "backend":
            rec["backend"].update(value)
        else:
            rec[key] = value
    fsio.write_private(path, json.dumps(rec))


@pytest.mark.parametrize("change, words", [
    ({"trial": "abc"}, "sweep fields"), ({"overrides": "xyz"}, "sweep fields"),
    ({"overrides": {"a": "$(id)"}}, "sweep fields"), ({"backend": {"engine": 5}}, "backend engine is not text"),
    ({"backend": {"poll": [1]}}, "backend poll is not text, a whole number or true/false"), ({"backend": {"results_dir": "/"}}, "whole disk"),
    ({"backend": {"results_dir": "/etc"}}, "named after the job"), ({"results_dir": "/"}, "whole disk"),
])
def test_a_damaged_field_is_one_line_when_the_record_is_read(fake, change, words):
    rec = docker_rec("/res/{id}", sweep=("dino-sweep-abcde", 0, {"train.optim.lr": "0.1"}))
    _damage(rec["id"], **change)
    with pytest.raises(TaoError, match=words) as err:
        records.load(rec["id"])
    assert "\n" not in str(err.value) and "damaged" in str(err.value)


@pytest.mark.parametrize("argv", [
    ("status", "--sweep", "dino-sweep-abcde"), ("cancel", "--sweep", "dino-sweep-abcde"),
    ("sweep", "best", "dino-sweep-abcde", "--kpi", "val_loss"), ("logs", "{id}"), ("status", "{id}"),
    ("artifacts", "{id}"), ("fetch", "{id}", "--to", "{tmp}"), ("prune", "{id}", "--yes"), ("metrics", "{id}"),
])
@pytest.mark.parametrize("change", [{"trial": "abc"}, {"overrides": "xyz"}, {"backend": {"engine": 5}},
                                    {"backend": {"results_dir": "/"}}])
def test_verbs_on_damaged_sweep_records_are_one_line(fake, cli, tmp_path, argv, change):
    rec = docker_rec("/res/{id}", state="RUNNING", sweep=("dino-sweep-abcde", 0, {"train.optim.lr": "0.1"}))
    _damage(rec["id"], **change)
    out = cli("tao_jobs.py", *[a.format(id=rec["id"], tmp=tmp_path) for a in argv])
    assert out.rc in (1, 2) and len(out.err_lines) >= 1 and "Traceback" not in out.err, out
    assert all(line.startswith(("error:", "warning:", "note:")) for line in out.err_lines), out
    assert not fake.calls, "a damaged record reaches no engine, and no find of the whole disk"
