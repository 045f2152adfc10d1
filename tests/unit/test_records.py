"""The record store: table enforcement, atomicity, locking, modes, refusals."""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from taobank import names, records, states
from taobank.records import shape
from taobank.errors import TaoError
from taobank.redact import lint_text

BANK = Path(__file__).resolve().parents[2]
SCRIPTS = BANK / "scripts"


def _open(**kw):
    args = dict(platform="kubernetes", image="nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt", network_arch="deformable_detr",
                action="train", storage_tier="A", results_dir="/results/x")
    args.update(kw)
    return records.open_record(**args)


def _at(state: str) -> str:
    rec = _open()
    if state != "PENDING":
        records.mark(rec["id"], state)
    return rec["id"]


def test_open_record_fields(state_dir):
    rec = _open(platform="K8S", storage_tier="c", results_dir="s3://bucket/prefix", backend={"namespace": "ns"})
    assert names.is_dns1035_label(rec["id"]) and rec["id"].startswith("deformable-detr-train-")
    assert rec["platform"] == "kubernetes" and rec["storage_tier"] == "C" and rec["state"] == "PENDING"
    assert rec["attempt"] == 1 and rec["retry_of"] is None and rec["err_class"] is None
    assert rec["backend"] == {"namespace": "ns"} and rec["backend_ref"] is None
    assert [t["state"] for t in rec["transitions"]] == ["PENDING"]
    assert records.load(rec["id"]) == rec
    assert (state_dir / f"{rec['id']}.json").is_file()


def test_state_dir_default(monkeypatch, tmp_path):
    monkeypatch.delenv("TAO_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert records.state_dir() == tmp_path / "xdg" / "tao-skill-bank" / "jobs"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert records.state_dir() == tmp_path / "home" / ".local" / "state" / "tao-skill-bank" / "jobs"


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o077])
def test_modes_are_umask_independent(state_dir, mask):
    old = os.umask(mask)
    try:
        rid = _open()["id"]
        records.mark(rid, "RUNNING")
        art = records.artifact_dir(rid)
    finally:
        os.umask(old)
    assert state_dir.stat().st_mode & 0o777 == 0o700
    assert art.stat().st_mode & 0o777 == 0o700 and art.parent == state_dir
    for f in state_dir.iterdir():
        if f.is_file():
            assert f.stat().st_mode & 0o777 == 0o600, f


def test_existing_state_dir_is_left_alone_and_a_writable_one_refused(tmp_path, monkeypatch):
    """An existing folder is never chmod-ed (TAO_STATE_DIR=/tmp would lose its sticky bit);
    one others may write to is refused, since anyone could plant records there."""
    d = tmp_path / "readable"
    d.mkdir()
    os.chmod(d, 0o755)
    monkeypatch.setenv("TAO_STATE_DIR", str(d))
    rec = _open()
    assert d.stat().st_mode & 0o7777 == 0o755
    assert (d / f"{rec['id']}.json").stat().st_mode & 0o777 == 0o600
    for mode in (0o1777, 0o777, 0o775):
        shared = tmp_path / f"shared-{mode:o}"
        shared.mkdir()
        os.chmod(shared, mode)
        monkeypatch.setenv("TAO_STATE_DIR", str(shared))
        with pytest.raises(TaoError, match="writable by others"):
            records.list_records()
        assert shared.stat().st_mode & 0o7777 == mode
    fresh = tmp_path / "new" / "jobs"
    monkeypatch.setenv("TAO_STATE_DIR", str(fresh))
    _open()
    assert fresh.stat().st_mode & 0o777 == 0o700


def test_symlinks_in_the_store_are_never_followed(tmp_path, monkeypatch):
    d = tmp_path / "state"
    monkeypatch.setenv("TAO_STATE_DIR", str(d))
    rec = _open()
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.chmod(target, 0o755)
    (d / f"{rec['id']}.lock").symlink_to(target / "lockfile")
    with pytest.raises(TaoError, match="symlink"):
        records.mark(rec["id"], "RUNNING")
    assert not (target / "lockfile").exists()
    (d / f"{rec['id']}.lock").unlink()
    (d / f"{rec['id']}.d").symlink_to(target)
    with pytest.raises(TaoError, match="symlink"):
        records.artifact_dir(rec["id"])
    assert target.stat().st_mode & 0o777 == 0o755


