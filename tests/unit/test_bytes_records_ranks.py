"""A child's bytes that are not UTF-8, a damaged record, two releasers of one sweep, a job that ends inside a status,
the direction of a KPI and a SLURM job larger than every node: each stops nothing but itself, in one line."""
from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from fakeproc import PLAIN_SUBMIT, ok
from test_docker_campaigns import SPEC, Engine
from taobank import fsio, kpirank, records, run
from taobank.campaign import jobstatus, sweeps
from taobank.core import platform, sweep_slots, sweepsupervisor, track
from taobank.contract import SubmitOptions
from taobank.errors import TaoError, UsageError

LATIN1_STATUS = (b'{"date": "3/7/2025", "time": "9:0:1", "status": "RUNNING", "epoch": 1, "max_epoch": 3, '
                 b'"message": "caf\xe9", "kpi": {"val_loss": 0.5}}\n')
ODD_NAME = b"model_epoch_001_\xff.pth".decode("utf-8", "surrogateescape")


# ------------------------------------------------------------------ a child's output: any byte
def test_a_real_child_that_writes_latin1_is_read_as_text_holding_every_byte():
    res = run.run([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'caf\\xe9'); "
                   "sys.stderr.buffer.write(b'bad \\xff'); sys.exit(3)"], check=False)
    assert res.stdout == "caf\udce9" and res.stdout.encode("utf-8", "surrogateescape") == b"caf\xe9"
    assert res.stderr == "bad \ufffd"
    with pytest.raises(TaoError, match="bad \ufffd"):
        run.run([sys.executable, "-c", "import sys; sys.stderr.buffer.write(b'bad \\xff'); sys.exit(3)"])


