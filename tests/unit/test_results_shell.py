"""The results scripts (taobank.results_shell) run for real with /bin/sh and busybox sh, as the login node and the
reader pod run them: listing, the files' facts, the one-read stream verified block by block, the guarded rm."""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from taobank.campaign import results_fetch
from taobank import results_shell
from taobank.errors import TaoError
from taobank.run import Result

TRAINER = Path(__file__).resolve().parents[2] / "testclusters" / "fake_tao_train.sh"
SHELLS = [pytest.param(["/bin/sh"], id="sh"),
          pytest.param(["busybox", "sh"], id="busybox",
                       marks=pytest.mark.skipif(not shutil.which("busybox"), reason="busybox is not installed"))]


class Local:
    """A results_shell.Shell that runs the scripts here (what the pod and the login node do there)."""

    def __init__(self, shell: list[str]) -> None:
        self.shell = shell

    def text(self, script: str, args: list[str], *, what: str) -> Result:
        p = subprocess.run(self.shell + ["-c", script, "tao", *args], capture_output=True, text=True, timeout=60)
        return Result([], p.returncode, p.stdout, p.stderr)

    def stream(self, script: str, args: list[str], *, stdin: str, what: str):
        from taobank.run import pipe

        return pipe(self.shell + ["-c", script, "tao", *args], stdin=stdin, what=what)


def transfer(dest: Path, notes: list[str] | None = None, *, links: bool = True) -> results_fetch._Transfer:
    """The core's side of a fetch into ``dest`` (its staging folder inside), counting bytes."""
    staging = dest / ".staging"
    staging.mkdir(parents=True, exist_ok=True)
    meter = results_fetch.Meter(None)
    return results_fetch._Transfer(dest, False, meter, None if notes is None else notes.append, staging, links=links)


def shim(tmp_path: Path, name: str, body: str) -> str:
    """A PATH that runs ``body`` as ``name`` (the real tool is $REAL), for /bin/sh (busybox prefers applets)."""
    folder = tmp_path / f"shim-{name}"
    folder.mkdir()
    (folder / name).write_text(f'#!/bin/sh\nREAL="{shutil.which(name) or "/nonexistent"}"\n{body}\n')
    (folder / name).chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


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
    got = results_shell.list_folder(Local(shell), str(job), status=True)
    assert [f.path for f in got.files] == ["-rf", "a b.txt", *CKPTS, "train/status.json"]  # no link, no newline name
    assert got.links == {"train/dino_model_latest.pth": CKPTS[-1]}  # TAO's latest link, read as a link
    assert all(f.size == (job / f.path).stat().st_size and int(f.mtime) == int((job / f.path).stat().st_mtime)
               for f in got.files)
    assert list(got.status_files) == ["train/status.json"]
    missing = results_shell.list_folder(Local(shell), str(job) + "-nope", status=False)
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
    got = results_shell.list_folders(Once(shell), folders, status=True)
    assert len(calls) == 1
    for folder, listing in zip(folders[:3], got[:3]):
        alone = results_shell.list_folder(Local(shell), folder, status=True)
        assert (listing.files, listing.status_files, listing.exists) == (alone.files, alone.status_files, alone.exists)
    assert got[1].exists is False and [f.path for f in got[2].files][-1] == "train/status.json"
    if os.geteuid() != 0:  # root reads a mode-0 folder anyway
        assert isinstance(got[3], TaoError) and "exit 3" in str(got[3])
    with pytest.raises(TaoError, match="newline"):
        results_shell.list_folders(Local(shell), ["/a\nb"], status=False)


