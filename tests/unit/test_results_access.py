"""artifacts, fetch and prune on every platform, against the fake kubectl / ssh / aws: no cluster.

The core (taobank.campaign.results_verbs) owns validation, the best checkpoint,
verification, temp + rename and confirmation; these tests drive it through
the Kubernetes reader pod (tier A), S3 (tier C) and SLURM's one connection.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from pathlib import Path

import pytest

from fakeproc import echo_applied, items, ok, slurm_record
from taobank import fsio, records, results_shell
from taobank.campaign import results_fetch, results_verbs
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


MTIME = 1741338303


def facts_text(files: dict[str, bytes]) -> str:
    return "".join(f"{len(d)} {MTIME} ./{n}\n" for n, d in files.items())


def sent(files: dict[str, bytes], *, alg: str = "md5", digest: dict[str, str] | None = None,
         end: dict[str, str] | None = None, offset: dict[str, int] | None = None) -> bytes:
    """What SEND_FILES writes for ``files`` (a digest or the end line of a file replaced to simulate damage)."""
    out = b""
    for name, data in sorted(files.items()):
        off = (offset or {}).get(name, 0)
        out += f"@@file {alg} {off} {len(data)} {MTIME} ./{name}\n".encode()
        for at in range(off, len(data), results_shell.BLOCK):
            block = data[at:at + results_shell.BLOCK]
            if alg == "md5":
                value = hashlib.md5(block).hexdigest()
            else:
                c = results_shell.PosixCksum()
                c.update(block)
                value = "%d %d" % c.value()
            out += block + f"@@sum {(digest or {}).get(name) or value}\n".encode()
        out += ((end or {}).get(name) or f"@@end {len(data)} {MTIME}\n").encode()
    return out


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
    return next((k for k in ("LIST_RESULTS", "FILE_FACTS", "SEND_FILES", "REMOVE_FOLDER", "REMOVE_FILES")
                 if getattr(results_shell, k) == text), "?")


def exec_args(call) -> list[str]:
    return call.words[call.words.index("sh") + 4:]


def execs(fake, script: str) -> list:
    """The ``kubectl exec`` calls that ran one results script: found by what they run, not by position."""
    return [c for c in fake.kubectl_calls("exec") if script_of(c) == script]


@pytest.fixture()
def pod(fake, monkeypatch):
    """The reader pod: created, running at once, deleted; ``pod.answer(SCRIPT, answer)`` sets what it says."""
    monkeypatch.setattr("taobank.platforms.kubernetes.volume_job.time.sleep", lambda s: None)
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
    assert "best val_loss (min, from the KPI's name) = 0.4 at epoch 4: model_epoch_004.pth" in text.out
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
    out = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_los", "--mode", "min")
    assert out.rc == 1 and out.err_lines == ["error: no KPI 'val_los' in the status file (did you mean 'val_loss'?): "
                                             "it has train_loss, val_loss"]


def test_a_mistyped_kpi_is_said_first_whatever_the_mode(pod, cli):
    """`artifacts ID --kpi val_los` without --mode: the KPI the status file lacks (and the nearest one) is the line,
    not "cannot tell which way val_los is better: add --mode" (which sent the user to --mode first)."""
    rec = k8s_job()
    pod.answer("LIST_RESULTS", listing_text(FILES, {"status.json": STATUS}))
    out = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_los")
    assert out.rc == 1 and out.err_lines == ["error: no KPI 'val_los' in the status file (did you mean 'val_loss'?): "
                                             "it has train_loss, val_loss"], out
    # a KPI the file has, whose name says no direction: --mode is still asked for (a usage error)
    pod.answer("LIST_RESULTS", listing_text(FILES, {"status.json": STATUS.replace("val_loss", "val_metric")}))
    out = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_metric")
    assert out.rc == 2 and "cannot tell from its name which way KPI 'val_metric' is better" in out.err, out
    # no status file to look in: the direction is asked for as before
    pod.answer("LIST_RESULTS", listing_text(FILES))
    out = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_los")
    assert out.rc == 2 and "add --mode min" in out.err, out
    # an unknown --mode is refused before the folder is listed
    calls = len(pod.calls)
    out = cli("tao_jobs.py", "artifacts", rec["id"], "--kpi", "val_los", "--mode", "best")
    assert out.rc == 2 and len(pod.calls) == calls, out


def test_a_missing_folder_is_said_in_one_line(pod, cli):
    rec = k8s_job()
    pod.answer("LIST_RESULTS", "@@missing\n")
    out = cli("tao_jobs.py", "artifacts", rec["id"])
    assert out.rc == 0 and "does not exist (not written yet, or deleted)" in out.err


def test_fetch_verifies_and_renames_every_file(pod, cli, tmp_path):
    rec = k8s_job()
    want = {"model_epoch_004.pth": FILES["model_epoch_004.pth"], "logs/pod-0.log": FILES["logs/pod-0.log"]}
    pod.answer("FILE_FACTS", facts_text(want))
    pod.answer("SEND_FILES", ok(sent(want)))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "model_epoch_004.pth", "logs", "--to", tmp_path / "dl", "--json")
    assert out.rc == 0, out
    for name, data in want.items():
        assert (tmp_path / "dl" / name).read_bytes() == data
        assert int((tmp_path / "dl" / name).stat().st_mtime) == MTIME  # the cluster's: a rerun knows it has it
    assert {f["verified"] for f in json.loads(out.out)} == {results_shell.VERIFIED["md5"]}
    assert out.err == ""  # --json: no progress line, nothing but the JSON
    assert sorted(os.listdir(tmp_path / "dl")) == ["logs", "model_epoch_004.pth"]  # no temp folder left
    (facts,), (send,) = execs(pod, "FILE_FACTS"), execs(pod, "SEND_FILES")
    assert exec_args(facts) == [f"/results/{rec['id']}", "model_epoch_004.pth", "logs"]
    assert exec_args(send) == [f"/results/{rec['id']}", str(results_shell.BLOCK)]
    assert send.stdin == f"0 10 {MTIME} ./logs/pod-0.log\n0 5 {MTIME} ./model_epoch_004.pth\n"  # names on stdin
    assert "-i" in send.words
    again = cli("tao_jobs.py", "fetch", rec["id"], "model_epoch_004.pth", "logs", "--to", tmp_path / "dl", "--json")
    assert again.rc == 0 and {f["verified"] for f in json.loads(again.out)} == {"already here (same size and mtime)"}
    assert len(execs(pod, "SEND_FILES")) == 1  # the rerun moved no byte


def test_a_path_not_in_the_folder_names_the_jobs_listing_and_leaves_no_empty_folder(pod, cli, tmp_path):
    rec = k8s_job()
    pod.answer("FILE_FACTS", "@@absent nope.pth\n")
    out = cli("tao_jobs.py", "fetch", rec["id"], "nope.pth", "--to", tmp_path / "new" / "dl")
    assert out.rc == 1 and out.err_lines == [f"error: nope.pth is not in the results folder /results/{rec['id']}: "
                                             f"see tao_jobs.py artifacts {rec['id']}"], out
    assert not (tmp_path / "new" / "dl").exists()  # the --to this fetch made is gone again
    (tmp_path / "mine").mkdir()
    assert cli("tao_jobs.py", "fetch", rec["id"], "nope.pth", "--to", tmp_path / "mine").rc == 1
    assert (tmp_path / "mine").is_dir()  # one the user had stays


def test_fetch_makes_the_clusters_links_again_and_counts_them_apart(pod, cli, tmp_path):
    """TAO's ``*_latest.pth`` link arrives as a link to the fetched checkpoint, not as a second copy of its bytes."""
    rec = k8s_job()
    want = {"train/model_epoch_004.pth": b"four\n"}
    pod.answer("FILE_FACTS", facts_text(want) + "@@link ./train/dino_model_latest.pth\n@@to ./train/model_epoch_004.pth\n"
               "@@link ./bad\n@@to ./../outside\n")
    pod.answer("SEND_FILES", ok(sent(want)))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "train", "--to", tmp_path / "dl")
    assert out.rc == 0 and out.err == "", out
    assert out.out.splitlines()[0] == f"fetched 1 file and 1 link (5 B) of {rec['id']}, each verified:"
    assert out.out.splitlines()[2] == (f"  {tmp_path / 'dl' / 'train' / 'dino_model_latest.pth'} -> "
                                       "model_epoch_004.pth (a link, as in the results folder)")  # as ls -l says
    assert os.readlink(tmp_path / "dl" / "train" / "dino_model_latest.pth") == "model_epoch_004.pth"
    assert not (tmp_path / "dl" / "bad").exists() and not (tmp_path / "outside").exists()
    got = json.loads(cli("tao_jobs.py", "fetch", rec["id"], "train", "--to", tmp_path / "dl", "--json").out)
    assert [g.get("link_to") for g in got] == [None, "train/model_epoch_004.pth"]