@pytest.fixture()
def sweep(docker_fake, fake):
    """A Docker sweep of three trials, one at a time: trial 0 runs, with a Latin-1 byte in its status.json and a
    checkpoint whose name is not UTF-8."""
    fake.on("python3", lambda c: c.argv[1:4] == ["-m", "taobank", "supervise"], ok("4242\n"))
    engine = Engine(fake)
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{"train.optim.lr": f"0.{i + 1}"} for i in range(3)], 1)
    ids = [r.id for r in sweeps.trial_records(done.sweep)]
    folder = Path(records.get(ids[0]).backend["results_dir"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "status.json").write_bytes(LATIN1_STATUS)
    (folder / ODD_NAME).write_bytes(b"weights")
    return engine, done.sweep, ids, folder


def _clean(out) -> None:
    text = out.out + out.err
    assert "Traceback" not in text and "\x1b" not in text and "not valid UTF-8" not in text, out
    text.encode("utf-8")  # no lone surrogate reached the terminal


def test_a_latin1_status_file_and_an_odd_file_name_stop_no_verb(sweep, cli, tmp_path):
    engine, sid, ids, folder = sweep
    for argv in (["status"], ["status", ids[0]], ["metrics", ids[0]], ["artifacts", ids[0]],
                 ["status", "--sweep", sid], ["list"]):
        out = cli("tao_jobs.py", *argv)
        assert out.rc == 0, (argv, out)
        _clean(out)
    assert "model_epoch_001_\\xff.pth" in cli("tao_jobs.py", "artifacts", ids[0]).out  # the byte shown, escaped
    assert "2/4" in cli("tao_jobs.py", "status", "--sweep", sid).out  # its progress read past the odd byte
    engine.containers[ids[0]].update(Status="exited", ExitCode=0)
    out = cli("tao_jobs.py", "status", "--sweep", sid)  # trial 0 ends, trial 1 is started
    assert out.rc == 0 and records.get(ids[0]).state == "COMPLETE" and engine.containers[ids[1]]["Status"] == "running"
    got = cli("tao_jobs.py", "fetch", ids[0], "--to", str(tmp_path / "to"), "--copy")
    assert got.rc == 0, got
    assert (tmp_path / "to" / ODD_NAME).read_bytes() == b"weights"  # the file under its own bytes: nothing lost
    out = cli("tao_jobs.py", "cancel", "--sweep", sid)
    assert out.rc == 0, out
    _clean(out)


def test_the_supervisor_survives_a_look_that_fails_unexpectedly(state_dir):
    rec = records.open_record("docker", "img", "dino", "train", "A", "/tmp/r/{id}")
    looks = iter([ValueError("a defect"), UnicodeDecodeError("utf-8", b"\xe9", 0, 1, "bad"),
                  [type("Row", (), {"id": rec["id"], "trial": 0, "state": "COMPLETE"})()]])

    def look():
        got = next(looks)
        if isinstance(got, Exception):
            raise got
        return got

    lines: list[str] = []
    assert sweepsupervisor.supervise("s", rec["id"], look, interval=0, sleep=lambda s: None, on_line=lines.append) == 0
    assert any("ValueError: a defect; looking again" in ln for ln in lines), lines
    assert lines[-1] == "sweep s: every trial has ended"


def test_a_clusters_answer_with_a_stray_byte_never_breaks_a_record_write(state_dir):
    rec = records.open_record("docker", "img", "dino", "train", "A", "/tmp/r/{id}")
    before = records.record_path(rec["id"]).read_bytes()
    with pytest.raises(TaoError, match="backend metadata container holds characters that are not valid text"):
        records.mark(rec["id"], "PENDING", backend={"container": "c\udcff"})
    assert records.record_path(rec["id"]).read_bytes() == before  # nothing half-written
    marked = records.mark(rec["id"], "PENDING", message="caf\udce9: from a child's output")
    assert marked["message"] == "caf\ufffd: from a child's output"  # a message keeps the rest of its text


# ------------------------------------------------------------------ damaged records
def _records_one_damaged():
    good = records.open_record("docker", "img", "dino", "train", "A", "/tmp/r/{id}", backend={"engine": "docker"})
    records.mark(good["id"], "PENDING", backend_ref="abc", backend={"container": good["id"]})
    bad = records.open_record("docker", "img", "dino", "train", "A", "/tmp/r/{id}", backend={"engine": "docker"})
    records.mark(bad["id"], "RUNNING", backend_ref="abc2", backend={"container": bad["id"]})
    records.mark(bad["id"], "COMPLETE")
    path = records.record_path(bad["id"])
    data = json.loads(path.read_text())
    data["state"] = "UNKNOWN"  # active again, by a transition the table does not have
    data["transitions"].append({"time": data["updated_at"], "state": "UNKNOWN", "source": "agent", "message": None})
    fsio.write_private(path, json.dumps(data))
    return good["id"], bad["id"]


def test_a_record_no_write_would_accept_is_skipped_by_status_with_a_warning(docker_fake, cli):
    docker_fake.on("docker", lambda c: True, "[]")
    docker_fake.on("sh", lambda c: True, "")
    good, bad = _records_one_damaged()
    out = cli("tao_jobs.py", "status")
    assert out.rc == 0 and good in out.out and bad not in out.out, out
    assert out.err_lines == [ln for ln in out.err_lines if ln.startswith("warning: skipped")] and bad in out.err
    assert "COMPLETE -> UNKNOWN is not in the table" in out.err
    alone = cli("tao_jobs.py", "status", bad)
    assert alone.rc == 1 and len(alone.err_lines) == 1 and alone.err.startswith("error: job record"), alone


def test_one_record_whose_mark_fails_leaves_the_others_marked(docker_fake, monkeypatch):
    ids = []
    for _ in range(3):
        rec = records.open_record("docker", "img", "dino", "train", "A", "/tmp/r/{id}", backend={"engine": "docker"})
        records.mark(rec["id"], "PENDING", backend_ref=f"ref{len(ids)}", backend={"container": rec["id"]})
        ids.append(rec["id"])
    docker_fake.on("docker", lambda c: c.argv[1:3] == ["container", "inspect"], json.dumps(
        [{"Name": f"/{i}", "Id": i, "State": {"Status": "running", "Running": True}} for i in ids]))
    docker_fake.on("sh", lambda c: True, "")
    real = track.mark_many

    def mark_many(marks):  # status marks in one batch: refused at ids[1], the marks before it written (as the store does)
        k = next((n for n, m in enumerate(marks) if m.job_id == ids[1]), None)
        if k is None:
            return real(marks)
        real(marks[:k])
        raise TaoError("job record is damaged: restore it")

    monkeypatch.setattr(track, "mark_many", mark_many)
    views = {v.id: v for v in platform.status("docker")}
    assert views[ids[0]].state == views[ids[2]].state == "RUNNING"
    assert views[ids[1]].state == "PENDING" and "not updated: job record is damaged" in views[ids[1]].message


# ------------------------------------------------------------------ one releaser at a time per sweep
def test_two_releasers_never_start_one_trial_twice(sweep):
    engine, sid, ids, _ = sweep
    records.mark(ids[0], "COMPLETE")  # a slot frees: trial 1 is next
    adapter = platform.get("docker")
    stale = records.find(sweep=sid)  # what the second releaser read before the first one started trial 1
    starts: list[list[str]] = []
    second: dict = {}
    real_start = engine.start

    def start(call):
        starts.append(call.argv[2:])
        if len(starts) == 1:  # the first releaser is starting trial 1: the second one comes in now
            t = threading.Thread(target=lambda: second.setdefault("ids", sweep_slots.release(adapter, stale)))
            t.start()
            t.join(timeout=1.0)
            second["thread"] = t
        return real_start(call)

    engine.fake.on("docker", lambda c: c.argv[1] == "start", start)
    assert sweep_slots.release(adapter, records.find(sweep=sid)) == [ids[1]]
    second["thread"].join(timeout=10)
    assert starts == [[ids[1]]] and second["ids"] == []  # the second read under the lock: nothing held is free
    assert records.get(ids[1]).backend["held"] is False and records.get(ids[2]).backend["held"] is True


def test_a_held_trial_seen_running_is_never_started_again(sweep):
    engine, sid, ids, _ = sweep
    records.mark(ids[0], "COMPLETE")
    records.mark(ids[1], "RUNNING")  # started by a releaser that stopped before it cleared "held"
    engine.containers[ids[1]].update(Status="exited", ExitCode=0)  # ... and it has run to its end since
    since = len(engine.fake.calls)
    assert sweep_slots.release(platform.get("docker"), records.find(sweep=sid)) == []
    assert "start" not in engine.calls(since)  # its slot is busy until the record ends: trial 2 waits, 1 never reruns


# ------------------------------------------------------------------ a job that ends inside this status
def test_a_job_that_ends_in_this_status_keeps_its_final_progress(docker_fake, monkeypatch):
    rec = records.open_record("docker", "img", "dino", "train", "A", "/tmp/r/{id}", backend={"engine": "docker"})
    records.mark(rec["id"], "PENDING", backend_ref="abc", backend={"container": rec["id"]})
    docker_fake.on("docker", lambda c: c.argv[1:3] == ["container", "inspect"], json.dumps(
        [{"Name": f"/{rec['id']}", "Id": "abc", "State": {"Status": "exited", "ExitCode": 0}}]))
    docker_fake.on("docker", lambda c: c.argv[1] in ("logs", "rm"), "")
    docker_fake.on("sh", lambda c: True, "")
    seen: dict = {}
    real = jobstatus.keep_progress
    monkeypatch.setattr(jobstatus, "keep_progress", lambda views, **kw: (seen.update(kw), real(views, **kw)))
    (view,) = jobstatus.status("docker", [rec["id"]])
    assert view.state == "COMPLETE" and seen["read_already"] == {rec["id"]}
    assert jobstatus.remembered(rec["id"]) == ({}, True)  # read at its end: final, never read again


# ------------------------------------------------------------------ the direction of a KPI
@pytest.mark.parametrize("kpi, mode", [
    ("loss", "min"), ("val_loss", "min"), ("train_loss", "min"), ("Loss", "min"), ("total_loss_cls", "min"),
    ("evaluation_cost", "min"), ("EVALUATION_COST", "min"), ("val_mAP", "max"), ("mAP", "max"), ("mIoU", "max"),
    ("val_accuracy", "max"), ("accuracy_top-1", "max"), ("f1", "max"), ("cost", "min"),
    # lower-is-better names without 'loss', which TAO AutoML's "everything else is higher" would rank the wrong way
    ("rmse", "min"), ("abs_rel", "min"), ("fid50k_full", "min"), ("val_error", "min"), ("wer", "min"),
    ("mae", "min"), ("inference_time", "min"), ("AP50", "max"), ("recall@5", "max"), ("psnr", "max"),
])
def test_the_direction_of_a_kpi_follows_its_name(kpi, mode):
    way = kpirank.direction(kpi, None)
    assert (way.mode, way.inferred, way.source) == (mode, True, "name")
    assert kpirank.direction(kpi, "min") == kpirank.Direction("min", False)
    assert "from the KPI's name" in way.text()


@pytest.mark.parametrize("kpi", ["", "a.b", "val_metric", "k" * 200, "delta"])
def test_a_name_that_says_no_direction_needs_mode(kpi):
    """Guessing 'higher' for any other name would make prune --keep best delete the best checkpoints of an rmse."""
    assert kpirank.from_name(kpi) is None
    with pytest.raises(UsageError, match="cannot tell from its name which way KPI .* add --mode min"):
        kpirank.direction(kpi, None)
    assert kpirank.direction(kpi, "min") == kpirank.Direction("min", False)


def test_an_unknown_mode_is_a_usage_error():
    with pytest.raises(UsageError, match="--mode 'best' is unknown"):
        kpirank.direction("val_mAP", "best")


MAP_STATUS = "".join(json.dumps({"status": "RUNNING", "epoch": e, "max_epoch": 3, "kpi": {"val_mAP": v}}) + "\n"
                     for e, v in ((0, 0.1), (1, 0.7), (2, 0.4), (3, 0.2)))


@pytest.fixture()
def map_job(docker_fake, fake, tmp_path, cli):
    Engine(fake)
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(SPEC))
    jid = json.loads(cli("tao_docker.py", "submit", "--spec", str(spec), "--json").out)["id"]
    folder = Path(records.load(jid)["backend"]["results_dir"])
    folder.mkdir(parents=True, exist_ok=True)
    for e in range(4):
        (folder / f"model_epoch_{e:03d}.pth").write_text(f"w{e}")
    (folder / "status.json").write_text(MAP_STATUS)
    records.mark(jid, "COMPLETE")
    return jid, folder


