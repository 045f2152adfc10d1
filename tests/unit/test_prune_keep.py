"""Issue 37: ``prune --keep best|last|N`` deletes the other checkpoints of a finished job, through the same
reader paths as artifacts/fetch (Docker: this host's sh; SLURM: the connection; Kubernetes: a writable reader pod),
after asking (``--yes`` for scripts); the kept file is checked on the cluster before and after. Prune also
removes a finished Docker job's container."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

from fakeproc import ok, slurm_record
from test_docker_campaigns import Engine, SPEC
from taobank import records, results_shell

STATUS = "".join(json.dumps({"status": "RUNNING", "epoch": e, "max_epoch": 3, "kpi": {"val_loss": v}}) + "\n"
                 for e, v in ((0, 0.9), (1, 0.2), (2, 0.5), (3, 0.6)))
CKPTS = {f"model_epoch_{e:03d}.pth": f"weights {e}\n" * (e + 1) for e in range(4)}


@pytest.fixture()
def docker_job(docker_fake, fake, monkeypatch, tmp_path, cli):
    """A finished Docker job whose container is still there (exited), with four checkpoints and TAO's status."""
    engine = Engine(fake)
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(SPEC))
    out = cli("tao_docker.py", "submit", "--spec", str(spec), "--json")
    assert out.rc == 0, out
    jid = json.loads(out.out)["id"]
    folder = records.load(jid)["backend"]["results_dir"]
    os.makedirs(folder, exist_ok=True)
    for name, text in CKPTS.items():
        with open(os.path.join(folder, name), "w") as fh:
            fh.write(text)
    with open(os.path.join(folder, "status.json"), "w") as fh:
        fh.write(STATUS)
    os.symlink("model_epoch_003.pth", os.path.join(folder, "model_latest.pth"))
    records.mark(jid, "CANCELED", message="canceled: container stopped")  # a cancel leaves its container
    engine.containers[jid].update(Status="exited", ExitCode=143)
    return engine, jid, folder


def names(folder: str) -> list[str]:
    return sorted(os.listdir(folder))


def test_keep_best_deletes_the_other_checkpoints_and_the_container(docker_job, cli):
    engine, jid, folder = docker_job
    out = cli("tao_jobs.py", "prune", jid, "--keep", "best", "--kpi", "val_loss", "--yes", "--json")
    assert out.rc == 0, out
    (done,) = json.loads(out.out)
    assert names(folder) == ["model_epoch_001.pth", "status.json"]  # val_loss lowest at epoch 1; the link to a
    assert sorted(done["deleted"]) == ["model_epoch_000.pth", "model_epoch_002.pth", "model_epoch_003.pth",
                                       "model_latest.pth"]  # deleted checkpoint went with it
    (kept,) = done["kept"]
    assert kept["path"] == "model_epoch_001.pth"
    assert kept["sha256"] == hashlib.sha256(CKPTS["model_epoch_001.pth"].encode()).hexdigest()
    assert "removed its container" in done["message"] and jid not in engine.containers
    again = cli("tao_jobs.py", "prune", jid, "--keep", "best", "--kpi", "val_loss", "--yes")
    assert again.rc == 0 and "nothing to delete" in again.out


def test_keep_last_keeps_what_continue_resumes_from_and_keep_n_the_newest(docker_job, cli):
    _, jid, folder = docker_job
    out = cli("tao_jobs.py", "prune", jid, "--keep", "3", "--yes")
    assert out.rc == 0, out
    assert names(folder) == ["model_epoch_001.pth", "model_epoch_002.pth", "model_epoch_003.pth", "model_latest.pth",
                             "status.json"]
    out = cli("tao_jobs.py", "prune", jid, "--keep", "last", "--yes")
    assert out.rc == 0, out
    assert names(folder) == ["model_epoch_003.pth", "model_latest.pth", "status.json"]  # the link's target


def test_prune_keep_asks_first_and_no_deletes_nothing(docker_job, cli, monkeypatch):
    import io
    import sys

    _, jid, folder = docker_job
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    out = cli("tao_jobs.py", "prune", jid, "--keep", "1")
    assert out.rc == 0 and "delete 3 checkpoint(s)" in out.err and "keeping model_epoch_003.pth" in out.err, out
    assert "deleted nothing" in out.out and len(names(folder)) == 6


@pytest.mark.parametrize("args,needle", [(["--keep", "best"], "--kpi NAME"), (["--keep", "0"], "1 or more"),
                                         (["--keep", "all"], "best, last or a number"),
                                         (["--kpi", "val_loss"], "add --keep best"),
                                         (["--keep", "2", "--kpi", "val_loss"], "--keep best only")])
