"""The results scripts (taobank.results_sh) run for real with /bin/sh and busybox sh, as the login node and the
reader pod run them: listing, facts with sha256, the tar stream through the safe extractor, the guarded rm."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from taobank import results_sh
from taobank.errors import TaoError
from taobank.run import Result
from taobank.tarstream import extract

TRAINER = Path(__file__).resolve().parents[2] / "testclusters" / "fake_tao_train.sh"
SHELLS = [pytest.param(["/bin/sh"], id="sh"),
          pytest.param(["busybox", "sh"], id="busybox",
                       marks=pytest.mark.skipif(not shutil.which("busybox"), reason="busybox is not installed"))]


class Local:
    """A results_sh.Shell that runs the scripts here (what the pod and the login node do there)."""

    def __init__(self, shell: list[str]) -> None:
        self.shell = shell

    def text(self, script: str, args: list[str], *, what: str) -> Result:
        p = subprocess.run(self.shell + ["-c", script, "tao", *args], capture_output=True, text=True, timeout=60)
        return Result([], p.returncode, p.stdout, p.stderr)

    def stream(self, script: str, args: list[str], *, stdin: str, what: str):
        from taobank.run import pipe

        return pipe(self.shell + ["-c", script, "tao", *args], stdin=stdin, what=what)


class Counting:
    def __init__(self) -> None:
        self.files: list = []
        self.done = 0

    def start(self, files) -> None:
        self.files = files

    def advance(self, done: int) -> None:
        self.done = done


CKPTS = [f"train/model_epoch_00{e}_step_000{e + 1}0.pth" for e in range(3)]


@pytest.fixture()
def job(tmp_path) -> Path:
    """A results folder as the fake trainer leaves it, plus the awkward names a training may write."""
    folder = tmp_path / "results" / "job-1"
    subprocess.run(["sh", str(TRAINER), "--results", str(folder), "--epochs", "3", "--action", "train"], check=True,
                   capture_output=True, env={**os.environ, "FAKE_TAO_NOW": "03 07 2025 09 05 03"})
    (folder / "a b.txt").write_text("space\n")
    (folder / "line\nbreak.pth").write_text("x")
    (folder / "-rf").write_text("dash\n")
    (tmp_path / "secret").write_text("outside\n")
    (folder / "escape").symlink_to(tmp_path / "secret")
    (folder / "up").symlink_to(tmp_path)
    return folder


@pytest.mark.parametrize("shell", SHELLS)
def test_listing_is_every_regular_file_with_status_files(shell, job):
    got = results_sh.list_folder(Local(shell), str(job), status=True)
    assert [f.path for f in got.files] == ["-rf", "a b.txt", *CKPTS, "train/status.json"]  # no link, no newline name
    assert got.links == {"train/dino_model_latest.pth": CKPTS[-1]}  # TAO's latest link, read as a link
    assert all(f.size == (job / f.path).stat().st_size and int(f.mtime) == int((job / f.path).stat().st_mtime)
               for f in got.files)
    assert list(got.status_files) == ["train/status.json"]
    missing = results_sh.list_folder(Local(shell), str(job) + "-nope", status=False)
    assert missing.exists is False


@pytest.mark.parametrize("shell", SHELLS)
def test_many_folders_in_one_command_list_as_each_one_alone(shell, job, tmp_path):
    """A sweep's ``best``: every trial's folder in ONE command, each parsed as its own listing would be."""
    other = tmp_path / "results" / "job-2"
    subprocess.run(["sh", str(TRAINER), "--results", str(other), "--epochs", "2", "--action", "train"], check=True,
                   capture_output=True)
    (tmp_path / "locked").mkdir(mode=0)
    calls = []

    class Once(Local):
        def text(self, script, args, *, what):
            calls.append(args)
            return super().text(script, args, what=what)

    folders = [str(job), str(job) + "-nope", str(other), str(tmp_path / "locked")]
    got = results_sh.list_folders(Once(shell), folders, status=True)
    assert len(calls) == 1
    for folder, listing in zip(folders[:3], got[:3]):
        alone = results_sh.list_folder(Local(shell), folder, status=True)
        assert (listing.files, listing.status_files, listing.exists) == (alone.files, alone.status_files, alone.exists)
    assert got[1].exists is False and [f.path for f in got[2].files][-1] == "train/status.json"
    if os.geteuid() != 0:  # root reads a mode-0 folder anyway
        assert isinstance(got[3], TaoError) and "exit 3" in str(got[3])
    with pytest.raises(TaoError, match="newline"):
        results_sh.list_folders(Local(shell), ["/a\nb"], status=False)


@pytest.mark.parametrize("shell", SHELLS)
def test_fetch_streams_exactly_the_listed_files_with_their_sha256(shell, job, tmp_path):
    into = tmp_path / "into"
    into.mkdir()
    seen = Counting()
    facts = results_sh.fetch_files(Local(shell), str(job), [], into, seen)
    assert {f.path for f in facts} == {"-rf", "a b.txt", *CKPTS, "train/status.json"}
    for f in facts:
        data = (into / f.path).read_bytes()
        assert data == (job / f.path).read_bytes() and hashlib.sha256(data).hexdigest() == f.sha256
    assert seen.done == sum(f.size for f in facts) and seen.files == facts
    assert not (into / "escape").exists() and not (into / "up").exists()


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("path,why", [("escape", "is a link or leads out"), ("up/secret", "is a link or leads out"),
                                      ("nope.pth", "is not in the results folder")])
def test_a_path_through_a_link_or_absent_is_refused_on_the_cluster(shell, job, tmp_path, path, why):
    with pytest.raises(TaoError, match=why):
        results_sh.fetch_files(Local(shell), str(job), [path], tmp_path, Counting())


@pytest.mark.parametrize("shell", SHELLS)
def test_the_tar_script_refuses_names_that_are_not_dot_slash_paths(shell, job):
    for names in ("/etc/passwd\n", "./a/../../../etc/passwd\n", "-rf\n", "\n"):
        res = subprocess.run(shell + ["-c", results_sh.TAR_FILES, "tao", str(job)], input=names.encode(),
                             capture_output=True, timeout=60)
        assert res.returncode in (4, 5) and res.stdout == b"", names


@pytest.mark.parametrize("shell", SHELLS)
def test_remove_deletes_only_a_directory_named_as_asked(shell, job, tmp_path):
    sh = Local(shell)
    with pytest.raises(TaoError, match="is not named other"):
        results_sh.remove_folder(sh, str(job), "other")
    (tmp_path / "link-1").symlink_to(job)
    with pytest.raises(TaoError, match="is not a directory"):
        results_sh.remove_folder(sh, str(tmp_path / "link-1"), "link-1")
    with pytest.raises(TaoError, match="not an absolute folder"):
        results_sh.remove_folder(sh, "job-1", "job-1")
    assert job.is_dir()
    assert results_sh.remove_folder(sh, str(job), "job-1") == f"deleted {job}"
    assert not job.exists() and (tmp_path / "secret").read_text() == "outside\n"  # a link's target is kept
    assert "nothing to do" in results_sh.remove_folder(sh, str(job), "job-1")


def test_extract_refuses_a_stream_that_is_not_a_tar(tmp_path):
    import io

    with pytest.raises(TaoError, match="not a complete tar stream"):
        extract(io.BytesIO(b"not a tar at all" * 100), tmp_path, {"x": 1}, lambda n: None)


@pytest.mark.parametrize("listed", [3, 0])
def test_extract_stops_at_the_listed_size_before_writing(tmp_path, listed):
    """Issue 38 item 12: a member larger than the cluster listed is refused before a byte lands on disk."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("./model.pth")
        info.size = 1 << 20
        tar.addfile(info, io.BytesIO(b"x" * (1 << 20)))
    buf.seek(0)
    with pytest.raises(TaoError, match=f"the cluster listed {listed}"):
        extract(buf, tmp_path, {"model.pth": listed}, lambda n: None)
    assert not (tmp_path / "model.pth").exists() or (tmp_path / "model.pth").stat().st_size <= listed