@pytest.mark.parametrize("alg", ["md5", "crc"])
def test_a_digest_mismatch_leaves_nothing_under_the_final_name(pod, cli, tmp_path, alg):
    rec = k8s_job()
    want = {"model_epoch_004.pth": b"four\n"}
    pod.answer("FILE_FACTS", facts_text(want))
    pod.answer("SEND_FILES", ok(sent(want, alg=alg, digest={"model_epoch_004.pth": "0" * 32 if alg == "md5"
                                                             else "123 5"})))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and "differ from the bytes read on the cluster" in out.err and len(out.err_lines) == 1, out
    assert not (tmp_path / "dl").exists()  # no copy, not even a temp one (nor the --to this fetch made)


def test_a_file_rewritten_during_the_fetch_is_named_and_not_kept(pod, cli, tmp_path):
    rec = k8s_job()
    want = {"model_epoch_004.pth": b"four\n", "status.json": b"{}\n"}
    pod.answer("FILE_FACTS", facts_text(want))
    pod.answer("SEND_FILES", ok(sent(want, end={"model_epoch_004.pth": f"@@end 9 {MTIME + 1}\n"})))  # type: ignore
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and len(out.err_lines) == 1, out
    assert "model_epoch_004.pth changed while being fetched" in out.err
    assert not list((tmp_path / "dl").glob("**/model_epoch_004.pth"))
    assert (tmp_path / "dl" / "status.json").read_bytes() == b"{}\n"  # the others were fetched


