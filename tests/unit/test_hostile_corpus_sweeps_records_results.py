"""An independent hostile corpus (issue 38): crafted sweeps, damaged records and results-verb arguments, each run
through the helpers as a user runs them. Every outcome is checked for the five failure kinds the review counted:
an escape (a raw control sequence on the terminal), a leak (a secret printed), a traceback, a hang (each case runs
under a deadline) and data loss (a results folder deleted that belongs to a live job, or a file replaced)."""
from __future__ import annotations

import itertools
import json
import os
import signal

import pytest

from taobank import fsio, records

NVAPI = "nvapi-" + "Qw7_" * 8
AWS = "wJalrXUtnFEMI/" + "K7MDENG/bPxRfiCYEXAMPLEKEY"
GHP = "ghp_" + "z9Y8" * 10
SECRETS = (NVAPI, AWS, GHP, "AKIA" + "QWERTYUIOP234567")
ESC = ("\x1b[2J", "\x1b]0;x\x07", "\x9b", "\x07", "\x1bP", "\u202e", "\r")


def _check(out, *, deadline_ok=True) -> None:
    text = out.out + out.err
    assert "Traceback" not in text, out
    assert not any(e in text for e in ESC if e != "\r") and "\r" not in out.err, out
    assert not any(s in text for s in SECRETS), out
    assert out.rc in (0, 1, 2), out
    assert all(not ln.startswith(("error", "Error")) or ln.startswith("error: ") for ln in out.err_lines), out


class Deadline:
    def __init__(self, seconds: int = 20) -> None:
        self.seconds = seconds

    def __enter__(self):
        def boom(*_):
            raise TimeoutError("hang")

        self.old = signal.signal(signal.SIGALRM, boom)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.old)


# ------------------------------------------------------------------ sweeps (flags and files), via --dry-run-free planning
SWEEP_VALUES = ["$(id)", "`id`", "a;b", "a b", "x'y", '"q"', "-rf", "--help", "=", "a=b", "", " ", "ü", "\x1b[2J",
                "1" * 300, "nan", "inf", "1e309", "0x10", "[1,2]", "{a: 1}", "*", "?", "~", "../..", "/etc/passwd",
                *SECRETS, "a\nb", "a\x00b", "\u202egnp"]
SWEEP_KEYS = ["-lr", "--x", "a..b", ".a", "a.", "1a", "a b", "a=b", "a;b", "\x1b[2Jk", "k" * 300, "ü", "a/b", "a.-b"]


@pytest.mark.parametrize("value", SWEEP_VALUES)
def test_sweep_flag_values(cli, fake, value):
    with Deadline():
        out = cli("tao_docker.py", "submit", "--image", "img:1", "--sweep", f"train.optim.lr=0.1,{value}", "--", "train")
    _check(out)
    assert not [c for c in fake.calls if c.argv[1:2] in (["run"], ["create"])], "nothing refused reaches the engine"


@pytest.mark.parametrize("key", SWEEP_KEYS)
def test_sweep_flag_keys(cli, fake, key):
    with Deadline():
        out = cli("tao_docker.py", "submit", "--image", "img:1", "--sweep", f"{key}=1,2", "--", "train")
    _check(out)
    assert out.rc == 2 and not fake.calls