def test_keep_rules_are_usage_errors_before_anything_is_read(fake, cli, args, needle):
    out = cli("tao_jobs.py", "prune", "dino-train-0a1b2c3d", *args, "--yes")
    assert out.rc == 2 and needle in out.err and fake.calls == [], out


def test_a_kept_file_that_changed_stops_the_deletion_on_the_cluster(tmp_path):
    """The script itself: a kept file not at its listed size means nothing is deleted (exit 7)."""
    folder = tmp_path / "dino-train-0a1b2c3d"
    folder.mkdir()
    (folder / "a.pth").write_text("aaaa")
    (folder / "b.pth").write_text("bb")
    args = [str(folder), folder.name, "k:3", "./a.pth", "d", "./b.pth"]
    res = subprocess.run(["sh", "-c", results_shell.REMOVE_FILES, "tao", *args], capture_output=True, text=True)
    assert res.returncode == 7 and "not the file listed" in res.stderr and (folder / "b.pth").exists()
    args[2] = "k:4"
    res = subprocess.run(["sh", "-c", results_shell.REMOVE_FILES, "tao", *args], capture_output=True, text=True)
    assert res.returncode == 0 and not (folder / "b.pth").exists(), res.stderr
    assert "@@kept 4 " in res.stdout and hashlib.sha256(b"aaaa").hexdigest() in res.stdout
    for bad in ("../x.pth", "./../x.pth", "/etc/passwd"):  # never a path out of the folder
        res = subprocess.run(["sh", "-c", results_shell.REMOVE_FILES, "tao", str(folder), folder.name, "d", bad],
                             capture_output=True, text=True)
        assert res.returncode == 4, bad


def test_slurm_keep_best_runs_one_listing_and_one_deletion_over_the_connection(slurm, cli):
    from test_results_access import listing_text

    rec = slurm_record(state="COMPLETE")
    folder = rec["backend"]["results_dir"]
    files = {name: text.encode() for name, text in CKPTS.items()}
    slurm.ssh("LIST_RESULTS", listing_text(files, {"status.json": STATUS}))
    digest = hashlib.sha256(files["model_epoch_001.pth"]).hexdigest()
    slurm.ssh("REMOVE_FILES", ok(f"@@deleted 3\n@@kept {len(files['model_epoch_001.pth'])} 1700000000 {digest} "
                                 "./model_epoch_001.pth\n"))
    out = cli("tao_jobs.py", "prune", rec["id"], "--keep", "best", "--kpi", "val_loss", "--yes")
    assert out.rc == 0 and "deleted 3 checkpoint(s)" in out.out and "kept model_epoch_001.pth (intact" in out.out, out
    assert slurm.count("LIST_RESULTS") == 1
    (remove,) = slurm.ssh_calls("REMOVE_FILES")
    args = remove.args
    assert args[:4] == [folder, rec["id"], f"k:{len(files['model_epoch_001.pth'])}", "./model_epoch_001.pth"]
    assert sorted(args[4:][1::2]) == ["./model_epoch_000.pth", "./model_epoch_002.pth", "./model_epoch_003.pth"]


def test_slurm_keep_refuses_when_the_kept_file_is_not_intact_after(slurm, cli):
    from test_results_access import listing_text

    rec = slurm_record(state="COMPLETE")
    files = {name: text.encode() for name, text in CKPTS.items()}
    slurm.ssh("LIST_RESULTS", listing_text(files, {"status.json": STATUS}))
    slurm.ssh("REMOVE_FILES", ok("@@deleted 3\n"))  # the kept file's facts never came back
    out = cli("tao_jobs.py", "prune", rec["id"], "--keep", "last", "--yes")
    assert out.rc == 1 and "was not found intact" in out.err and len(out.err_lines) == 1, out


def test_kubernetes_keep_n_lists_then_deletes_in_a_writable_reader_pod(fake, cli, monkeypatch):
    from fakeproc import echo_applied, items
    from test_results_access import RUNNING_POD, exec_args, k8s_job, listing_text, script_of

    monkeypatch.setattr("taobank.platforms.kubernetes.volume_job.time.sleep", lambda s: None)  # the reader pod, as there
    fake.kubectl("create", answer=echo_applied())
    fake.kubectl("get", "pods", "-l", answer=items([RUNNING_POD]))
    fake.kubectl("delete", "job", answer="")
    pod = fake
    pod.answer = lambda script, reply: fake.kubectl("exec", answer=reply, where=lambda c: script_of(c) == script)

    rec = k8s_job()
    files = {name: text.encode() for name, text in CKPTS.items()}
    pod.answer("LIST_RESULTS", listing_text(files))
    newest = files["model_epoch_003.pth"]
    pod.answer("REMOVE_FILES", f"@@deleted 3\n@@kept {len(newest)} 1700000000 {hashlib.sha256(newest).hexdigest()} "
                               "./model_epoch_003.pth\n")
    out = cli("tao_jobs.py", "prune", rec["id"], "--keep", "1", "--yes")
    assert out.rc == 0 and "kept model_epoch_003.pth (intact" in out.out, out
    remove = [c for c in pod.kubectl_calls("exec") if "./model_epoch_000.pth" in c.words][0]
    assert exec_args(remove)[:4] == [f"/results/{rec['id']}", rec["id"], f"k:{len(newest)}", "./model_epoch_003.pth"]
    readers = [json.loads(c.stdin)["items"][0] for c in pod.kubectl_calls("create")]
    writable = [not any(m.get("readOnly") for m in r["spec"]["template"]["spec"]["containers"][0]["volumeMounts"])
                for r in readers]
    assert writable == [False, True]  # the listing read through a read-only reader, the delete ran in a writable one