def test_a_broken_stream_keeps_only_verified_bytes_and_a_rerun_resumes(pod, cli, tmp_path, monkeypatch):
    """Blocks of 4 bytes: the stream breaks in the third block; the rerun asks from byte 8 and ends whole."""
    monkeypatch.setattr(results_shell, "BLOCK", 4)
    rec = k8s_job()
    data = b"0123456789ab"
    want = {"model_epoch_004.pth": data}
    pod.answer("FILE_FACTS", facts_text(want))
    full = sent(want)
    cut = full.index(b"89ab") + 2
    pod.answer("SEND_FILES", Result([], 255, full[:cut], "connection closed"), times=1)  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and len(out.err_lines) == 1 and "connection closed" in out.err, out
    assert not (tmp_path / "dl" / "model_epoch_004.pth").exists()
    part = tmp_path / "dl" / f".tao-fetch-{rec['id']}" / "model_epoch_004.pth"
    assert part.read_bytes()[:8] == data[:8]
    pod.answer("SEND_FILES", ok(sent(want, offset={"model_epoch_004.pth": 8})))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 0, out
    assert execs(pod, "SEND_FILES")[-1].stdin == f"8 12 {MTIME} ./model_epoch_004.pth\n"  # only what is missing
    assert "fetched 1 file (" in out.out
    assert (tmp_path / "dl" / "model_epoch_004.pth").read_bytes() == data
    assert os.listdir(tmp_path / "dl") == ["model_epoch_004.pth"]