SWEEP_FILES = [
    "grid: {a: [1, 2], a: [3]}", "grid: &x {a: [1]}\nrandom: *x", "grid: {a: [" + ",".join(["1"] * 3) + "]}",
    "grid: {" + ", ".join(f"k{i}: [1,2,3,4,5,6,7,8,9,10]" for i in range(12)) + "}",
    "random: {samples: 1000000000, seed: 1, params: {a: {low: 0, high: 1}}}",
    "random: {samples: -1, seed: 1, params: {a: {low: 0, high: 1}}}",
    "random: {samples: 3, seed: 1, params: {a: {low: .nan, high: 1}}}",
    "random: {samples: 3, seed: 1, params: {a: {low: 1e-5, high: 1e-300, log: true}}}",
    "random: {samples: 3, seed: 1, params: {a: {low: 0, high: .inf}}}",
    "random: {samples: 3, seed: true, params: {a: {low: 0, high: 1}}}",
    "random: {samples: 3, seed: 1, params: {a: {choices: []}}}",
    "trials: [" + ", ".join("{a: %d}" % i for i in range(20000)) + "]", "trials: {a: 1}", "trials: [1, 2]",
    "trials: [{a: 1}, {a: 1}]", "grid: []", "grid: {}", "[]", "null", "42", "'str'", "grid: {a: [[1]]}",
    "grid: {a: [{b: 1}]}", "grid: {a: [!!binary aGk=]}", "grid: {a: [2001-01-01]}", "grid: {a: [" + "[" * 100 + "]" * 100 + "]}",
    "grid: {a: ['\x1b[2J']}", f"grid: {{a: ['{NVAPI}']}}", f"trials: [{{a: '{AWS}'}}]", "grid: {a: [1]}\ntrials: [{a: 1}]",
    "grid: {'$(id)': [1]}", "grid: {a: ['a b']}", "\t\x00", "grid: {a: [1e-5, 1e-4]}", "\ufeffgrid: {a: [1]}",
]


@pytest.mark.parametrize("text", SWEEP_FILES, ids=range(len(SWEEP_FILES)))
def test_sweep_files(cli, fake, tmp_path, text):
    f = tmp_path / "s.yaml"
    f.write_text(text, encoding="utf-8")
    with Deadline():
        out = cli("tao_docker.py", "submit", "--image", "img:1", "--sweep-file", str(f), "--", "train")
    _check(out)


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/stdin", "/dev/urandom", "fifo", "dir", "missing", "link-loop"])
def test_sweep_file_specials(cli, fake, tmp_path, special):
    path = {"fifo": tmp_path / "f", "dir": tmp_path, "missing": tmp_path / "none", "link-loop": tmp_path / "l"}.get(
        special, special)
    if special == "fifo":
        os.mkfifo(path)
    if special == "link-loop":
        os.symlink(path, path)
    with Deadline(10):
        out = cli("tao_docker.py", "submit", "--image", "img:1", "--sweep-file", str(path), "--", "train")
    _check(out)
    assert out.rc == 2


# ------------------------------------------------------------------ damaged records, through every verb that reads one
FIELD_DAMAGE = [
    ("trial", v) for v in ("abc", -1, 1.5, None, [], {}, True, "1")] + [
    ("overrides", v) for v in ("xyz", [], 5, {"a": 1}, {"-a": "1"}, {"a": "$(id)"}, {"a": "\x1b[2J"}, {"a": NVAPI})] + [
    ("sweep", v) for v in (5, "", "UPPER", "\x1b[2J", "a" * 100)] + [
    ("backend", {"engine": v}) for v in (5, True, [1], {"a": 1}, "\x1b[2J", "rm", "")] + [
    ("backend", {"results_dir": v}) for v in ("/", "//", "/etc", "/tmp/x/../..", 5, "relative", "/\x1b[2J")] + [
    ("backend", {"container": v}) for v in (5, "--privileged", "\x1b[2J")] + [
    ("results_dir", v) for v in ("/", "//", 5, None, "s3://", "/\x1b]0;x\x07")] + [
    ("message", v) for v in ("\x1b[2J cleared", NVAPI, 5)] + [
    ("state", v) for v in ("DONE", 5, None)] + [
    ("transitions", v) for v in ([], "x", [{"state": "NOPE"}])] + [
    ("id", "other-id"), ("platform", "mars"), ("attempt", "1"), ("image", 5)]
VERBS = [("status", "{id}"), ("logs", "{id}"), ("cancel", "{id}"), ("artifacts", "{id}"), ("fetch", "{id}", "--to", "{tmp}"),
         ("prune", "{id}", "--yes"), ("metrics", "{id}"), ("status", "--sweep", "dino-sweep-abcde"),
         ("cancel", "--sweep", "dino-sweep-abcde"), ("sweep", "best", "dino-sweep-abcde", "--kpi", "loss"), ("list",)]