def test_damaged_or_strange_files_never_break_list(tmp_path, monkeypatch):
    d = tmp_path / "state"
    monkeypatch.setenv("TAO_STATE_DIR", str(d))
    good = _open()
    for i, body in enumerate(["null", "[]", "{}", '{"id": "x"}', "not json", "\u00ff\u00fe", '"text"']):
        (d / f"bad-{i}.json").write_text(body)
    os.mkfifo(d / "fifo-job.json")  # would block a plain open() forever
    (d / "linked-job.json").symlink_to(d / f"{good['id']}.json")
    problems: list[str] = []
    assert [r["id"] for r in records.list_records(problems=problems)] == [good["id"]]
    assert len(problems) == 9 and all("\n" not in p for p in problems)
    with pytest.raises(TaoError, match="damaged|not valid JSON"):
        records.load("bad-0")


CASES = [(src, dst) for src in states.STATES for dst in states.STATES]


@pytest.mark.parametrize("src,dst", CASES)
def test_transition_table_enforced(state_dir, src, dst):
    rid = _at(src)
    before = records.load(rid)
    if dst == src:
        rec = records.mark(rid, dst, message="again")
        if src in states.TERMINAL:
            assert rec == before == records.load(rid)  # no-op
        else:
            assert rec["state"] == src and rec["transitions"] == before["transitions"]
            assert rec["message"] == "again"
    elif states.is_allowed(src, dst):
        rec = records.mark(rid, dst)
        assert rec["state"] == dst and rec["transitions"][-1]["state"] == dst
        assert len(rec["transitions"]) == len(before["transitions"]) + 1
    else:
        with pytest.raises(TaoError) as exc:
            records.mark(rid, dst)
        assert ("allowed from" in str(exc.value)) or ("terminal" in str(exc.value))
        assert records.load(rid) == before


def test_pitfall_sequence_refused(state_dir):
    rid = _at("PENDING")
    records.mark(rid, "UNKNOWN")
    with pytest.raises(TaoError, match="allowed from UNKNOWN: RUNNING, COMPLETE, ERROR, CANCELED"):
        records.mark(rid, "PENDING")


@pytest.mark.parametrize("terminal", sorted(states.TERMINAL))
def test_terminal_never_changes(state_dir, terminal):
    rid = _at(terminal)
    snap = records.load(rid)
    for dst in states.STATES:
        if dst != terminal:
            with pytest.raises(TaoError):
                records.mark(rid, dst)
    records.mark(rid, terminal, backend_ref="ns/other", message="late", backend={"x": "y"})
    assert records.load(rid) == snap


def test_err_class_only_with_error(state_dir):
    rid = _at("RUNNING")
    for state in ("RUNNING", "COMPLETE", "CANCELED", "UNKNOWN", "PENDING"):
        with pytest.raises(TaoError, match="only allowed with --state ERROR"):
            records.mark(rid, state, err_class="ERR_INFRA")
    rec = records.mark(rid, "error", err_class="err_program")
    assert rec["state"] == "ERROR" and rec["err_class"] == "ERR_PROGRAM"
    rid2 = _at("RUNNING")
    assert records.mark(rid2, "ERROR")["err_class"] is None  # optional
    with pytest.raises(TaoError, match="unknown err_class"):
        records.mark(_at("RUNNING"), "ERROR", err_class="ERR_OOM")


def test_schema_rejects_bad_records(state_dir):
    rec = _open()
    bad = dict(rec, state="RUNNING", err_class="ERR_INFRA", transitions=rec["transitions"] + [
        {"time": rec["created_at"], "state": "RUNNING", "source": "agent", "message": None}])
    with pytest.raises(TaoError, match="rejected"):
        records.validate(bad)
    for key, value in [("platform", "k8s"), ("storage_tier", "B"), ("results_dir", "rel/x"), ("attempt", 0),
                       ("id", "Bad_Id"), ("state", "DONE")]:
        with pytest.raises(TaoError, match="rejected"):
            records.validate(dict(rec, **{key: value}))
    extra = dict(rec, password="x")
    with pytest.raises(TaoError, match="rejected"):
        records.validate(extra)
    loop = dict(rec, state="PENDING", transitions=rec["transitions"] + [
        {"time": rec["created_at"], "state": "UNKNOWN", "source": "agent", "message": None},
        {"time": rec["created_at"], "state": "PENDING", "source": "agent", "message": None}])
    with pytest.raises(TaoError, match="UNKNOWN -> PENDING"):
        records.validate(loop)


