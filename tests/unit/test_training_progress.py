"""Training you can watch: status shows a running job's epoch, ETA and KPIs; metrics prints the KPI series.

SLURM reads every job's status files in its one sweep command; Kubernetes reads
one running job's with one ``kubectl exec`` and hints for the rest.
"""
from __future__ import annotations

import json

import pytest

from fakeproc import SLURM_BASE, items, job, k8s_record, ok, pod, sacct_row, slurm_record, squeue_row, sweep_answer
from taobank.campaign import jobstatus
from taobank import records
from taobank.errors import TaoError
from taobank.platforms.kubernetes.logs import SPEC_FILE


def line(epoch: int, loss: float, *, status: str = "RUNNING", max_epoch: int = 9) -> str:
    """One progress line as TAO's StatusLogger writes it (date and time not zero-padded; epoch 0-based, max_epoch the
    last index)."""
    return json.dumps({"date": "3/7/2025", "time": f"9:{epoch}:3", "status": status, "verbosity": "INFO",
                       "epoch": epoch, "max_epoch": max_epoch, "eta": "0:12:30", "time_per_epoch": "0:01:00.500000",
                       "kpi": {"train_loss": loss}}) + "\n"


TRAINING = (json.dumps({"date": "3/7/2025", "time": "9:0:1", "status": "STARTED", "verbosity": "INFO",
                        "message": "Starting train"}) + "\n" + line(0, 0.9) + line(1, 0.6) + line(2, 0.41))


# ------------------------------------------------------------------ SLURM: in the one sweep
def test_slurm_status_shows_every_running_jobs_progress_in_its_one_command(slurm, cli):
    a, b, c = slurm_record(), slurm_record(slurm_job_id="102"), slurm_record(slurm_job_id="103")
    top = f"{a['backend']['results_dir']}/status.json"
    per_action = f"{b['backend']['results_dir']}/train/status.json"  # TAO's per-action sub-folder
    slurm.ssh("SWEEP", sweep_answer(squeue=[squeue_row(j, "RUNNING", r["id"]) for j, r in
                                            (("101", a), ("102", b), ("103", c))],
                                    markers={top: TRAINING, per_action: TRAINING + "{torn"}))
    out = cli("tao_slurm.py", "status", "--json")
    assert out.rc == 0, out
    views = {v["id"]: v for v in json.loads(out.out)}
    assert slurm.scripts() == ["SWEEP"]  # squeue, sacct, markers and every status file: one remote command
    for rid in (a["id"], b["id"]):
        p = views[rid]["progress"]
        assert (p["epoch"], p["max_epoch"], p["eta"], p["kpis"]) == (2, 9, 750.0, {"train_loss": 0.41})
        assert p["line"].startswith("epoch 3/10 eta 0:12:30") and "train_loss=0.41" in p["line"]
    assert views[b["id"]]["progress"]["skipped_lines"] == 1 and views[b["id"]]["progress"]["file"] == "train/status.json"
    assert views[c["id"]]["progress"] is None  # no status file: its state as before
    text = cli("tao_slurm.py", "status", a["id"])
    assert "RUNNING" in text.out and "[epoch 3/10 eta 0:12:30 train_loss=0.41]" in text.out
    assert "progress" not in records.load(a["id"])  # shown, never stored


def test_slurm_metrics_reads_the_series_in_one_command_also_after_the_end(slurm, cli):
    rec = slurm_record(state="PENDING")
    records.mark(rec["id"], "COMPLETE", message="done")
    folder = rec["backend"]["results_dir"]
    slurm.ssh("READ_STATUS_SH", lambda call: ok(f"#status-file 10 status.json\n" + "".join(
        "|" + ln + "\n" for ln in TRAINING.splitlines()) + "\n"))
    out = cli("tao_jobs.py", "metrics", rec["id"], "--json")
    assert out.rc == 0, out
    data = json.loads(out.out)
    assert [r["epoch"] for r in data["rows"]] == [0, 1, 2] and data["rows"][-1]["train_loss"] == 0.41
    assert [c.args for c in slurm.ssh_calls("READ_STATUS_SH")] == [[folder]]  # one read, of the job's folder
    csv = cli("tao_jobs.py", "metrics", rec["id"], "--csv")
    assert csv.out.splitlines()[0] == "epoch,train_loss" and csv.out.splitlines()[-1] == "2,0.41"
    table = cli("tao_slurm.py", "metrics", rec["id"])
    assert "train_loss" in table.out.splitlines()[0] and len(table.out.splitlines()) == 4
    assert table.out.endswith("0.41\n")  # issue 37: the table's last line ends (a shell prompt starts on its own)


def test_metrics_says_when_the_status_file_was_too_large_to_read_whole(slurm, cli):
    from taobank.progress import remote

    rec = slurm_record(state="PENDING")
    records.mark(rec["id"], "COMPLETE", message="done")
    big = remote.TAIL_BYTES + 5000  # the reader sent its end only: a cut first line, then whole lines
    slurm.ssh("READ_STATUS_SH", lambda call: ok(f"#status-file {big} status.json\n|torn half line\n" + "".join(
        "|" + ln + "\n" for ln in TRAINING.splitlines()) + "\n"))
    out = cli("tao_jobs.py", "metrics", rec["id"])
    assert out.rc == 0 and len(out.out.splitlines()) == 4, out
    assert f"note: status.json is {big} bytes: only its last {remote.TAIL_BYTES} were read" in out.err
    assert json.loads(cli("tao_jobs.py", "metrics", rec["id"], "--json").out)["cut_bytes"] == big


