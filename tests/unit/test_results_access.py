"""artifacts, fetch and prune on every platform, against the fake kubectl / ssh / aws: no cluster.

The core (taobank.results_verbs) owns validation, the best checkpoint,
verification, temp + rename and confirmation; these tests drive it through
the Kubernetes reader pod (tier A), S3 (tier C) and SLURM's one connection.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from fakeproc import echo_applied, items, ok, slurm_record
from taobank import fsio, records, results_sh, results_verbs
from taobank.errors import TaoError, UsageError
from taobank.run import Result

EPOCH_LINE = '{{"date": "3/7/2025", "time": "9:5:{e}", "status": "RUNNING", "epoch": {e}, "max_epoch": 5, ' \
             '"kpi": {{"train_loss": {t}, "val_loss": {v}}}}}\n'
STATUS = "".join(EPOCH_LINE.format(e=e, t=1 / (e + 1), v=v) for e, v in zip(range(1, 6), (0.9, 0.6, 0.45, 0.4, 0.5)))
FILES = {"model_epoch_001.pth": b"one\n", "model_epoch_004.pth": b"four\n", "status.json": STATUS.encode(),
         "logs/pod-0.log": b"Epoch 1/5\n", "export/model.onnx": b"onnx"}


def listing_text(files: dict[str, bytes], status: dict[str, str] | None = None) -> str:
    out = "@@files\n" + "".join(f"{len(d)} 1741338303 ./{n}\n" for n, d in files.items()) + "@@status\n"
    for rel, text in (status or {}).items():
        out += f"#status-file {len(text)} {rel}\n" + "".join("|" + ln + "\n" for ln in text.splitlines()) + "\n"
    return out


def facts_text(files: dict[str, bytes], sha: dict[str, str] | None = None) -> str:
    return "".join(f"{len(d)} 1741338303 {(sha or {}).get(n) or hashlib.sha256(d).hexdigest()} ./{n}\n"
                   for n, d in files.items())


def tar_of(files: dict[str, bytes], extra: list[tarfile.TarInfo] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return buf.getvalue()


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


# ------------------------------------------------------------------ Kubernetes (tier A: the reader pod)
def k8s_job(state: str = "COMPLETE", **spec_extra) -> dict:
    """A finished tier A job writing /results/<id> on PVC ws, with the spec saved as submit saves it."""
    spec = {"image": "img", "mounts": [{"pvc": "ws", "mount_path": "/results"}], "command": "train", **spec_extra}
    folder = "/results/{id}" if not spec.get("results_exact") else spec["results_dir"]
    if spec.get("no_results"):
        folder = records.NO_RESULTS_DIR
    rec = records.open_record("kubernetes", "img", "dino", "train", "A", folder,
                              backend={"namespace": "default", "context": ""})
    jid = rec["id"]
    fsio.write_private(records.artifact_dir(jid) / "spec.json", json.dumps(spec))
    rec = records.mark(jid, "PENDING", backend_ref=f"default/{jid}",
                       backend={"uid": f"uid-{jid}", "name": jid, "namespace": "default", "nodes": 1})
    return records.mark(jid, state) if state != "PENDING" else rec


RUNNING_POD = {"metadata": {"name": "tao-read-pod"}, "status": {"phase": "Running", "containerStatuses": [
    {"name": "check", "state": {"running": {}}}]}}


def script_of(call) -> str | None:
    """Which results script a ``kubectl exec`` call runs."""
    if call.words[:1] != ["exec"] or "sh" not in call.words:
        return None
    text = call.words[call.words.index("sh") + 2]
    return next((k for k in ("LIST_RESULTS", "FILE_FACTS", "TAR_FILES", "REMOVE_FOLDER", "REMOVE_FILES")
                 if getattr(results_sh, k) == text), "?")


def exec_args(call) -> list[str]:
    return call.words[call.words.index("sh") + 4:]


@pytest.fixture()
def pod(fake, monkeypatch):
    """The reader pod: created, running at once, deleted; ``pod.answer(SCRIPT, answer)`` sets what it says."""
    monkeypatch.setattr("taobank.kubernetes.volume_job.time.sleep", lambda s: None)
    fake.kubectl("create", answer=echo_applied())
    fake.kubectl("get", "pods", "-l", answer=items([RUNNING_POD]))
    fake.kubectl("delete", "job", answer="")

    def answer(script: str, reply, **kw):
        fake.kubectl("exec", answer=reply, where=lambda c: script_of(c) == script, **kw)

    fake.answer = answer
    return fake


def reader_manifest(fake) -> dict:
    (create,) = fake.kubectl_calls("create")
    return json.loads(create.stdin)["items"][0]


def test_artifacts_lists_the_folder_marks_checkpoints_and_the_best_by_a_kpi(pod, cli):
    rec = k8s_job()
    pod.answer("LIST_RESULTS", listing_text(FILES, {"status.json": STATUS}))
    out = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_loss", "--json")
    assert out.rc == 0, out
    got = json.loads(out.out)
    assert got["folder"] == f"/results/{rec['id']}" and got["exists"] is True
    # the reader names the job it serves: a test (or a user) finds this job's readers alone
    assert reader_manifest(pod)["metadata"]["labels"]["tao-skill-bank/for-job"] == rec["id"]
    by_path = {f["path"]: f for f in got["files"]}
    assert {p for p, f in by_path.items() if f["checkpoint"]} == {"model_epoch_001.pth", "model_epoch_004.pth",
                                                                   "export/model.onnx"}
    assert got["best"]["epoch"] == 4 and got["best"]["value"] == 0.4
    assert got["best"]["checkpoints"] == ["model_epoch_004.pth"] and by_path["model_epoch_004.pth"]["best"]
    (ex,) = [c for c in pod.kubectl_calls("exec")]
    assert exec_args(ex) == [f"/results/{rec['id']}"]  # the folder is $1, never script text
    manifest = reader_manifest(pod)
    mounts = manifest["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert all(m.get("readOnly") for m in mounts if m["mountPath"] != "/dev/shm")  # listing reads only
    assert pod.kubectl_calls("delete", "job")  # the reader pod is removed
    text = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_loss")
    assert "best val_loss (min) = 0.4 at epoch 4: model_epoch_004.pth" in text.out
    assert any(line.split()[-1] == "model_epoch_004.pth" and " best " in line for line in text.out.splitlines())


def test_best_without_a_matching_checkpoint_or_status_file_says_so(pod, cli):
    rec = k8s_job()
    files = {k: v for k, v in FILES.items() if k != "model_epoch_004.pth"}
    pod.answer("LIST_RESULTS", listing_text(files, {"status.json": STATUS}))
    out = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_loss")
    assert out.rc == 0 and "none of the 2 checkpoints is named for epoch 4" in out.out, out
    pod.answer("LIST_RESULTS", listing_text(files))
    out = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_loss")
    assert "no status.json in the results folder" in out.out
    pod.answer("LIST_RESULTS", listing_text(files, {"status.json": STATUS}))
    out = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_los")
    assert out.rc == 1 and out.err_lines == ["error: no KPI 'val_los' in the status file: it has train_loss, val_loss"]


def test_a_missing_folder_is_said_in_one_line(pod, cli):
    rec = k8s_job()
    pod.answer("LIST_RESULTS", "@@missing\n")
    out = cli("tao_jobs.py", "artifacts", rec["id"])
    assert out.rc == 0 and "does not exist (not written yet, or deleted)" in out.err


def test_fetch_verifies_and_renames_every_file(pod, cli, tmp_path):
    rec = k8s_job()
    want = {"model_epoch_004.pth": FILES["model_epoch_004.pth"], "logs/pod-0.log": FILES["logs/pod-0.log"]}
    pod.answer("FILE_FACTS", facts_text(want))
    pod.answer("TAR_FILES", ok(tar_of(want)))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "model_epoch_004.pth", "logs", "--to", tmp_path / "dl", "--json")
    assert out.rc == 0, out
    for name, data in want.items():
        assert (tmp_path / "dl" / name).read_bytes() == data
    assert {f["verified"] for f in json.loads(out.out)} == {"size+sha256"}
    assert sorted(os.listdir(tmp_path / "dl")) == ["logs", "model_epoch_004.pth"]  # no temp folder left
    facts, tar = pod.kubectl_calls("exec")
    assert exec_args(facts) == [f"/results/{rec['id']}", "model_epoch_004.pth", "logs"]
    assert tar.stdin == "./logs/pod-0.log\n./model_epoch_004.pth\n" and "-i" in tar.words  # names on stdin


def test_a_sha256_mismatch_leaves_nothing_under_the_final_name(pod, cli, tmp_path):
    rec = k8s_job()
    want = {"model_epoch_004.pth": b"four\n"}
    pod.answer("FILE_FACTS", facts_text(want, {"model_epoch_004.pth": "0" * 64}))
    pod.answer("TAR_FILES", ok(tar_of(want)))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and "sha256 mismatch" in out.err and len(out.err_lines) == 1
    assert list((tmp_path / "dl").iterdir()) == []  # neither the file nor the temp folder


def test_a_broken_stream_leaves_nothing_under_the_final_name(pod, cli, tmp_path):
    rec = k8s_job()
    want = {"model_epoch_004.pth": b"four\n" * 1000}
    pod.answer("FILE_FACTS", facts_text(want))
    pod.answer("TAR_FILES", Result([], 1, tar_of(want)[:3000], "tar: read error"))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and "tar: read error" in out.err, out
    assert list((tmp_path / "dl").iterdir()) == []


def test_an_existing_file_is_never_replaced_without_force(pod, cli, tmp_path):
    rec = k8s_job()
    want = {"model_epoch_004.pth": b"four\n"}
    (tmp_path / "model_epoch_004.pth").write_bytes(b"mine")
    pod.answer("FILE_FACTS", facts_text(want))
    pod.answer("TAR_FILES", ok(tar_of(want)))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path)
    assert out.rc == 1 and "exists: pass --force" in out.err
    assert [script_of(c) for c in pod.kubectl_calls("exec")] == ["FILE_FACTS"]  # refused before any transfer
    assert (tmp_path / "model_epoch_004.pth").read_bytes() == b"mine"
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path, "--force")
    assert out.rc == 0 and (tmp_path / "model_epoch_004.pth").read_bytes() == b"four\n"


@pytest.mark.parametrize("bad", [link("./model_epoch_004.pth", "/etc/passwd"),
                                 link("./model_epoch_004.pth", "x", tarfile.LNKTYPE),
                                 link("./model_epoch_004.pth", "", tarfile.CHRTYPE),
                                 link("../escape.pth", "", tarfile.REGTYPE),
                                 link("/abs.pth", "", tarfile.REGTYPE),
                                 link("./not-listed.pth", "", tarfile.REGTYPE)],
                         ids=["symlink", "hardlink", "device", "dotdot", "absolute", "unlisted"])
def test_a_hostile_tar_member_is_refused(pod, cli, tmp_path, bad):
    rec = k8s_job()
    pod.answer("FILE_FACTS", facts_text({"model_epoch_004.pth": b""}))
    pod.answer("TAR_FILES", ok(tar_of({}, [bad])))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and "refused" in out.err and len(out.err_lines) == 1, out
    assert list((tmp_path / "dl").iterdir()) == [] and not (tmp_path / "escape.pth").exists()


def test_paths_outside_the_folder_are_refused_before_any_call(fake, cli, tmp_path):
    rec = k8s_job()
    for bad in ("../other-job/x.pth", "/etc/passwd", "-rf", "a/../../b", "./-x", "."):
        out = cli("tao_jobs.py", "fetch", "--to", tmp_path, "--", rec["id"], bad)  # after --: never an option
        assert out.rc == 2 and len(out.err_lines) == 1, (bad, out)
        assert any(w in out.err for w in ("is not a path inside the folder", "starts with", "folder itself")), out
    assert fake.calls == []


def test_the_cluster_refusing_a_path_is_one_line(pod, cli, tmp_path):
    rec = k8s_job()
    pod.answer("FILE_FACTS", "@@outside escape\n")
    out = cli("tao_jobs.py", "fetch", rec["id"], "escape", "--to", tmp_path)
    assert out.rc == 1 and out.err_lines == [f"error: escape is a link or leads out of the results folder "
                                             f"/results/{rec['id']}: refused"]


def test_prune_deletes_the_own_folder_on_a_writable_reader_after_yes(pod, cli):
    rec = k8s_job()
    pod.answer("REMOVE_FOLDER", "@@removed\n")
    out = cli("tao_jobs.py", "prune", rec["id"], "--yes")
    assert out.rc == 0 and f"deleted /results/{rec['id']}" in out.out, out
    (ex,) = pod.kubectl_calls("exec")
    assert exec_args(ex) == [f"/results/{rec['id']}", rec["id"]]  # the cluster checks the folder's name too
    mounts = reader_manifest(pod)["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert not any(m.get("readOnly") for m in mounts)
    pod.answer("LIST_RESULTS", "@@missing\n")
    assert "(pruned 20" in cli("tao_jobs.py", "artifacts", rec["id"]).err


@pytest.mark.parametrize("state", ["PENDING", "RUNNING", "UNKNOWN"])
def test_prune_refuses_an_active_job(fake, cli, state):
    rec = k8s_job(state=state)
    out = cli("tao_jobs.py", "prune", rec["id"], "--yes")
    assert out.rc == 1 and f"is {state}: its results may still be written" in out.err and fake.calls == []


def test_prune_refuses_exact_and_no_results_folders(fake, cli):
    exact = k8s_job(results_dir="/results/shared-run", results_exact=True)
    out = cli("tao_jobs.py", "prune", exact["id"], "--yes")
    assert out.rc == 1 and "results_exact, so it may hold more than this job" in out.err
    none = k8s_job(no_results=True)
    out = cli("tao_jobs.py", "prune", none["id"], "--yes")
    assert out.rc == 1 and "--no-results: it kept no results" in out.err
    assert fake.calls == []


def test_prune_without_a_terminal_or_yes_refuses_and_no_keeps(pod, cli, monkeypatch):
    rec = k8s_job()
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a TTY
    out = cli("tao_jobs.py", "prune", rec["id"])
    assert out.rc == 2 and "run it on a terminal to confirm, or pass --yes" in out.err and pod.calls == []

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Tty("n\n"))
    out = cli("tao_jobs.py", "prune", rec["id"])
    assert out.rc == 0 and "kept" in out.out and f"delete /results/{rec['id']}" in out.err and pod.calls == []


# ------------------------------------------------------------------ Kubernetes tier C (S3 through the AWS CLI)
def s3_job(monkeypatch) -> dict:
    monkeypatch.setattr("taobank.s3results.shutil.which", lambda name: "/usr/bin/aws")
    monkeypatch.setenv("S3_ENDPOINT_URL", "http://10.0.0.1:9000")
    rec = records.open_record("kubernetes", "img", "dino", "train", "C", "s3://bkt/results/{id}",
                              backend={"namespace": "default", "context": ""})
    fsio.write_private(records.artifact_dir(rec["id"]) / "spec.json", json.dumps({"storage_tier": "C"}))
    records.mark(rec["id"], "PENDING", backend_ref=f"default/{rec['id']}", backend={"name": rec["id"]})
    return records.mark(rec["id"], "COMPLETE")


def s3_listing(jid: str, files: dict[str, bytes]) -> dict:
    return {"Contents": [{"Key": f"results/{jid}/{n}", "Size": len(d), "LastModified": "2025-03-07T09:05:03.000Z",
                          "ETag": f'"{hashlib.md5(d).hexdigest()}"'} for n, d in files.items()]
            + [{"Key": f"results/{jid}-other/x", "Size": 1, "ETag": '"x"'}]}


def test_s3_artifacts_fetch_and_prune_stay_under_the_folder_prefix(fake, cli, monkeypatch, tmp_path):
    rec = s3_job(monkeypatch)
    jid = rec["id"]
    fake.on("aws", lambda c: "list-objects-v2" in c.words, s3_listing(jid, FILES))
    fake.on("aws", lambda c: c.words[-2:] == [f"s3://bkt/results/{jid}/status.json", "-"], STATUS)
    out = cli("tao_jobs.py", "artifacts", jid, "--kpi", "val_loss", "--json")
    assert out.rc == 0, out
    got = json.loads(out.out)
    assert got["best"]["checkpoints"] == ["model_epoch_004.pth"] and f"{jid}-other" not in out.out
    (listing, _) = fake.of("aws")
    assert listing.words[:2] == ["--endpoint-url", "http://10.0.0.1:9000"]
    assert listing.words[listing.words.index("--prefix") + 1] == f"results/{jid}/"  # never results/<id>-other
    fake.on("aws", lambda c: c.words[-2:] == [f"s3://bkt/results/{jid}/model_epoch_004.pth", "-"],
            ok(b"four\n"))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", jid, "model_epoch_004.pth", "--to", tmp_path, "--json")
    assert out.rc == 0 and json.loads(out.out)[0]["verified"] == "size+md5", out
    assert (tmp_path / "model_epoch_004.pth").read_bytes() == b"four\n"
    fake.on("aws", lambda c: "rm" in c.words, "")
    out = cli("tao_jobs.py", "prune", jid, "--yes")
    assert out.rc == 0 and f"deleted {len(FILES)} objects under s3://bkt/results/{jid}/" in out.out, out
    (rm,) = [c for c in fake.of("aws") if "rm" in c.words]
    assert rm.words[-1] == f"s3://bkt/results/{jid}/" and "--recursive" in rm.words


def test_s3_corrupt_download_is_refused(fake, cli, monkeypatch, tmp_path):
    rec = s3_job(monkeypatch)
    fake.on("aws", lambda c: "list-objects-v2" in c.words, s3_listing(rec["id"], {"m.pth": b"four\n"}))
    fake.on("aws", lambda c: c.words[-1] == "-", ok(b"fiv3\n"))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and "MD5 mismatch" in out.err and list((tmp_path / "dl").iterdir()) == []


def test_s3_without_the_aws_cli_says_what_is_needed(fake, cli, monkeypatch):
    rec = s3_job(monkeypatch)
    monkeypatch.setattr("taobank.s3results.shutil.which", lambda name: None)
    out = cli("tao_jobs.py", "artifacts", rec["id"])
    assert out.rc == 1 and len(out.err_lines) == 1 and "install the AWS CLI" in out.err and fake.calls == []


# ------------------------------------------------------------------ SLURM (one SSH connection)
def test_slurm_artifacts_fetch_and_prune_over_the_connection(slurm, cli, tmp_path):
    rec = slurm_record(state="COMPLETE")
    folder = rec["backend"]["results_dir"]
    slurm.ssh("LIST_RESULTS", listing_text(FILES, {"status.json": STATUS}))
    out = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_loss", "--mode", "max", "--json")
    assert out.rc == 0, out
    assert json.loads(out.out)["best"]["checkpoints"] == ["model_epoch_001.pth"]  # val_loss highest at epoch 1
    assert slurm.calls[-1].args == [folder]
    want = {"model_epoch_001.pth": FILES["model_epoch_001.pth"]}
    slurm.ssh("FILE_FACTS", facts_text(want))
    slurm.ssh("TAR_FILES", ok(tar_of(want)))  # type: ignore[arg-type]
    before = len(slurm.of("ssh"))
    out = cli("tao_jobs.py", "fetch", rec["id"], "model_epoch_001.pth", "--to", tmp_path)
    assert out.rc == 0 and (tmp_path / "model_epoch_001.pth").read_bytes() == b"one\n", out
    assert slurm.scripts()[before:] == ["FILE_FACTS", "TAR_FILES"]
    slurm.ssh("REMOVE_FOLDER", "@@removed\n")
    out = cli("tao_jobs.py", "prune", rec["id"], "--yes")
    assert out.rc == 0 and slurm.calls[-1].args == [folder, rec["id"]]


def test_slurm_prune_refuses_a_record_that_keeps_the_parent(slurm, cli):
    rec = records.open_record("slurm", "none", "dino", "train", "A", "/lustre/base/results",
                              backend={"backend_type": "slurm"})
    records.mark(rec["id"], "COMPLETE")
    out = cli("tao_jobs.py", "prune", rec["id"], "--yes")
    assert out.rc == 1 and "the record keeps the parent folder" in out.err and slurm.of("ssh") == []


def test_slurm_refusal_on_the_cluster_is_one_line(slurm, cli):
    rec = slurm_record(state="ERROR")
    slurm.ssh("REMOVE_FOLDER", ok("", rc=4, stderr="refused: /lustre/base/results/x is not a directory"))
    out = cli("tao_jobs.py", "prune", rec["id"], "--yes")
    assert out.rc == 1 and len(out.err_lines) == 1 and "is not a directory" in out.err


# ------------------------------------------------------------------ the core's parts
def test_progress_is_silent_for_ten_seconds_then_throttled():
    now = [0.0]
    lines: list[str] = []
    meter = results_verbs.Meter(lines.append, clock=lambda: now[0])
    meter.total = 4 << 30
    for t in (1, 5, 9.9):
        now[0] = t
        meter.advance(int(t) << 20)
    assert lines == []
    for t in (10, 10.5, 11.9, 12, 13):
        now[0] = t
        meter.advance(int(t) << 30 >> 2)
    assert len(lines) == 2 and lines[0].startswith("fetched 2.5 GiB of 4.0 GiB (62%)")
    meter.finish()
    assert len(lines) == 3


@pytest.mark.parametrize("name,key,number", [
    ("model_epoch_004.pth", "epoch", 4), ("train/dino_model_epoch=012.ckpt", "epoch", 12),
    ("epoch=4-step=100.ckpt", "epoch", 4), ("resnet18_004.tlt", "epoch", 4), ("model.pth", "epoch", None),
    ("ckpt_step_200.pt", "step", 200), ("model_epoch_3.pth", "step", None)])
def test_the_number_a_checkpoint_name_carries(name, key, number):
    assert results_verbs.number_in_name(name, key) == number


def test_the_checkpoint_list_is_one_constant():
    from taobank.contract import CHECKPOINT_SUFFIXES, ResultFile

    assert {".pth", ".ckpt", ".pt", ".tlt", ".hdf5", ".onnx", ".engine"} == set(CHECKPOINT_SUFFIXES)
    assert ResultFile("a/MODEL.ENGINE", 1, 0).checkpoint and not ResultFile("a/model.pth.txt", 1, 0).checkpoint


def test_usage_errors_come_before_any_record_is_read(fake, cli):
    assert cli("tao_jobs.py", "fetch", "--to", "x").rc == 2
    assert cli("tao_jobs.py", "artifacts").rc == 2
    with pytest.raises(UsageError):
        results_verbs.artifacts(None, "no-such-job", mode="median")
    with pytest.raises(TaoError):
        results_verbs.fetch(None, "no-such-job", ["ok.pth"], Path("x"))