#: values a field of a record may be set to by the property below: each type the schema tells apart, the
#: edges of every length and range, and the enum members
_ODD_VALUES = [None, True, False, 0, 1, 2, -1, 1.0, 2.5, "", "x", "x" * 40, "x" * 41, "a" * 200, "a" * 201, "a" * 256,
               "a" * 257, "a" * 512, "a" * 513, "a" * 4096, "a" * 4097, "/", "/r", "/r\n", "s3://b/p", "s3:/b", "rel/x",
               "Bad_Id", "job-1", "job-", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123Z", "2026-01-02 03:04:05Z",
               "2026-01-02T03:04:05Z\n", "PENDING", "RUNNING", "ERROR", "DONE", "A", "C", "B", "kubernetes", "slurm",
               "k8s", "ERR_INFRA", "ERR_PROGRAM", "ERR_OOM", "agent", "poller", "robot", [], {}, ["x"], {"k": "v"},
               {"k": 1.5}, {"bad key": "v"}, {"k" * 65: "v"}, {"ok.key-1": None}]


_NOW = "2026-01-02T03:04:05.000001Z"


def _valid_record() -> dict:
    return {"record_version": 1, "id": "dino-train-abc12", "platform": "slurm", "image": "img:1", "network_arch": "dino",
            "action": "train", "description": None, "storage_tier": "A", "results_dir": "/r", "backend_ref": None,
            "backend": {"k": "v", "n": 3, "b": True}, "state": "RUNNING", "err_class": None, "message": None,
            "transitions": [{"time": _NOW, "state": "PENDING", "source": "agent", "message": "opened"},
                            {"time": _NOW, "state": "RUNNING", "source": "poller", "message": None}],
            "retry_of": None, "attempt": 1, "created_at": _NOW, "updated_at": _NOW}


#: the record's fields, as the schema names them
_FIELDS = sorted(shape.schema()["properties"])


def _edited(edits: list[tuple[str, int]], transition: tuple[str, int] | None = None) -> dict:
    """A valid record with ``edits`` (field, index into _ODD_VALUES; "-drop-" removes a field) applied."""
    rec = _valid_record()
    for field, i in edits:
        if field == "-drop-":
            rec.pop(_FIELDS[i % len(_FIELDS)], None)
        else:
            rec[field] = _ODD_VALUES[i]
    if transition is not None and isinstance(rec.get("transitions"), list) and rec["transitions"]:
        t = rec["transitions"][-1]
        field, i = transition
        if isinstance(t, dict):
            if field == "-drop-":
                t.pop(("time", "state", "source", "message")[i % 4], None)
            else:
                t[field] = _ODD_VALUES[i]
    return rec


def _integral_float(value) -> bool:
    """A number JSON Schema calls an integer that the compiled check does not (``1.0``): it is stricter there."""
    if isinstance(value, dict):
        return any(_integral_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_integral_float(v) for v in value)
    return type(value) is float and value.is_integer()


def _agrees(rec: dict) -> bool:
    """The compiled schema check and jsonschema give the same verdict (the compiled one may refuse ``1.0``)."""
    from taobank import spec

    ours = shape._check()(rec) is None
    theirs = spec.first_error(rec, records.SCHEMA_FILE.name) is None
    return ours == theirs or (theirs and not ours and _integral_float(rec))


def test_the_compiled_record_check_agrees_with_jsonschema():
    """validate() and every read check the schema by :mod:`taobank.records.shape` (no jsonschema import):
    it accepts exactly what jsonschema accepts. Every field (and every transition field) set to every odd
    value, every field dropped, and the fields the schema ties together (state/err_class, retry_of/attempt,
    the sweep fields) in pairs."""
    assert shape._check()(_valid_record()) is None and _agrees(_valid_record())
    n = len(_ODD_VALUES)
    fields = _FIELDS + ["extra"]
    cases = [_edited([(f, i)]) for f in fields for i in range(n)]
    cases += [_edited([("-drop-", i)]) for i in range(len(_FIELDS))]
    cases += [_edited([], (f, i)) for f in ("time", "state", "source", "message", "extra", "-drop-") for i in range(n)]
    for a, b in (("state", "err_class"), ("retry_of", "attempt"), ("transitions", "state"), ("sweep", "trial")):
        cases += [_edited([(a, i), (b, j)]) for i in range(n) for j in range(n)]
    accepted = [rec for rec in cases if shape._check()(rec) is None]
    bad = [rec for rec in cases if not _agrees(rec)]
    assert not bad, bad[:3]
    assert len(accepted) >= 100  # the check is not a blanket refusal