def test_metrics_of_a_job_without_a_status_file_is_one_line(slurm, cli):
    rec = slurm_record()
    slurm.ssh("READ_STATUS_SH", "")
    out = cli("tao_jobs.py", "metrics", rec["id"])
    assert out.rc == 1 and "no TAO status file" in out.err and len(out.err.strip().splitlines()) == 1
    assert "yet" in out.err
    records.mark(rec["id"], "COMPLETE", message="done")  # issue 49: a finished job's never says "yet"
    out = cli("tao_jobs.py", "metrics", rec["id"])
    assert out.rc == 1 and len(out.err.strip().splitlines()) == 1 and "yet" not in out.err, out
    assert f"job {rec['id']} (COMPLETE) left no TAO status file" in out.err and "wrote none" in out.err


def test_metrics_kpi_needs_a_chart_and_an_existing_kpi(slurm, cli):
    rec = slurm_record()
    slurm.ssh("READ_STATUS_SH", lambda call: ok("#status-file 1 status.json\n" + "".join(
        "|" + ln + "\n" for ln in TRAINING.splitlines())))
    assert cli("tao_jobs.py", "metrics", rec["id"], "--kpi", "train_loss").rc == 2
    bad = cli("tao_jobs.py", "metrics", rec["id"], "--plot", "--kpi", "mAP")
    assert bad.rc == 1 and "train_loss" in bad.err  # names the KPIs that exist


# ------------------------------------------------------------------ Kubernetes: one exec for one job
def k8s_job(fake, *, with_spec: bool = True) -> dict:
    rec = k8s_record()
    if with_spec:
        (records.artifact_dir(rec["id"]) / SPEC_FILE).write_text(json.dumps(
            {"image": "i", "command": "c", "mounts": [{"pvc": "ws", "mount_path": "/results"}]}))
    return rec


def test_k8s_status_of_one_running_job_reads_its_progress_with_one_exec(fake, cli):
    rec = k8s_job(fake)
    fake.kubectl("get", "jobs,pods", answer=items([job(rec["id"], f"uid-{rec['id']}"),
                                                    pod(rec["id"], f"uid-{rec['id']}")]))
    fake.kubectl("exec", answer="#status-file 9 status.json\n" + "".join("|" + ln + "\n" for ln in TRAINING.splitlines()))
    out = cli("tao_k8s.py", "status", rec["id"], "--json")
    assert out.rc == 0, out
    (view,) = json.loads(out.out)
    assert view["progress"]["epoch"] == 2 and view["progress"]["kpis"] == {"train_loss": 0.41}
    (exec_call,) = fake.kubectl_calls("exec")
    assert exec_call.words[:5] == ["exec", f"job/{rec['id']}", "-c", "main", "--"]
    assert exec_call.words[-1] == f"/results/{rec['id']}"  # the folder is an argument, never in the script
    assert len(fake.of("kubectl")) == 2  # the one status query and the one exec


def test_k8s_status_of_several_running_jobs_adds_no_call_per_job_but_a_hint(fake, cli):
    recs = [k8s_job(fake) for _ in range(3)]
    fake.kubectl("get", "jobs,pods", answer=items([o for r in recs for o in (job(r["id"], f"uid-{r['id']}"),
                                                                             pod(r["id"], f"uid-{r['id']}"))]))
    out = cli("tao_k8s.py", "status", "--json")
    views = json.loads(out.out)
    assert out.rc == 0 and len(views) == 3 and len(fake.of("kubectl")) == 1
    assert all(v["progress"] is None and v["progress_hint"] == jobstatus.PROGRESS_HINT for v in views)


def test_a_failed_progress_read_never_fails_the_status(fake, cli):
    rec = k8s_job(fake)
    fake.kubectl("get", "jobs,pods", answer=items([job(rec["id"], f"uid-{rec['id']}"), pod(rec["id"], f"uid-{rec['id']}")]))
    fake.kubectl("exec", rc=1, stderr="error: unable to upgrade connection: container not found")
    out = cli("tao_k8s.py", "status", rec["id"], "--json")
    (view,) = json.loads(out.out)
    assert out.rc == 0 and view["state"] == "RUNNING" and "container not found" in view["progress_error"]


def test_k8s_metrics_after_the_pods_are_gone_reads_the_volume(fake, cli, monkeypatch):
    from taobank.platforms.kubernetes import volume_job

    rec = k8s_job(fake)
    fake.kubectl("exec", rc=1, stderr='Error from server (NotFound): jobs.batch "x" not found')
    seen = {}

    def run(kube, spec, argv, *, purpose, **kw):
        seen["argv"] = argv
        return 0, "#status-file 9 status.json\n" + "".join("|" + ln + "\n" for ln in TRAINING.splitlines())

    monkeypatch.setattr(volume_job, "run", run)
    out = cli("tao_jobs.py", "metrics", rec["id"], "--json")
    assert out.rc == 0, out
    assert [r["epoch"] for r in json.loads(out.out)["rows"]] == [0, 1, 2]
    assert seen["argv"][-1] == f"/results/{rec['id']}"