def test_kubernetes_tier_c_keep_is_refused_with_what_to_do(fake, cli, monkeypatch):
    from test_results_access import k8s_job

    rec = k8s_job()
    records.mark(rec["id"], "COMPLETE", backend={})
    import taobank.platforms.kubernetes.results_access as ra
    from taobank.contract import ResultFile, ResultsListing

    monkeypatch.setattr(ra, "_is_s3", lambda r: True)
    monkeypatch.setattr(ra.s3results, "list_prefix", lambda uri, status: ResultsListing(
        uri, [ResultFile("a.pth", 1, 0.0), ResultFile("b.pth", 1, 1.0)]))
    out = cli("tao_jobs.py", "prune", rec["id"], "--keep", "1", "--yes")
    assert out.rc == 1 and "aws s3 rm" in out.err and len(out.err_lines) == 1, out


def test_fetch_best_downloads_only_the_checkpoint_artifacts_ranks_first(docker_job, cli, tmp_path):
    _, jid, folder = docker_job
    out = cli("tao_jobs.py", "fetch", jid, "--best", "--kpi", "val_loss", "--to", tmp_path / "best", "--json")
    assert out.rc == 0, out
    assert [f["path"] for f in json.loads(out.out)] == ["model_epoch_001.pth"]  # val_loss lowest at epoch 1
    assert names(str(tmp_path / "best")) == ["model_epoch_001.pth"]
    for args, needle in ((["--best"], "--best and --kpi NAME go together"),
                         (["model_epoch_000.pth", "--best", "--kpi", "val_loss"], "drop the PATHs")):
        bad = cli("tao_jobs.py", "fetch", jid, *args, "--to", tmp_path / "x")
        assert bad.rc == 2 and needle in bad.err, bad
    none = cli("tao_jobs.py", "fetch", jid, "--best", "--kpi", "nope_kpi", "--mode", "min", "--to", tmp_path / "y")
    assert none.rc == 1 and "nope_kpi" in none.err, none


# ------------------------------------------------------------------ issue 49: one question, a preview, sweep trials
@pytest.fixture()
def three_jobs(docker_fake, fake, tmp_path, cli):
    """Three finished Docker jobs, each with the four checkpoints and TAO's status (val_loss best at epoch 1)."""
    engine = Engine(fake)
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(SPEC))
    jobs = []
    for _ in range(3):
        out = cli("tao_docker.py", "submit", "--spec", str(spec), "--json")
        assert out.rc == 0, out
        jid = json.loads(out.out)["id"]
        folder = records.load(jid)["backend"]["results_dir"]
        os.makedirs(folder, exist_ok=True)
        for name, text in CKPTS.items():
            with open(os.path.join(folder, name), "w") as fh:
                fh.write(text)
        with open(os.path.join(folder, "status.json"), "w") as fh:
            fh.write(STATUS)
        records.mark(jid, "CANCELED", message="canceled: container stopped")
        engine.containers[jid].update(Status="exited", ExitCode=143)
        jobs.append((jid, folder))
    return engine, jobs


def pty_stdin(monkeypatch, typed: str):
    """stdin a real pseudo-terminal (os.openpty) with ``typed`` already typed on it; returns the master fd."""
    master, slave = os.openpty()
    if typed:
        os.write(master, typed.encode())
    stdin = os.fdopen(slave, "r", buffering=1)
    monkeypatch.setattr("sys.stdin", stdin)
    return master, stdin