def test_prune_keep_best_by_map_keeps_the_highest_and_says_why(map_job, cli):
    jid, folder = map_job
    shown = cli("tao_jobs.py", "artifacts", jid, "--kpi", "val_mAP")
    assert "best val_mAP (max, from the KPI's name) = 0.7 at epoch 1: model_epoch_001.pth" in shown.out, shown
    out = cli("tao_jobs.py", "prune", jid, "--keep", "best", "--kpi", "val_mAP", "--yes", "--json")
    assert out.rc == 0, out
    (done,) = json.loads(out.out)
    assert sorted(p.name for p in folder.iterdir()) == ["model_epoch_001.pth", "status.json"]
    assert done["ranked_by"] == {"kpi": "val_mAP", "mode": "max", "mode_from": "name"}
    assert "the best by val_mAP (max, from the KPI's name)" in done["message"]


def test_an_explicit_mode_wins_over_the_name(map_job, cli):
    jid, _ = map_job
    out = cli("tao_jobs.py", "artifacts", jid, "--kpi", "val_mAP", "--mode", "min", "--json")
    best = json.loads(out.out)["best"]
    assert (best["mode"], best["mode_from"], best["epoch"]) == ("min", "flag", 0)


# ------------------------------------------------------------------ SLURM: larger than every node
SLURM_SPEC = {"network_arch": "dino", "action": "train", "container_runtime": "none", "num_gpus": 1,
              "cpus_per_task": 4, "time_hours": 1, "command": ["true"], "partition": "gpu"}