def _docker_trial() -> dict:
    rec = records.open_record("docker", "img", "dino", "train", "A", "/tmp/tao-corpus-res/{id}",
                              backend={"engine": "docker"}, sweep=("dino-sweep-abcde", 0, {"train.optim.lr": "0.1"}))
    return records.mark(rec["id"], "PENDING", backend={"results_dir": rec["results_dir"], "container": rec["id"]},
                        backend_ref="abc123")


@pytest.mark.parametrize("field, value", FIELD_DAMAGE, ids=[f"{f}-{i}" for i, (f, _) in enumerate(FIELD_DAMAGE)])
@pytest.mark.parametrize("verb", VERBS, ids=[" ".join(v[:2]) for v in VERBS])
def test_damaged_records(cli, fake, tmp_path, field, value, verb):
    rec = _docker_trial()
    path = records.record_path(rec["id"])
    data = json.loads(path.read_text())
    if field == "backend":
        data["backend"].update(value)
    else:
        data[field] = value
    fsio.write_private(path, json.dumps(data))
    fake.on("docker", lambda c: True, "[]")
    fake.on("sh", lambda c: True, "@@missing\n")
    with Deadline():
        out = cli("tao_jobs.py", *[a.format(id=rec["id"], tmp=tmp_path) for a in verb])
    _check(out)
    for call in fake.calls:  # never a walk or a removal of the whole disk, never a damaged value as an option
        assert "/" not in call.argv[-1:] and "//" not in call.argv[-1:], call
        assert not any(a.startswith("--privileged") for a in call.argv), call


# ------------------------------------------------------------------ results verbs: paths, --to, --from, --png
FETCH_PATHS = ["/etc/passwd", "../x", "a/../../x", "-rf", "--force", "./-x", ".", "./.", "", " ", "a\nb", "\x1b[2J",
               "a" * 5000, "a//b", "~/x", "$(id)", NVAPI, "a\x00b", "ü/ü"]


@pytest.mark.parametrize("path", FETCH_PATHS, ids=range(len(FETCH_PATHS)))
def test_fetch_paths(cli, fake, tmp_path, path):
    rec = _docker_trial()
    records.mark(rec["id"], "COMPLETE")
    fake.on("sh", lambda c: True, "")
    with Deadline():
        out = cli("tao_jobs.py", "fetch", rec["id"], "--", path, "--to", str(tmp_path / "to"))
    _check(out)
    assert len(out.out + out.err) < 2000


FROM_VALUES = ["//tmp/tao-corpus-res/x/model_epoch_001.pth", "/etc/shadow", "../model.pth", "-x", "a" * 5000,
               "\x1b[2J.pth", NVAPI, "s3://other/x.pth", "model_epoch_999.pth", ""]


@pytest.mark.parametrize("value", FROM_VALUES, ids=range(len(FROM_VALUES)))
def test_continue_from(cli, fake, value):
    rec = _docker_trial()
    records.mark(rec["id"], "ERROR", err_class="ERR_PROGRAM")
    fake.on("sh", lambda c: True, "@@files\n1 1 ./model_epoch_001.pth\n@@status\n")
    fake.on("docker", lambda c: True, "[]")
    with Deadline():
        out = cli("tao_jobs.py", "continue", rec["id"], "--from", value, "--dry-run")
    _check(out)
    assert len(out.err) < 1000


@pytest.mark.parametrize("kind, force", list(itertools.product(["file", "link", "dir"], [False, True])))
def test_metrics_png_targets(cli, fake, tmp_path, kind, force):
    rec = _docker_trial()
    target = tmp_path / "c.png"
    keep = tmp_path / "keep"
    keep.write_text("keep")
    {"file": lambda: target.write_text("keep"), "link": lambda: target.symlink_to(keep), "dir": target.mkdir}[kind]()
    fake.on("sh", lambda c: True, "")
    with Deadline():
        out = cli("tao_jobs.py", "metrics", rec["id"], "--png", str(target), *(["--force"] if force else []))
    _check(out)
    assert keep.read_text() == "keep" and (force or out.rc != 0)