def test_write_file_never_writes_past_the_limit(tmp_path):
    """The S3 path (``aws s3 cp`` to stdout) has no tar header: the copy itself stops at the listed size."""
    import io

    from taobank.tarstream import write_file

    with pytest.raises(TaoError, match="more bytes arrived than the 5"):
        write_file(io.BytesIO(b"y" * 100000), tmp_path, "a.bin", lambda n: None, 0, limit=5)
    assert (tmp_path / "a.bin").stat().st_size <= 5
    assert write_file(io.BytesIO(b"12345"), tmp_path, "b.bin", lambda n: None, 0, limit=5) == 5


def test_an_unreadable_subfolder_is_a_note_not_a_failed_fetch(job, tmp_path, monkeypatch):
    """Issue 38 item 6: find's exit 1 on one unreadable subfolder failed the whole fetch. (As root no folder is
    unreadable, so ``find`` is shimmed to do its work and then report a refused folder, as it does; busybox sh
    runs its own find applet, not a shim, so /bin/sh runs the same script here.)"""
    shell = ["/bin/sh"]
    shim = tmp_path / "shim"
    shim.mkdir()
    real = shutil.which("find")
    (shim / "find").write_text(f'#!/bin/sh\n"{real}" "$@"\necho "find: ./locked: Permission denied" >&2\nexit 1\n')
    (shim / "find").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    notes: list[str] = []
    into = tmp_path / "into"
    into.mkdir()
    transfer = Counting()
    transfer.note = notes.append  # type: ignore[attr-defined]
    got = results_sh.fetch_files(Local(shell), str(job), ["train/status.json"], into, transfer)
    assert [f.path for f in got] == ["train/status.json"] and (into / "train" / "status.json").is_file()
    assert len(notes) == 1 and "could not be read" in notes[0] and "\n" not in notes[0]