NODES = "@@node gpu*|n1|64|512000|gpu:a100:8(S:0-1)\n@@node gpu*|n2|64|512000|gpu:a100:8(S:0-1)\n" \
        "@@node cpu|c1|128|1024000|(null)\n"


@pytest.mark.parametrize("ask, said", [
    ({"cpus_per_task": 999}, "999 CPUs per task"), ({"memory": "600G"}, "--mem 600G"),
    ({"num_gpus": 16, "max_num_gpus_per_node": 16}, "16 GPUs per node"),
    ({"num_nodes": 3, "num_gpus": 3}, "has 2 such node(s) of 2"),
])
def test_a_slurm_job_larger_than_every_node_opens_no_record(slurm, ask, said):
    slurm.ssh("MISSING", NODES)
    with pytest.raises(TaoError, match="nothing was submitted") as exc:
        platform.get("slurm").submit({**SLURM_SPEC, **ask}, SubmitOptions(skip_nccl_probe=True))
    assert said in str(exc.value) and "partition gpu" in str(exc.value)
    assert records.list_records() == [] and set(slurm.scripts()) <= {"MISSING"}
    (check,) = slurm.ssh_calls("MISSING")
    assert check.args[0] == "@@nodes"  # the node sizes come with the one preflight command


def test_a_slurm_job_that_fits_a_node_is_staged_after_the_same_one_command(slurm):
    slurm.ssh("MISSING", NODES)
    slurm.ssh("STAGE", "")
    slurm.ssh("FIND", "")
    slurm.ssh("SBATCH", "4242\n")
    platform.get("slurm").submit({**SLURM_SPEC, "cpus_per_task": 64, "memory": "500G"}, SubmitOptions())
    assert Counter(slurm.scripts()) == PLAIN_SUBMIT  # no command more than a plain submit