@settings(max_examples=300, deadline=None)
@given(edits=st.lists(st.tuples(st.sampled_from(_FIELDS + ["extra", "-drop-"]),
                                st.sampled_from(range(len(_ODD_VALUES)))), max_size=4),
       transition=st.one_of(st.none(), st.tuples(st.sampled_from(["time", "state", "source", "message", "extra",
                                                                  "-drop-"]),
                                                 st.sampled_from(range(len(_ODD_VALUES))))))
def test_the_compiled_record_check_agrees_on_any_combination_of_edits(edits, transition):
    assert _agrees(_edited(edits, transition))


def test_the_store_never_imports_jsonschema(state_dir):
    """Every write and every read checks the record by the compiled schema, refusals and damaged records too:
    no record verb pays for jsonschema's import (benchmarks/helper_startup.py times it)."""
    code = """
import json, sys
from taobank import records
from taobank.errors import TaoError
rec = records.open_record("kubernetes", "img:1", "dino", "train", "A", "s3://bucket/x/{id}",
                          backend={"namespace": "ns"}, description="a run")
records.mark(rec["id"], "RUNNING", backend_ref="ns/job", message="up", backend={"uid": "u-1", "n": 2, "f": False})
records.mark(rec["id"], "ERROR", err_class="ERR_INFRA", message="node lost")
assert records.open_record("kubernetes", "img:1", "dino", "train", "A", "/r", retry_of=rec["id"])["attempt"] == 2
try:
    records.validate(dict(rec, storage_tier="B"))
except TaoError as exc:
    assert "rejected at storage_tier" in str(exc), exc
path = records.record_path(rec["id"])
path.write_text(json.dumps(dict(json.loads(path.read_text()), state="DONE")))
problems = []
records.list_records(problems=problems)
assert len(problems) == 1 and "damaged (unknown state)" in problems[0], problems
assert "jsonschema" not in sys.modules
"""
    env = dict(os.environ, PYTHONPATH=str(SCRIPTS), TAO_STATE_DIR=str(state_dir))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_every_write_is_validated(state_dir):
    """A hand-edited invalid record cannot be carried forward by a mark."""
    rid = _at("PENDING")
    path = state_dir / f"{rid}.json"
    data = json.loads(path.read_text())
    data["platform"] = "k8s"
    path.write_text(json.dumps(data))
    with pytest.raises(TaoError, match="rejected at platform|damaged \\(unknown platform\\)"):
        records.mark(rid, "RUNNING")
    with pytest.raises(TaoError, match="string, integer or boolean"):
        records.mark(_at("PENDING"), "RUNNING", backend={"x": [1]})


@pytest.mark.parametrize("value", [
    "relative/path", "./x", "~/results", "", "   ", "s3://user:pass@bucket/x", "s3://key@bucket/x",
    "https://user:pw@host/x", "s3://b/k?X-Amz-Signature=abc", "https://b.s3.amazonaws.com/k?X-Amz-Credential=a",
    "gs://b/x#frag", "/a/../b", "/res\nults", "s3://", "lustre://AKIAABCDEFGHIJKLMNOP/x",
])
def test_results_dir_refused(state_dir, value):
    with pytest.raises(TaoError, match="results_dir"):
        _open(results_dir=value)
    assert records.list_records() == []


@pytest.mark.parametrize("value", ["/lustre/fsw/x", "/results", "s3://bucket/prefix/run1", "lustre://fs/x",
                                   "gs://b/p", "pvc://claim/sub", "nfs://server/export", "/path with space/x"])
def test_results_dir_accepted(state_dir, value):
    assert _open(results_dir=value)["results_dir"] == value


def test_secret_in_message_is_redacted(state_dir):
    rid = _at("PENDING")
    records.mark(rid, "RUNNING", message="started with HF_TOKEN=s3cr3tVALUE42 and Authorization: Bearer zzzTOPzzz")
    raw = (state_dir / f"{rid}.json").read_text()
    assert "s3cr3tVALUE42" not in raw and "zzzTOPzzz" not in raw and "REDACTED" in raw
    with pytest.raises(TaoError, match="credential"):
        records.mark(rid, "RUNNING", backend={"login_host": "https://u:pw@x/"})
    with pytest.raises(TaoError, match="credential"):
        records.mark(rid, "RUNNING", backend={"token": "nvapi-" + "a" * 30})
    with pytest.raises(TaoError, match="credential"):
        records.mark(rid, "RUNNING", backend_ref="hf_" + "a" * 34)
    rec = records.mark(rid, "RUNNING", backend={"cred_secret_name": "tao-creds-abc"})  # a Secret's name
    assert rec["backend"]["cred_secret_name"] == "tao-creds-abc"
    for key in ("cred_secret", "password", "HF_TOKEN", "db_pass"):  # the key says "credential": refused whatever
        with pytest.raises(TaoError, match="named like a credential"):
            records.mark(rid, "RUNNING", backend={key: "hunter2"})
    assert records.mark(rid, "RUNNING", backend={"staged_secrets": True})["backend"]["staged_secrets"] is True