def test_prune_of_three_ids_on_a_terminal_asks_one_question_listing_every_file(three_jobs, cli, monkeypatch):
    engine, jobs = three_jobs
    master, stdin = pty_stdin(monkeypatch, "y\n")
    try:
        out = cli("tao_jobs.py", "prune", *[j for j, _ in jobs])
    finally:
        stdin.close()
        os.close(master)
    assert out.rc == 0, out
    assert out.err.count("[y/N]") == 1 and out.err.endswith("[y/N] \n"), out.err  # one question, a whole line
    for jid, folder in jobs:
        assert f"{jid} (CANCELED): delete {folder} and everything in it: 5 file(s)" in out.err
        assert "  model_epoch_002.pth (30 B)" in out.err and not os.path.exists(folder)
        assert f"{jid}: deleted {folder}" in out.out and jid not in engine.containers
    assert "in all: 15 file(s)" in out.err


def test_prune_on_a_terminal_nobody_answers_deletes_nothing_and_returns(three_jobs, cli, monkeypatch):
    from taobank.cli import verbcli

    _, jobs = three_jobs
    monkeypatch.setattr(verbcli, "ANSWER_WAIT_S", 0.2)
    master, stdin = pty_stdin(monkeypatch, "")
    try:
        out = cli("tao_jobs.py", "prune", *[j for j, _ in jobs])
    finally:
        stdin.close()
        os.close(master)
    assert out.rc == 0 and "no answer in 0 s: nothing was deleted" in out.err, out
    assert all(len(names(folder)) == 5 for _, folder in jobs) and out.out.count("(not confirmed)") == 3


def test_prune_dry_run_lists_files_and_bytes_per_job_and_deletes_nothing(three_jobs, cli, fake):
    engine, jobs = three_jobs
    before = len(fake.calls)
    ids = [j for j, _ in jobs]
    out = cli("tao_jobs.py", "prune", *ids, "--keep", "best", "--kpi", "val_loss", "--dry-run", "--json")
    assert out.rc == 0, out
    plans = json.loads(out.out)
    assert [p["id"] for p in plans] == ids
    for p in plans:
        assert p["kept"] == ["model_epoch_001.pth"] and p["links"] == []
        assert sorted(f["path"] for f in p["files"]) == ["model_epoch_000.pth", "model_epoch_002.pth",
                                                         "model_epoch_003.pth"]
        assert p["bytes"] == sum(len(CKPTS[f["path"]]) for f in p["files"])
    text = cli("tao_jobs.py", "prune", *ids, "--dry-run")
    assert text.rc == 0 and text.out.startswith("dry run, nothing deleted: "), text
    assert text.out.count("and everything in it: 5 file(s)") == 3 and "  status.json" in text.out
    assert all(len(names(folder)) == 5 for _, folder in jobs) and all(j in engine.containers for j in ids)
    assert not [c for c in fake.calls[before:] if c.program == "docker" and c.argv[1] == "rm"]


def test_prune_without_a_terminal_says_what_it_would_delete(three_jobs, cli, monkeypatch):
    import io

    _, jobs = three_jobs
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    out = cli("tao_jobs.py", "prune", jobs[0][0], "--keep", "1")
    assert out.rc == 2 and "pass --yes" in out.err and "delete 3 checkpoint(s)" in out.err, out
    assert "  model_epoch_000.pth (10 B)" in out.err and len(names(jobs[0][1])) == 5


def test_keep_best_over_a_sweeps_trials_keeps_only_the_winners_best(three_jobs, cli):
    _, jobs = three_jobs
    for trial, ((jid, folder), loss) in enumerate(zip(jobs, (0.3, 0.1, 0.2))):
        rec = records.load(jid)
        records.store.replace(jid, {**rec, "sweep": "dino-train-5a5a5a5a", "trial": trial, "overrides": {"lr": str(trial)}})
        with open(os.path.join(folder, "status.json"), "w") as fh:  # each trial's best val_loss at epoch 2
            fh.write("".join(json.dumps({"status": "RUNNING", "epoch": e, "kpi": {"val_loss": loss + abs(e - 2)}})
                             + "\n" for e in range(4)))
    ids = [j for j, _ in jobs]
    dry = json.loads(cli("tao_jobs.py", "prune", *ids, "--keep", "best", "--kpi", "val_loss", "--dry-run",
                         "--json").out)
    assert [p["kept"] for p in dry] == [[], ["model_epoch_002.pth"], []]
    assert {p["ranked_by"]["winner"] for p in dry} == {ids[1]}
    out = cli("tao_jobs.py", "prune", *ids, "--keep", "best", "--kpi", "val_loss", "--yes")
    assert out.rc == 0, out
    assert names(jobs[1][1]) == ["model_epoch_002.pth", "status.json"]
    assert names(jobs[0][1]) == names(jobs[2][1]) == ["status.json"]
    assert f"lost to trial 1 {ids[1]} (val_loss 0.1)" in out.out and "sweep dino-train-5a5a5a5a's winner" in out.out