def without(tmp_path: Path, *tools: str) -> str:
    """A PATH on which each of ``tools`` fails as a missing program does."""
    path = os.environ["PATH"]
    for tool in tools:
        path = shim(tmp_path, tool, "exit 127").rsplit(":" + os.environ["PATH"], 1)[0] + ":" + path
    return path


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("sender", ["python3", "cksum", "md5sum"])
def test_fetch_sends_each_listed_file_once_verified_block_by_block(shell, job, tmp_path, monkeypatch, sender):
    """One SEND_FILES command; each block's digest (python3's CRC-32 where the cluster has python3, else cksum,
    else md5sum) is checked here; names with spaces and a leading dash arrive, links and the newline name do not
    (the latter named in a note)."""
    monkeypatch.setattr(results_shell, "BLOCK", results_shell.DD_BLOCK)  # several blocks: a 2.5 MiB checkpoint
    (job / "train" / "big.pth").write_bytes(os.urandom((5 << 20) // 2))
    if sender != "python3":
        monkeypatch.setenv("PATH", without(tmp_path, *{"cksum": ["python3"], "md5sum": ["python3", "cksum"]}[sender]))
    cksum = sender == "cksum"
    into = tmp_path / "into"
    notes: list[str] = []
    seen = transfer(into, notes)
    calls = []

    class Once(Local):
        def stream(self, script, args, *, stdin, what):
            calls.append(script)
            return super().stream(script, args, stdin=stdin, what=what)

    facts = results_shell.fetch_files(Once(shell), str(job), [], into, seen)
    assert {f.path for f in facts} == {"-rf", "a b.txt", *CKPTS, "train/big.pth", "train/status.json"}
    assert calls == [results_shell.SEND_FILES]
    for f in facts:
        assert (into / f.path).read_bytes() == (job / f.path).read_bytes()
        if sender == "python3":
            assert seen.fetched[f.path].verified == results_shell.VERIFIED["crc32"]
            continue
        alg = "crc" if cksum or shell == ["busybox", "sh"] and shutil.which("cksum") is None else "md5"
        assert seen.fetched[f.path].verified in (results_shell.VERIFIED["crc"], results_shell.VERIFIED["md5"])
        assert cksum is False or seen.fetched[f.path].verified == results_shell.VERIFIED[alg]
    assert seen.meter.done == sum(f.size for f in facts)
    assert not (into / "escape").exists() and not (into / "up").exists()
    assert len(notes) == 1 and "line?break" in notes[0] and "not fetched" in notes[0]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("path,why", [("escape", "is a link or leads out"), ("up/secret", "is a link or leads out"),
                                      ("nope.pth", "is not in the results folder")])
def test_a_path_through_a_link_or_absent_is_refused_on_the_cluster(shell, job, tmp_path, path, why):
    with pytest.raises(TaoError, match=why):
        results_shell.fetch_files(Local(shell), str(job), [path], tmp_path, transfer(tmp_path))


LATEST = "train/dino_model_latest.pth"  # the fake trainer's link to its last checkpoint, as TAO's


@pytest.mark.parametrize("shell", SHELLS)
def test_taos_latest_link_comes_back_as_a_relative_link_to_its_fetched_checkpoint(shell, job, tmp_path):
    into, notes = tmp_path / "into", []
    seen = transfer(into, notes)
    facts = results_shell.fetch_files(Local(shell), str(job), [], into, seen)
    assert LATEST not in {f.path for f in facts}  # no bytes of it move: it is the checkpoint's second name
    assert seen.cluster_links == {LATEST: CKPTS[-1]}  # "escape" and "up" lead out of the folder: not links
    made = results_fetch._make_links(into, seen.cluster_links, seen.fetched, False, notes.append)
    link = into / LATEST
    assert os.readlink(link) == Path(CKPTS[-1]).name  # relative, as TAO's: the fetched folder can move
    assert link.read_bytes() == (job / CKPTS[-1]).read_bytes()
    assert [(m.file.path, m.link_to, m.local) for m in made] == [(LATEST, CKPTS[-1], str(link))]
    assert made[0].to_dict()["link_to"] == CKPTS[-1] and "->" in made[0].line()
    again = results_fetch._make_links(into, seen.cluster_links, seen.fetched, False, notes.append)
    assert [m.link_to for m in again] == [CKPTS[-1]] and notes == [n for n in notes if "line?break" in n]

    # named alone, the link brings its target
    one = tmp_path / "one"
    seen = transfer(one)
    facts = results_shell.fetch_files(Local(shell), str(job), [LATEST], one, seen)
    assert [f.path for f in facts] == [CKPTS[-1]] and seen.cluster_links == {LATEST: CKPTS[-1]}

    # a link named that leads to a folder, or out of the results folder: refused as before
    (job / "to-train").symlink_to("train")
    for path in ("to-train", "escape"):
        with pytest.raises(TaoError, match="is a link or leads out"):
            results_shell.fetch_files(Local(shell), str(job), [path], tmp_path / "x", transfer(tmp_path / "x"))


def test_a_link_is_made_only_over_nothing_or_with_force_and_only_to_a_fetched_file(job, tmp_path):
    into, notes = tmp_path / "into", []
    seen = transfer(into, notes)
    results_shell.fetch_files(Local(["/bin/sh"]), str(job), ["train"], into, seen)
    links = {**seen.cluster_links, "train/other_latest.pth": "not-fetched.pth"}
    (into / LATEST).write_text("mine\n")  # a file of the user's where the link goes
    made = results_fetch._make_links(into, links, seen.fetched, False, notes.append)
    assert made == [] and (into / LATEST).read_text() == "mine\n"
    assert len(notes) == 2 and "exists (pass --force" in notes[0] and "not-fetched.pth, which was not fetched" in notes[1]
    assert not (into / "train" / "other_latest.pth").exists()
    made = results_fetch._make_links(into, links, seen.fetched, True, notes.append)
    assert [m.file.path for m in made] == [LATEST] and os.readlink(into / LATEST) == Path(CKPTS[-1]).name
    (into / LATEST).unlink()
    (into / LATEST).mkdir()  # a folder is never replaced, --force or not
    notes.clear()
    assert results_fetch._make_links(into, seen.cluster_links, seen.fetched, True, notes.append) == []
    assert "is a folder" in notes[0] and (into / LATEST).is_dir()


#: SEND_FILES' third argument: "" lets it hand over to python3 (here: present), "sh" keeps the shell.
MODES = [pytest.param("", id="python3"), pytest.param("sh", id="sh")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shell", SHELLS)
def test_the_send_script_refuses_names_and_numbers_it_was_not_meant_to_get(shell, job, mode):
    for line in ("0 1 1 /etc/passwd\n", "0 1 1 ./a/../../../etc/passwd\n", "0 1 1 -rf\n", "x 1 1 ./-rf\n",
                 "0 $(id) 1 ./-rf\n"):
        res = subprocess.run(shell + ["-c", results_shell.SEND_FILES, "tao", str(job), str(results_shell.BLOCK), mode],
                             input=line.encode(), capture_output=True, timeout=60)
        assert res.returncode == 4 and res.stdout == b"", line


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shell", SHELLS)
def test_the_send_script_resumes_only_a_file_that_did_not_change(shell, job, mode):
    f = job / "train" / "status.json"
    st = f.stat()
    ask = f"{results_shell.DD_BLOCK} {st.st_size} {int(st.st_mtime)} ./train/status.json\n"
    res = subprocess.run(shell + ["-c", results_shell.SEND_FILES, "tao", str(job), str(results_shell.BLOCK), mode],
                         input=ask.encode(), capture_output=True, timeout=60)
    assert res.stdout.startswith(b"@@file ") and res.stdout.split(b" ")[2] == b"0"  # past the end: from 0
    big = job / "big.bin"
    big.write_bytes(b"z" * (3 * results_shell.DD_BLOCK))
    st = big.stat()
    for when, start in ((int(st.st_mtime), results_shell.DD_BLOCK), (int(st.st_mtime) - 5, 0)):
        ask = f"{results_shell.DD_BLOCK} {st.st_size} {when} ./big.bin\n"
        res = subprocess.run(shell + ["-c", results_shell.SEND_FILES, "tao", str(job), str(results_shell.BLOCK), mode],
                             input=ask.encode(), capture_output=True, timeout=60)
        head, _, rest = res.stdout.partition(b"\n")
        assert head.split(b" ")[1] == (b"crc32" if mode == "" else b"crc")
        assert head.split(b" ")[2] == str(start).encode()
        assert len(rest) > st.st_size - start and rest[st.st_size - start:].startswith(b"@@sum ")


APPEND_ON_OPEN = """
import os
_fdopen = os.fdopen
def fdopen(fd, *a, **k):
    name = os.readlink(f"/proc/self/fd/{fd}")
    if name.endswith("status.json"):
        with open(name, "ab") as fh:
            fh.write(b"more\\n")
    return _fdopen(fd, *a, **k)
os.fdopen = fdopen
"""


@pytest.mark.parametrize("sender", ["python3", "sh"])
def test_a_file_rewritten_while_it_is_read_is_named_and_not_kept(job, tmp_path, monkeypatch, sender):
    """A training appending to a checkpoint while it is sent (``dd`` shimmed, or python3's open wrapped, to
    append once the file is opened)."""
    if sender == "sh":
        monkeypatch.setenv("PATH", shim(tmp_path, "dd", '"$REAL" "$@"; for a do case $a in if=*status.json) '
                                                        'echo more >> "${a#if=}";; esac; done'))
        monkeypatch.setenv("PATH", without(tmp_path, "python3"))
    else:
        (tmp_path / "site").mkdir()
        (tmp_path / "site" / "sitecustomize.py").write_text(APPEND_ON_OPEN)
        monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    into = tmp_path / "into"
    seen = transfer(into)
    with pytest.raises(TaoError, match="train/status.json changed while being fetched"):
        results_shell.fetch_files(Local(["/bin/sh"]), str(job), ["train/status.json", "a b.txt"], into, seen)
    assert not list(into.glob("**/status.json"))  # neither under its name nor as a temp copy
    assert (into / "a b.txt").read_text() == "space\n"


@pytest.mark.parametrize("shell", SHELLS)
def test_remove_deletes_only_a_directory_named_as_asked(shell, job, tmp_path):
    sh = Local(shell)
    with pytest.raises(TaoError, match="is not named other"):
        results_shell.remove_folder(sh, str(job), "other")
    (tmp_path / "link-1").symlink_to(job)
    with pytest.raises(TaoError, match="is not a directory"):
        results_shell.remove_folder(sh, str(tmp_path / "link-1"), "link-1")
    with pytest.raises(TaoError, match="not an absolute folder"):
        results_shell.remove_folder(sh, "job-1", "job-1")
    assert job.is_dir()
    assert results_shell.remove_folder(sh, str(job), "job-1") == f"deleted {job}"
    assert not job.exists() and (tmp_path / "secret").read_text() == "outside\n"  # a link's target is kept
    assert "nothing to do" in results_shell.remove_folder(sh, str(job), "job-1")


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
    got = results_shell.fetch_files(Local(shell), str(job), ["train/status.json"], into, transfer(into, notes))
    assert [f.path for f in got] == ["train/status.json"] and (into / "train" / "status.json").is_file()
    assert len(notes) == 1 and "could not be read" in notes[0] and "\n" not in notes[0]


# ------------------------------------------------------------------ Docker: a local copy, the same refusals
def docker_fetch(job: Path, dest: Path, paths: list[str], *, ended: bool = False,
                 links: bool = True) -> results_fetch._Transfer:
    from types import SimpleNamespace

    from taobank.contract import ResultsLocation
    from taobank.platforms.docker import results_access

    seen = transfer(dest, links=links)
    rec = SimpleNamespace(id=job.name, terminal=ended)
    results_access.fetch_results(rec, ResultsLocation(str(job), True), paths, dest, seen)
    return seen


def test_docker_hard_links_a_finished_jobs_big_files_and_copies_the_rest(job, tmp_path, monkeypatch):
    """A finished job's checkpoint is linked, not copied (no byte moves; the job's file keeps its mode and time);
    small files, a running job's files and a link the filesystem refuses are copied."""
    from taobank.platforms.docker import results_access

    big = job / CKPTS[0]
    big.write_bytes(b"x" * 4096)
    big.chmod(0o640)
    monkeypatch.setattr(results_access, "LINK_MIN", 4096)
    seen = docker_fetch(job, tmp_path / "into", [], ended=True)
    got = tmp_path / "into" / CKPTS[0]
    assert got.stat().st_ino == big.stat().st_ino and seen.fetched[CKPTS[0]].verified.startswith("a hard link")
    assert (big.stat().st_mode & 0o777) == 0o640 and not (tmp_path / "into" / ".staging" / CKPTS[0]).exists()
    assert seen.fetched[CKPTS[0]].moved == 0  # nothing was copied

    copied = docker_fetch(job, tmp_path / "copied", [CKPTS[0]], ended=True, links=False)  # fetch --copy
    assert (tmp_path / "copied" / CKPTS[0]).stat().st_ino != big.stat().st_ino
    assert copied.fetched[CKPTS[0]].verified == "size+mtime (a local copy)"
    small = tmp_path / "into" / "train" / "status.json"
    assert small.stat().st_ino != (job / "train" / "status.json").stat().st_ino
    assert seen.fetched["train/status.json"].verified == "size+mtime (a local copy)"

    running = docker_fetch(job, tmp_path / "running", [CKPTS[0]])  # a job still running: copied
    assert (tmp_path / "running" / CKPTS[0]).stat().st_ino != big.stat().st_ino
    assert running.fetched[CKPTS[0]].verified == "size+mtime (a local copy)"

    def refused(*a, **k):
        raise OSError(18, "Invalid cross-device link")

    real_open = results_access.open_inside

    def swapped(folder, rel):  # the file replaced by another one after it was opened: never linked
        fd = real_open(folder, rel)
        if rel == CKPTS[0]:
            (job / "other.bin").write_bytes(b"y" * 4096)
            os.replace(job / "other.bin", job / rel)
        return fd

    monkeypatch.setattr(results_access, "open_inside", swapped)
    raced = docker_fetch(job, tmp_path / "raced", [CKPTS[0]], ended=True)
    assert (tmp_path / "raced" / CKPTS[0]).read_bytes() == b"x" * 4096  # the opened file's bytes, copied
    assert raced.fetched[CKPTS[0]].verified == "size+mtime (a local copy)"
    monkeypatch.setattr(results_access, "open_inside", real_open)
    big = job / CKPTS[0]

    monkeypatch.setattr(results_access.os, "link", refused)  # another filesystem: copied
    other = docker_fetch(job, tmp_path / "other", [CKPTS[0]], ended=True)
    assert (tmp_path / "other" / CKPTS[0]).read_bytes() == big.read_bytes()
    assert (tmp_path / "other" / CKPTS[0]).stat().st_ino != big.stat().st_ino
    assert other.fetched[CKPTS[0]].verified == "size+mtime (a local copy)"


def test_docker_copies_each_file_locally_and_refuses_links(job, tmp_path):
    seen = docker_fetch(job, tmp_path / "into", [])
    assert {p: f.verified for p, f in seen.fetched.items()} == {
        p: "size+mtime (a local copy)" for p in ["-rf", "a b.txt", *CKPTS, "train/status.json"]}
    assert all((tmp_path / "into" / p).read_bytes() == (job / p).read_bytes() for p in seen.fetched)
    with pytest.raises(TaoError, match="is a link or leads out"):
        docker_fetch(job, tmp_path / "other", ["up/secret"])


def test_docker_never_follows_a_link_swapped_in_after_the_listing(job, tmp_path):
    """A training replacing a folder of its results with a link out between the listing and the copy."""
    from taobank.platforms.docker.results_access import open_inside

    os.close(open_inside(str(job), "train/status.json"))
    (job / "train").rename(job / "train-real")
    (job / "train").symlink_to(job / "train-real")
    with pytest.raises(OSError):
        open_inside(str(job), "train/status.json")
    (job / "train").unlink()
    (job / "train").symlink_to(tmp_path)
    with pytest.raises(OSError):
        open_inside(str(job), "train/status.json")


def test_docker_names_a_file_rewritten_during_the_copy_and_keeps_nothing_of_it(job, tmp_path, monkeypatch):
    from taobank.platforms.docker import results_access

    real = results_access._copy

    def appending(src, w, offset, size, done, seen):
        out = real(src, w, offset, size, done, seen)
        with open(job / "train" / "status.json", "a") as fh:
            fh.write("more\n")
        return out

    monkeypatch.setattr(results_access, "_copy", appending)
    with pytest.raises(TaoError, match="train/status.json changed while being fetched"):
        docker_fetch(job, tmp_path / "into", ["train/status.json"])
    assert not list((tmp_path / "into").glob("**/status.json"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shell", SHELLS)
def test_the_send_script_refuses_a_folder_swapped_for_a_link_after_the_listing(shell, job, tmp_path, mode):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "status.json").write_text("not the job's\n")
    st = (tmp_path / "outside" / "status.json").stat()
    (job / "train").rename(job / "train-real")
    (job / "train").symlink_to(tmp_path / "outside")
    ask = f"0 {st.st_size} {int(st.st_mtime)} ./train/status.json\n"
    res = subprocess.run(shell + ["-c", results_shell.SEND_FILES, "tao", str(job), str(results_shell.BLOCK), mode],
                         input=ask.encode(), capture_output=True, timeout=60)
    assert res.stdout == b"@@outside ./train/status.json\n"
    with pytest.raises(TaoError, match="now leads out of the results folder"):
        results_shell.receive(io.BytesIO(res.stdout), str(job), [results_shell.ResultFile("train/status.json", 1, 1.0)],
                           transfer(tmp_path / "into"))


def test_a_staged_file_is_made_new_so_a_file_sharing_its_name_is_never_written(tmp_path):
    """The staged name may be a hard link left by a killed fetch: starting over makes a new file (the other one
    intact), and resuming into a file another name shares is refused, its partial copy dropped."""
    from taobank.contract import ResultFile

    dest = tmp_path / "into"
    seen = transfer(dest)
    f = ResultFile("m.pth", 8, 1.0)
    job_file = tmp_path / "job.pth"
    job_file.write_bytes(b"JOBBYTES")
    os.link(job_file, dest / ".staging" / "m.pth")
    with seen.part(f, 0) as w:
        w.write(b"new")
    assert job_file.read_bytes() == b"JOBBYTES"
    (dest / ".staging" / "m.pth").unlink()
    os.link(job_file, dest / ".staging" / "m.pth")
    with pytest.raises(TaoError, match="shared its data with another file"):
        with seen.part(f, 4):
            pass
    assert job_file.read_bytes() == b"JOBBYTES" and not (dest / ".staging" / "m.pth").exists()


# ------------------------------------------------------------------ the byte path: copied once, every byte checked
def every_byte(size: int) -> bytes:
    """``size`` bytes holding every byte value, in an order no block repeats (a shifted copy would be caught)."""
    pattern = bytes(range(256)) + bytes(range(255, -1, -1))
    return (pattern * (size // len(pattern) + 1))[:size] if size else b""


#: In SEND_PY's process: os.sendfile sends 1000 bytes once, then fails as on a stdout it cannot send to.
SENDFILE_REFUSED = """
import errno, os
_calls = []
_real = os.sendfile
def sendfile(out, fd, off, n):
    _calls.append(1)
    if len(_calls) == 1:
        return _real(out, fd, off, min(n, 1000))
    raise OSError(errno.EINVAL, "Invalid argument")
os.sendfile = sendfile
"""

#: In SEND_PY's process: the file is rewritten (same size) after its first chunk was read for the digest, before
#: the kernel sends it: the bytes sent are not the bytes digested.
REWRITE_BEFORE_SEND = """
import os
_real = os.sendfile
def sendfile(out, fd, off, n):
    name = os.readlink("/proc/self/fd/%d" % fd)
    if name.endswith("big.pth") and not os.environ.get("TAO_REWROTE"):
        os.environ["TAO_REWROTE"] = "1"
        with open(name, "r+b") as fh:
            fh.seek(off)
            fh.write(b"X" * 16)
    return _real(out, fd, off, n)
os.sendfile = sendfile
"""


def site(tmp_path: Path, monkeypatch, code: str) -> None:
    """``code`` run first in every python3 started from here on (the sender on the cluster)."""
    (tmp_path / "site").mkdir(exist_ok=True)
    (tmp_path / "site" / "sitecustomize.py").write_text(code)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))


@pytest.mark.parametrize("sender", ["python3", "python3-write", "cksum", "md5sum"])
def test_every_byte_value_arrives_whole_in_blocks_of_any_length(job, tmp_path, monkeypatch, sender):
    """Files of 0 bytes, exactly one block, and blocks plus a tail: each byte value round-trips through each
    sender (python3 with the kernel sending, python3 writing from its buffer where the kernel cannot, the shell
    with cksum or md5sum) and the receiver's one reused buffer, whose reads straddle block ends."""
    monkeypatch.setattr(results_shell, "BLOCK", results_shell.DD_BLOCK)
    monkeypatch.setattr(results_shell, "READ_CHUNK", 300_001)  # reads that do not line up with blocks or files
    sizes = {"empty.bin": 0, "one.bin": results_shell.DD_BLOCK, "tail.bin": 2 * results_shell.DD_BLOCK + 4097,
             "small.bin": 7}
    for name, size in sizes.items():
        (job / name).write_bytes(every_byte(size))
    if sender == "python3-write":
        site(tmp_path, monkeypatch, SENDFILE_REFUSED)
    elif sender != "python3":
        monkeypatch.setenv("PATH", without(tmp_path, *{"cksum": ["python3"], "md5sum": ["python3", "cksum"]}[sender]))
    into = tmp_path / "into"
    seen = transfer(into)
    results_shell.fetch_files(Local(["/bin/sh"]), str(job), list(sizes), into, seen)
    for name, size in sizes.items():
        assert (into / name).read_bytes() == every_byte(size), name
    alg = {"python3": "crc32", "python3-write": "crc32", "cksum": "crc", "md5sum": "md5"}[sender]
    assert {seen.fetched[n].verified for n in sizes if sizes[n]} == {results_shell.VERIFIED[alg]}
    assert seen.meter.done == sum(sizes.values())


def stream_of(job: Path, names: list[str], mode: str = "") -> bytes:
    """SEND_FILES' whole answer for ``names`` (each from byte 0)."""
    ask = "".join(f"0 {(job / n).stat().st_size} {int((job / n).stat().st_mtime)} ./{n}\n" for n in names)
    res = subprocess.run(["/bin/sh", "-c", results_shell.SEND_FILES, "tao", str(job), str(results_shell.DD_BLOCK), mode],
                         input=ask.encode(), capture_output=True, timeout=60, check=True)
    return res.stdout


def data_at(stream: bytes, at: int) -> int:
    """Where byte ``at`` of the (one) file's content is in a SEND_FILES stream of blocks of DD_BLOCK bytes."""
    pos = stream.index(b"\n") + 1
    while at >= results_shell.DD_BLOCK:
        pos = stream.index(b"\n", pos + results_shell.DD_BLOCK) + 1  # past the block and its @@sum line
        at -= results_shell.DD_BLOCK
    return pos + at


@pytest.mark.parametrize("mode", MODES)
def test_one_changed_byte_anywhere_in_a_block_is_refused_and_nothing_kept(job, tmp_path, monkeypatch, mode):
    """The stream damaged after it left the cluster: a byte flipped at the start, middle or end of a block
    (every block is checked, also after the first), or the stream cut short."""
    from taobank.contract import ResultFile

    monkeypatch.setattr(results_shell, "BLOCK", results_shell.DD_BLOCK)
    size = 2 * results_shell.DD_BLOCK + 10
    (job / "big.pth").write_bytes(every_byte(size))
    st = (job / "big.pth").stat()
    f = ResultFile("big.pth", size, float(int(st.st_mtime)))
    good = stream_of(job, ["big.pth"], mode)
    assert good[data_at(good, size - 1) + 1:].startswith(b"@@sum ")
    for at in (0, results_shell.DD_BLOCK // 2, results_shell.DD_BLOCK - 1, results_shell.DD_BLOCK + 5, size - 1):
        bad = bytearray(good)
        bad[data_at(good, at)] ^= 0x01
        into = tmp_path / f"into-{at}"
        seen = transfer(into)
        with pytest.raises(TaoError, match="differ from the bytes read on the cluster"):
            results_shell.receive(io.BytesIO(bytes(bad)), str(job), [f], seen)
        assert not [p for p in into.rglob("big.pth")], at  # neither the final name nor a staged copy
    into = tmp_path / "into-cut"
    seen = transfer(into)
    with pytest.raises(TaoError, match="broke off"):
        results_shell.receive(io.BytesIO(good[:data_at(good, results_shell.DD_BLOCK + 100)]), str(job), [f], seen)
    results_shell.receive(io.BytesIO(good), str(job), [f], transfer(tmp_path / "into-good"))
    assert (tmp_path / "into-good" / "big.pth").read_bytes() == every_byte(size)


def test_a_file_rewritten_between_its_digest_and_its_send_is_refused(job, tmp_path, monkeypatch):
    """The kernel sends the bytes again from the file: a rewrite in between gives bytes the digest does not match,
    and nothing of the file is kept."""
    monkeypatch.setattr(results_shell, "BLOCK", results_shell.DD_BLOCK)
    (job / "big.pth").write_bytes(every_byte(results_shell.DD_BLOCK + 10))
    site(tmp_path, monkeypatch, REWRITE_BEFORE_SEND)
    into = tmp_path / "into"
    with pytest.raises(TaoError, match="big.pth: the bytes received differ"):
        results_shell.fetch_files(Local(["/bin/sh"]), str(job), ["big.pth"], into, transfer(into))
    assert not list(into.rglob("big.pth"))


def test_a_fetch_cut_off_resumes_from_its_last_verified_block(job, tmp_path, monkeypatch):
    """The stream breaks inside the third block: the first two stay verified, the rerun asks from there and the
    file ends whole (the python3 sender starts at the offset asked)."""
    monkeypatch.setattr(results_shell, "BLOCK", results_shell.DD_BLOCK)
    size = 3 * results_shell.DD_BLOCK + 123
    (job / "big.pth").write_bytes(every_byte(size))
    into = tmp_path / "into"
    asked: list[str] = []

    class Cut(Local):
        def __init__(self, cut: int | None) -> None:
            super().__init__(["/bin/sh"])
            self.cut = cut

        @contextlib.contextmanager
        def stream(self, script, args, *, stdin, what):
            asked.append(stdin)
            with super().stream(script, args, stdin=stdin, what=what) as out:
                data = out.read()
            yield io.BytesIO(data if self.cut is None else data[:self.cut])

    monkeypatch.setattr(results_shell, "RESUMES", 0)  # the run gives up at the first cut; a rerun resumes
    with pytest.raises(TaoError, match="broke off"):
        results_shell.fetch_files(Cut(2 * results_shell.DD_BLOCK + 5000), str(job), ["big.pth"], into, transfer(into))
    assert not (into / "big.pth").exists()
    seen = transfer(into)
    results_shell.fetch_files(Cut(None), str(job), ["big.pth"], into, seen)
    assert asked[1].startswith(f"{2 * results_shell.DD_BLOCK} {size} ")
    assert (into / "big.pth").read_bytes() == every_byte(size)
    assert seen.fetched["big.pth"].moved == size - 2 * results_shell.DD_BLOCK


def test_a_fetch_cut_off_twice_resumes_in_the_same_run(job, tmp_path, monkeypatch):
    """A stream that ends early with no error is asked again from its last verified block, in the same run."""
    monkeypatch.setattr(results_shell, "BLOCK", results_shell.DD_BLOCK)
    size = 3 * results_shell.DD_BLOCK + 123
    (job / "big.pth").write_bytes(every_byte(size))
    into = tmp_path / "into"
    asked: list[str] = []

    class CutEach(Local):
        @contextlib.contextmanager
        def stream(self, script, args, *, stdin, what):
            asked.append(stdin)
            with super().stream(script, args, stdin=stdin, what=what) as out:
                data = out.read()
            yield io.BytesIO(data[:results_shell.DD_BLOCK + 5000])

    seen = transfer(into)
    results_shell.fetch_files(CutEach(["/bin/sh"]), str(job), ["big.pth"], into, seen)
    assert [a.split()[0] for a in asked] == ["0", str(results_shell.DD_BLOCK), str(2 * results_shell.DD_BLOCK)]
    assert (into / "big.pth").read_bytes() == every_byte(size)
    assert seen.fetched["big.pth"].moved == size


def test_the_receiver_widens_the_pipe_it_reads_and_leaves_anything_else_alone():
    """The pipe from ssh holds PIPE_BYTES, so the sender is not stopped 64 KiB ahead while a chunk is digested and
    written; bytes in memory (the tests' streams) are read as they are."""
    import fcntl

    r, w = os.pipe()
    with open(r, "rb") as out:
        results_shell._widen(out)
        assert fcntl.fcntl(out.fileno(), fcntl.F_GETPIPE_SZ) == results_shell.PIPE_BYTES
    os.close(w)
    results_shell._widen(io.BytesIO(b"x"))


def test_the_sender_waits_on_a_non_blocking_stdout_instead_of_breaking_off(job, tmp_path):
    """A container runtime may hand the sender a non-blocking stdout: a full pipe is EAGAIN, which must mean
    'wait', not a stream cut short (a fetch that 'broke off' under load)."""
    import fcntl
    import time

    big = job / "big.bin"
    big.write_bytes(os.urandom(3 << 20))
    st = big.stat()
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    proc = subprocess.Popen(["/bin/sh", "-c", results_shell.SEND_FILES, "tao", str(job), str(1 << 20), ""],
                            stdin=subprocess.PIPE, stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    assert proc.stdin is not None
    proc.stdin.write(f"0 {st.st_size} {int(st.st_mtime)} ./big.bin\n".encode())
    proc.stdin.close()
    got = bytearray()
    while True:
        time.sleep(0.002)  # a slow reader: the pipe fills and the sender meets EAGAIN
        chunk = os.read(r, 16 << 10)
        if not chunk:
            break
        got += chunk
    os.close(r)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else b""
    head, _, rest = bytes(got).partition(b"\n")
    assert head.startswith(b"@@file crc32 0 ")
    data, block = bytearray(), 1 << 20
    for _ in range(3):  # each block's bytes, then its digest line
        data += rest[:block]
        line, _, rest = rest[block:].partition(b"\n")
        assert line.startswith(b"@@sum ") and line.endswith(b" %d" % block), line
    assert bytes(data) == big.read_bytes() and rest.startswith(b"@@end ")