@pytest.mark.parametrize("field", ["network_arch", "action", "image"])
def test_secret_shaped_open_fields_are_refused(state_dir, field):
    token = "ghp_" + "a1B2" * 10
    kw = {"platform": "slurm", "image": "nvcr.io/x:1", "network_arch": "dino", "action": "train",
          "storage_tier": "A", "results_dir": "/r"}
    kw[field] = f"HF_TOKEN={token}" if field == "action" else token
    with pytest.raises(TaoError, match=f"{field} looks like it carries a credential"):
        records.open_record(**kw)
    assert list(state_dir.glob("*.json")) == []


def test_backend_merge_and_ref_binding(state_dir):
    rid = _at("PENDING")
    records.mark(rid, "RUNNING", backend_ref="ns/job", backend={"uid": "u1", "namespace": "ns"})
    rec = records.mark(rid, "RUNNING", backend_ref="ns/job", backend={"name": "job", "slurm_job_id": 42})
    assert rec["backend"] == {"uid": "u1", "namespace": "ns", "name": "job", "slurm_job_id": 42}
    with pytest.raises(TaoError, match="bound to backend_ref"):
        records.mark(rid, "RUNNING", backend_ref="ns/other")


def test_retry_link(state_dir):
    parent = _at("RUNNING")
    with pytest.raises(TaoError, match="before opening a retry"):
        _open(retry_of=parent)
    records.mark(parent, "ERROR", err_class="ERR_INFRA")
    child = _open(retry_of=parent)
    assert child["retry_of"] == parent and child["attempt"] == 2
    records.mark(child["id"], "ERROR")
    grandchild = _open(retry_of=child["id"])
    assert grandchild["attempt"] == 3
    with pytest.raises(TaoError, match="no job record"):
        _open(retry_of="nope-train-00000000")