def test_a_stream_cut_short_with_no_error_is_resumed_from_its_last_verified_block(pod, cli, tmp_path, monkeypatch):
    """kubectl exec can end its output early and exit 0: the fetch asks again from the last verified block (each
    retry only after the last one moved a block) and the user gets the whole file in one run."""
    monkeypatch.setattr(results_shell, "BLOCK", 4)
    rec = k8s_job()
    data = b"0123456789ab"
    want = {"model_epoch_004.pth": data}
    pod.answer("FILE_FACTS", facts_text(want))
    full, rest = sent(want), sent(want, offset={"model_epoch_004.pth": 4})
    # the fake answers with the rule given last first: the third stream, the second, then the first
    pod.answer("SEND_FILES", ok(sent(want, offset={"model_epoch_004.pth": 8})))  # type: ignore[arg-type]
    pod.answer("SEND_FILES", ok(rest[:rest.index(b"89ab") + 1]), times=1)  # type: ignore[arg-type]
    pod.answer("SEND_FILES", ok(full[:full.index(b"4567") + 6]), times=1)  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl", "--json")
    assert out.rc == 0, out
    # kept as a sequence: each resume asks from the block after the last verified one, in turn
    assert [c.stdin for c in execs(pod, "SEND_FILES")] == [
        f"{n} 12 {MTIME} ./model_epoch_004.pth\n" for n in (0, 4, 8)]
    assert out.err.count("ended early with no error; resumed from the last verified block") == 2, out.err
    assert (tmp_path / "dl" / "model_epoch_004.pth").read_bytes() == data
    (got,) = json.loads(out.out)
    assert got["moved"] == len(data)


def test_a_stream_that_moves_nothing_is_not_asked_again(pod, cli, tmp_path, monkeypatch):
    monkeypatch.setattr(results_shell, "BLOCK", 4)
    rec = k8s_job()
    want = {"model_epoch_004.pth": b"0123456789ab"}
    pod.answer("FILE_FACTS", facts_text(want))
    full = sent(want)
    pod.answer("SEND_FILES", ok(full[:full.index(b"0123")]))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and len(out.err_lines) == 1 and "broke off" in out.err, out
    assert len([c for c in pod.kubectl_calls("exec") if c.stdin]) == 1  # not one byte came: no retry
    assert not (tmp_path / "dl" / "model_epoch_004.pth").exists()


def test_a_stream_cut_again_and_again_is_resumed_a_bounded_number_of_times(pod, cli, tmp_path, monkeypatch):
    monkeypatch.setattr(results_shell, "BLOCK", 4)
    rec = k8s_job()
    want = {"model_epoch_004.pth": b"0123456789ab"}
    pod.answer("FILE_FACTS", facts_text(want))
    full = sent(want)
    pod.answer("SEND_FILES", ok(full[:full.index(b"0123") + 2]))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and "broke off" in out.err_lines[-1], out
    assert len([c for c in pod.kubectl_calls("exec") if c.stdin]) == 1 + results_shell.RESUMES
    assert not (tmp_path / "dl" / "model_epoch_004.pth").exists()


def test_a_full_disk_is_one_line_and_leaves_no_partial_file(pod, cli, tmp_path, monkeypatch):
    import errno

    rec = k8s_job()
    want = {"a.pth": b"a" * 100, "b.pth": b"b" * 100}
    pod.answer("FILE_FACTS", facts_text(want))
    pod.answer("SEND_FILES", ok(sent(want)))  # type: ignore[arg-type]
    real = results_fetch._Transfer.part
    calls = []

    @contextlib.contextmanager
    def full(self, f, offset):
        with real(self, f, offset) as fh:
            calls.append(f.path)
            if len(calls) == 2:
                fh.write(b"b" * 10)
                fh.flush()
                raise OSError(errno.ENOSPC, "No space left on device")
            yield fh

    monkeypatch.setattr(results_fetch._Transfer, "part", full)
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and len(out.err_lines) == 1 and "the disk is full" in out.err, out
    assert "partial files were removed" in out.err
    assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == ["a.pth"]  # a whole verified file stays