def test_parent_kpi_takes_the_direction_of_its_name_and_says_so(map_job, cli, tmp_path):
    jid, _ = map_job
    spec = tmp_path / "child.json"
    spec.write_text(json.dumps({**SPEC, "command": ["sh", "-c", "echo {parent.checkpoint}"]}))
    out = cli("tao_docker.py", "submit", "--spec", str(spec), "--parent", jid, "--parent-kpi", "val_mAP", "--dry-run")
    assert out.rc == 0, out
    assert "model_epoch_001.pth" in out.out and "model_epoch_000.pth" not in out.out, out  # mAP: the highest
    assert "note: val_mAP ranked highest first (max, from the KPI's name); --parent-mode min ranks the other way" \
        in out.err, out


def test_a_name_that_is_not_utf8_goes_back_to_a_child_as_its_bytes():
    """A listed name holds surrogates for its odd bytes (decode_output): handed back on stdin (fetch's file list)
    it is the same bytes again, never an encoding error that leaves the child waiting on its stdin."""
    from taobank import run as runmod

    name = runmod.decode_output(b"caf\xe9.pth\n")
    with runmod.pipe(["cat"], stdin=name) as out:
        assert out.read() == b"caf\xe9.pth\n"
    assert runmod.run(["cat"], stdin=name).stdout == name


def test_a_release_never_moves_a_trial_a_status_saw_start_back(sweep):
    """A status takes no sweep lock: it may mark the trial RUNNING while the release starts it. The release then
    marks the state the record has now, not the PENDING it read before."""
    engine, sid, ids, _ = sweep
    records.mark(ids[0], "COMPLETE")
    real_start = engine.start

    def start(call):
        out = real_start(call)
        records.mark(ids[1], "RUNNING", source="poller")  # a concurrent status saw the container start
        return out

    engine.fake.on("docker", lambda c: c.argv[1] == "start", start)
    assert sweep_slots.release(platform.get("docker"), records.find(sweep=sid)) == [ids[1]]
    assert records.get(ids[1]).state == "RUNNING" and records.get(ids[1]).backend["held"] is False