def test_collision_retried_never_overwritten(state_dir, monkeypatch):
    suffixes = iter(["aaaaaaaa", "aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(names, "_suffix", lambda: next(suffixes))
    first = _open(action="train")
    second = _open(action="train")
    assert first["id"].endswith("-aaaaaaaa") and second["id"].endswith("-bbbbbbbb")
    assert records.load(first["id"]) == first
    monkeypatch.setattr(names, "_suffix", lambda: "aaaaaaaa")
    with pytest.raises(TaoError, match="could not mint"):
        _open(action="train")


def test_bad_ids_and_missing(state_dir):
    for bad in ("../etc/passwd", "A", "", "x" * 41, "a/b"):
        with pytest.raises(TaoError, match="not a job id"):
            records.load(bad)
    with pytest.raises(TaoError, match="no job record"):
        records.mark("dino-train-12345678", "RUNNING")


def test_list_filters(state_dir):
    a = _open(platform="k8s")["id"]
    b = _open(platform="slurm")["id"]
    records.mark(b, "RUNNING")
    c = _open(platform="slurm")["id"]
    records.mark(c, "COMPLETE")
    (state_dir / ".junk.tmp").write_text("{")
    assert [r["id"] for r in records.list_records()] == [a, b, c]
    assert [r["id"] for r in records.list_records(platform="kube")] == [a]
    assert [r["id"] for r in records.list_records(platform="slurm", active=True)] == [b]
    assert [r["id"] for r in records.list_records(state="complete")] == [c]


# ---------------------------------------------------------------- concurrency
def _toggle_worker(args):
    state_path, job_id, proc, n = args
    os.environ["TAO_STATE_DIR"] = state_path
    mine = 0
    for i in range(n):
        cur = records.load(job_id)["state"]
        target = "PENDING" if cur == "RUNNING" else "RUNNING"
        msg = f"p{proc}-{i}"
        rec = records.mark(job_id, target, message=msg, backend={f"p{proc}_{i}": i}, source="poller")
        if rec["transitions"][-1]["message"] == msg:
            mine += 1
    return mine


def test_concurrent_marks_lose_nothing(state_dir):
    rid = _at("PENDING")
    procs, n = 8, 20
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(procs) as pool:
        counts = pool.map(_toggle_worker, [(str(state_dir), rid, p, n) for p in range(procs)])
    rec = records.load(rid)
    assert len(rec["backend"]) == procs * n  # every read-modify-write kept
    assert len(rec["transitions"]) - 1 == sum(counts)  # every transition kept
    assert sum(counts) > 0
    records.validate(rec)
    msgs = [t["message"] for t in rec["transitions"][1:]]
    assert len(msgs) == len(set(msgs))


WRITER = """
import sys
sys.path.insert(0, {scripts!r})
from taobank import records
job = sys.argv[1]
sys.stdout.write("go\\n"); sys.stdout.flush()
i = 0
while True:
    i += 1
    records.mark(job, "RUNNING", message="x" * 3000 + str(i), backend={{"k%d" % (i % 50): "v" * 200}})
"""


def test_kill_mid_write_never_corrupts(state_dir):
    rid = _at("RUNNING")
    code = WRITER.format(scripts=str(SCRIPTS))
    env = dict(os.environ, TAO_STATE_DIR=str(state_dir))
    for round_ in range(12):
        p = subprocess.Popen([sys.executable, "-c", code, rid], stdout=subprocess.PIPE, env=env)
        assert p.stdout.readline() == b"go\n"
        time.sleep(0.05 + (round_ % 6) * 0.04)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        rec = records.load(rid)  # parses
        records.validate(rec)  # and validates
        assert rec["state"] == "RUNNING"
    # debris of killed writers is only dot-temp files, ignored by list
    assert [r["id"] for r in records.list_records()] == [rid]
    for f in state_dir.iterdir():
        assert f.name.startswith(".") or f.name.startswith(rid), f.name
    old = time.time() - 3600
    for f in state_dir.glob(".*.tmp"):
        os.utime(f, (old, old))
    fresh = state_dir / f".{rid}.fresh.tmp"
    fresh.write_text("{")  # a writer that may still be alive: kept
    assert records.mark(rid, "COMPLETE")["state"] == "COMPLETE"
    assert [f.name for f in state_dir.glob(".*.tmp")] == [fresh.name]


_printable = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(_printable, _printable)
def test_any_arch_action_opens_with_valid_unique_id(tmp_path_factory, arch, action):
    if not arch.strip() or not action.strip():
        return
    if lint_text(arch, "network_arch") or lint_text(action, "action"):
        return  # a credential-looking value is refused, never stored (test_a_credential_looking_action_is_refused)
    d = tmp_path_factory.mktemp("prop")
    old = os.environ.get("TAO_STATE_DIR")
    os.environ["TAO_STATE_DIR"] = str(d)
    try:
        ids = {_open(network_arch=arch, action=action)["id"] for _ in range(3)}
        assert len(ids) == 3
        for i in ids:
            assert names.is_dns1035_label(i) and len(i) <= 40
            assert records.load(i)["network_arch"] == arch.strip()
    finally:
        if old is None:
            os.environ.pop("TAO_STATE_DIR", None)
        else:
            os.environ["TAO_STATE_DIR"] = old


@pytest.mark.parametrize("action", ["AKIA" + "0" * 16, "ghp_" + "a" * 36])
def test_a_credential_looking_action_is_refused(state_dir, action):
    with pytest.raises(TaoError, match="looks like it carries a credential") as err:
        _open(action=action)
    assert action not in str(err.value)
    assert records.list_records() == []


def test_failed_rename_leaves_old_record_and_no_temp(state_dir, monkeypatch):
    rid = _at("RUNNING")
    before = records.load(rid)

    def boom(*a, **k):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(os, "replace", boom)
        with pytest.raises(KeyboardInterrupt):
            records.mark(rid, "COMPLETE")
    assert records.load(rid) == before
    assert not [f for f in state_dir.iterdir() if f.name.endswith(".tmp")]


def test_same_state_mark_without_news_writes_nothing(state_dir):
    rid = _at("RUNNING")
    rec = records.mark(rid, "RUNNING", message="m", backend={"a": "1"})
    mtime = (state_dir / f"{rid}.json").stat().st_mtime_ns
    assert records.mark(rid, "RUNNING", message="m", backend={"a": "1"}) == rec
    assert (state_dir / f"{rid}.json").stat().st_mtime_ns == mtime
    assert records.mark(rid, "RUNNING", backend={"a": "2"})["updated_at"] > rec["updated_at"]