def test_sigterm_during_a_fetch_deletes_the_reader_and_keeps_what_was_verified(pod, cli, tmp_path, monkeypatch):
    """``kill`` of the client half-way: the reader Job is deleted (a second TERM meanwhile is ignored), the
    handlers are as before, and the rerun asks only for the file that did not arrive."""
    import signal

    rec = k8s_job()
    want = {"a.pth": b"a" * 10, "b.pth": b"b" * 10}
    pod.answer("FILE_FACTS", facts_text(want))
    full = sent(want)

    def killed(call):
        os.kill(os.getpid(), signal.SIGTERM)  # the handler raises at once, before this answer is read
        return ok(full)

    pod.answer("SEND_FILES", killed, times=1)
    deleted: list[object] = []
    pod.kubectl("delete", "job", answer=lambda c: deleted.append(signal.getsignal(signal.SIGTERM)) or ok(""))
    before = signal.getsignal(signal.SIGTERM)
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc != 0 and "interrupted" in out.err, out
    assert deleted == [signal.SIG_IGN] and signal.getsignal(signal.SIGTERM) == before
    reader = reader_manifest(pod)
    assert reader["spec"]["template"]["metadata"]["labels"]["tao-skill-bank/for-job"] == rec["id"]
    assert reader["spec"]["activeDeadlineSeconds"] > 0 and reader["spec"]["ttlSecondsAfterFinished"] > 0
    pod.calls.clear()
    pod.kubectl("create", answer=echo_applied())
    pod.answer("SEND_FILES", ok(sent({"b.pth": want["b.pth"]})))  # type: ignore[arg-type]
    (tmp_path / "dl").mkdir(exist_ok=True)
    (tmp_path / "dl" / "a.pth").write_bytes(want["a.pth"])  # as if a.pth had arrived whole before the kill
    os.utime(tmp_path / "dl" / "a.pth", (MTIME, MTIME))
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 0, out
    assert [c.stdin for c in execs(pod, "SEND_FILES")] == [f"0 10 {MTIME} ./b.pth\n"]  # a.pth is not sent again


def test_an_existing_file_is_never_replaced_without_force(pod, cli, tmp_path):
    rec = k8s_job()
    want = {"model_epoch_004.pth": b"four\n"}
    (tmp_path / "model_epoch_004.pth").write_bytes(b"mine")
    pod.answer("FILE_FACTS", facts_text(want))
    pod.answer("SEND_FILES", ok(sent(want)))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path)
    assert out.rc == 1 and "exists: pass --force" in out.err
    assert execs(pod, "SEND_FILES") == []  # refused before any transfer
    assert (tmp_path / "model_epoch_004.pth").read_bytes() == b"mine"
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path, "--force")
    assert out.rc == 0 and (tmp_path / "model_epoch_004.pth").read_bytes() == b"four\n"


@pytest.mark.parametrize("bad", [b"@@file md5 0 5 1 ./not-listed.pth\n", b"@@file md5 0 5 1 ../escape.pth\n",
                                 b"@@file md5 0 5 1 /abs.pth\n", b"garbage\n"],
                         ids=["unlisted", "dotdot", "absolute", "garbage"])
def test_a_stream_naming_a_file_not_asked_for_is_refused(pod, cli, tmp_path, bad):
    rec = k8s_job()
    pod.answer("FILE_FACTS", facts_text({"model_epoch_004.pth": b""}))
    pod.answer("SEND_FILES", ok(bad + b"four\n"))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and "refused" in out.err and len(out.err_lines) == 1, out
    assert not list((tmp_path / "dl").glob("**/*.pth")) and not (tmp_path / "escape.pth").exists()


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
    assert not list(tmp_path.glob(".tao-fetch-*"))  # no staging folder left: nothing to resume


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
    assert out.rc == 1 and f"record says {state}: its results may still be written" in out.err and fake.calls == []