def test_progress_of_a_no_results_job_says_why(fake):
    from taobank.platforms.kubernetes import statusfiles

    rec = k8s_record()
    (records.artifact_dir(rec["id"]) / SPEC_FILE).write_text(json.dumps({"image": "i", "command": "c",
                                                                          "no_results": True}))
    with pytest.raises(TaoError, match="keeps no results"):
        statusfiles.read(records.Record.of(rec), live=False)


def test_the_slurm_sweep_reads_every_status_file_metrics_reads_and_none_outside_the_folder(tmp_path):
    """Issue 49: a generic command's trainer (action run) writing train/status.json showed no progress on SLURM
    while metrics read it: the sweep reads <folder>/status.json and <folder>/*/status.json (its one command, run
    here by a real sh with stand-in squeue and sacct), as progress.READ_STATUS_SH does."""
    import os
    import subprocess

    from taobank.platforms.slurm import facts as slurm_facts, observe as slurm_observe, remote

    folder = tmp_path / "results" / "custom-run-1"
    for rel in ("train/status.json", "evaluate/status.json", "status.json", "nested/deeper/status.json"):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(f'{{"rel": "{rel}"}}\n')
    (folder / "odd\nname").mkdir()
    (folder / "odd\nname" / "status.json").write_text('{"forged": 1}\n')
    (tmp_path / "results" / "status.json").write_text('{"outside": 1}\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("squeue", "sacct"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    rec = records.Record.of(slurm_record())
    rec = records.Record.of({**rec.to_dict(), "backend": {**rec.backend, "results_dir": str(folder)}})
    paths = slurm_observe._status_paths(slurm_facts.SlurmFacts.of(rec))
    assert paths == [f"{folder}/status.json", f"{folder}/{remote.STATUS_GLOB}"]
    out = subprocess.run(["sh", "-c", remote.SWEEP, "sh", "1", *paths], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}).stdout
    _, _, marks, _ = slurm_observe.parse_sweep(out)
    texts = slurm_observe._status_texts(slurm_facts.SlurmFacts.of(rec), marks)
    assert sorted(texts) == ["evaluate/status.json", "status.json", "train/status.json"], texts


@pytest.mark.parametrize("kind", ["file", "link", "folder"])
def test_metrics_png_never_replaces_a_file_without_force(slurm, cli, tmp_path, kind):
    """Issue 38 item 8: ``metrics --png FILE`` overwrote any file; now refused like fetch, before any cluster call."""
    rec = slurm_record(state="COMPLETE")
    target = tmp_path / "chart.png"
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    if kind == "file":
        target.write_text("keep me")
    elif kind == "link":
        target.symlink_to(precious)
    else:
        target.mkdir()
    out = cli("tao_jobs.py", "metrics", rec["id"], "--png", str(target))
    assert out.rc == 1 and len(out.err_lines) == 1 and slurm.count("READ_STATUS_SH") == 0, out
    assert precious.read_text() == "keep me" and ("--force" in out.err or kind == "folder")
    if kind == "file":
        slurm.ssh("READ_STATUS_SH", lambda call: ok("#status-file 10 status.json\n" + "".join(
            "|" + ln + "\n" for ln in TRAINING.splitlines()) + "\n"))
        out = cli("tao_jobs.py", "metrics", rec["id"], "--png", str(target), "--force")
        assert out.rc == 0 and target.read_bytes().startswith(b"\x89PNG"), out
    assert cli("tao_jobs.py", "metrics", rec["id"], "--force").rc == 2


@pytest.mark.parametrize("sacct_state,exit_code,line,want", [
    # TAO wrote its success line, then the wrapper failed: the training is done
    ("FAILED", "1:0", {"status": "RUNNING", "message": "Train finished successfully."}, "COMPLETE"),
    # TAO said FAILURE, yet the process exited 0 (TAO does not re-raise an interrupt)
    ("COMPLETED", "0:0", {"status": "FAILURE", "message": "User/System interruption: Train was interrupted"}, "ERROR"),
])
def test_slurm_reads_taos_verdict_from_the_train_folder(slurm, cli, sacct_state, exit_code, line, want):
    """TAO writes <results>/train/status.json for a train action: that is the file whose end decides."""
    rec = slurm_record()
    per_action = f"{rec['backend']['results_dir']}/train/status.json"
    text = TRAINING + json.dumps({"date": "3/7/2025", "time": "9:9:9", "verbosity": "INFO", **line}) + "\n"
    jid = rec["backend"]["slurm_job_id"]
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row(jid, rec["id"], sacct_state, exit_code)],
                                    markers={per_action: text}))
    (view,) = json.loads(cli("tao_slurm.py", "status", rec["id"], "--json").out)
    assert view["state"] == want and line["message"] in view["message"], view