def test_prune_refuses_exact_and_no_results_folders(fake, cli):
    exact = k8s_job(results_dir="/results/shared-run", results_exact=True)
    out = cli("tao_jobs.py", "prune", exact["id"], "--yes")
    assert out.rc == 1 and "results_exact, so it may hold more than this job" in out.err
    none = k8s_job(no_results=True)
    out = cli("tao_jobs.py", "prune", none["id"], "--yes")
    assert out.rc == 1 and "--no-results: it kept no results" in out.err
    assert fake.calls == []


def test_prune_without_a_terminal_or_yes_says_what_it_would_delete_and_refuses_and_no_keeps(pod, cli, monkeypatch):
    rec = k8s_job()
    pod.answer("LIST_RESULTS", listing_text(FILES))
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a TTY
    out = cli("tao_jobs.py", "prune", rec["id"])
    assert out.rc == 2 and "run it on a terminal to answer its one question, or pass --yes" in out.err, out
    assert f"delete /results/{rec['id']} and everything in it: 5 file(s)" in out.err  # what it would delete
    assert "  model_epoch_004.pth (5 B)" in out.err and "REMOVE_FOLDER" not in [script_of(c) for c in pod.calls]

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Tty("n\n"))
    out = cli("tao_jobs.py", "prune", rec["id"])
    assert out.rc == 0 and "kept" in out.out and f"delete /results/{rec['id']}" in out.err, out
    assert "REMOVE_FOLDER" not in [script_of(c) for c in pod.calls]


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
    assert out.rc == 0 and json.loads(out.out)[0]["verified"] == "size+md5 (ETag)", out
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
    assert out.rc == 1 and "MD5 mismatch" in out.err and not list((tmp_path / "dl").glob("**/m.pth"))


def test_s3_download_longer_than_listed_stops_at_the_listed_size(fake, cli, monkeypatch, tmp_path):
    """An object rewritten bigger since it was listed: the copy stops, nothing of it kept."""
    rec = s3_job(monkeypatch)
    fake.on("aws", lambda c: "list-objects-v2" in c.words, s3_listing(rec["id"], {"m.pth": b"four\n"}))
    fake.on("aws", lambda c: c.words[-1] == "-", ok(b"y" * 100000))  # type: ignore[arg-type]
    out = cli("tao_jobs.py", "fetch", rec["id"], "--to", tmp_path / "dl")
    assert out.rc == 1 and "more bytes arrived than the 5 S3 listed" in out.err
    assert not [p for p in (tmp_path / "dl").rglob("*") if p.is_file() and p.name not in ("state.json", "lock")]


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
    assert [c.args for c in slurm.ssh_calls("LIST_RESULTS")] == [[folder]]
    want = {"model_epoch_001.pth": FILES["model_epoch_001.pth"]}
    slurm.ssh("FILE_FACTS", facts_text(want))
    slurm.ssh("SEND_FILES", ok(sent(want, alg="crc")))  # type: ignore[arg-type]
    before = len(slurm.of("ssh"))
    out = cli("tao_jobs.py", "fetch", rec["id"], "model_epoch_001.pth", "--to", tmp_path)
    assert out.rc == 0 and (tmp_path / "model_epoch_001.pth").read_bytes() == b"one\n", out
    assert sorted(slurm.scripts()[before:]) == ["FILE_FACTS", "SEND_FILES"]  # two commands, each byte read once
    slurm.ssh("REMOVE_FOLDER", "@@removed\n")
    out = cli("tao_jobs.py", "prune", rec["id"], "--yes")
    assert out.rc == 0 and [c.args for c in slurm.ssh_calls("REMOVE_FOLDER")] == [[folder, rec["id"]]]


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
    meter = results_fetch.Meter(lines.append, clock=lambda: now[0])
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
        results_fetch.fetch(None, "no-such-job", ["ok.pth"], Path("x"))
