"""A hostile corpus of what the bank reads back from a job and from its own store: status.json contents (bytes that
are not UTF-8, torn, huge, NaN, wrong types), results file names with odd bytes, damaged records, KPI names and SLURM
node sizes. Each case runs through the helpers as a user runs them (the Docker engine's local ``sh`` a real child,
so its bytes reach the bank as a real child's do) and is checked for: no traceback, no terminal escape (nor a lone
surrogate) on the terminal, no wrong result (a good line, file, record or ranking read as it is) and no data lost
(nothing the job wrote or the store holds changed or removed)."""
from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import pytest

from fakeproc import ok
from test_docker_campaigns import SPEC, Engine
from taobank import fsio, kpirank, records
from taobank.core import platform
from taobank.contract import SubmitOptions
from taobank.errors import TaoError
from taobank.platforms.slurm import resources

#: what must never reach a terminal raw: ESC, CSI (C1), BEL, CR, DEL, a bidi override, a lone surrogate
RAW = ("\x1b", "\x9b", "\x07", "\r", "\x7f", "\u202e", "\udcff", "\udce9", "\ud800")


def _check(out) -> None:
    text = out.out + out.err
    assert "Traceback" not in text and "not valid UTF-8" not in text, out
    assert not any(c in text for c in RAW), out
    text.encode("utf-8")  # nothing unprintable as UTF-8
    assert out.rc in (0, 1), out
    assert all(not ln.lower().startswith("error") or ln.startswith("error: ") for ln in out.err_lines), out
    assert sum(ln.startswith("error: ") for ln in out.err_lines) <= 1, out


def _tree(folder: Path) -> dict[bytes, str]:
    """Every file under ``folder`` by its name's bytes: its sha256 (what must never change)."""
    out = {}
    for root, _, files in os.walk(os.fsencode(folder)):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, os.fsencode(folder))] = hashlib.sha256(Path(os.fsdecode(p)).read_bytes()).hexdigest()
    return out


@pytest.fixture()
def job(docker_fake, fake, tmp_path):
    """A running Docker job (its container answers running) with its results folder on this host."""
    engine = Engine(fake)
    rec = records.open_record("docker", "img:1", "dino", "train", "A", str(tmp_path / "results" / "{id}"),
                              backend={"engine": "docker"})
    jid = rec["id"]
    folder = tmp_path / "results" / jid
    records.mark(jid, "PENDING", backend_ref=f"{jid}-cid", backend={"container": jid, "results_dir": str(folder)})
    engine.containers[jid] = {"Status": "running"}
    folder.mkdir(parents=True)
    return engine, jid, folder


# ------------------------------------------------------------------ status.json contents
def _line(epoch: int, loss: float, **extra) -> bytes:
    return json.dumps({"date": "3/7/2025", "time": f"9:0:{epoch}", "status": "RUNNING", "epoch": epoch,
                       "max_epoch": 9, "kpi": {"val_loss": loss}, **extra}).encode() + b"\n"


FIRST, LAST = _line(0, 0.5), _line(1, 0.25)
STATUS_MIDDLES: list[bytes] = [
    b"", b"\n", b"caf\xe9", b'{"message": "caf\xe9"}', b'{"status": "RUNNING", "message": "\xff\xfe\xfd"}',
    b"\xef\xbb\xbf{}", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x00", b"a\x00b",
    b'{"epoch": 2', b"{", b"}", b"[", b'"', b"null", b"true", b"0", b"[]", b'"text"', b"{}{}",
    b'{"epoch": NaN, "max_epoch": 9}', b'{"epoch": Infinity}', b'{"epoch": -Infinity, "kpi": {"val_loss": NaN}}',
    b'{"epoch": 1e999}', b'{"epoch": -1, "max_epoch": 9}', b'{"epoch": "3", "max_epoch": "nine"}',
    b'{"epoch": [1], "kpi": [1, 2]}', b'{"epoch": {"a": 1}, "kpi": "val_loss"}', b'{"epoch": true, "max_epoch": false}',
    b'{"kpi": {"val_loss": "0.1"}}', b'{"kpi": {"val_loss": null}}', b'{"kpi": {"\x1b[2J": 1}}',
    b'{"kpi": {"val_loss": 1e308, "x": -1e308}}', b'{"message": "\\u001b[2J\\u0007"}', b'{"message": "\\ud800"}',
    b'{"message": "\\udcff"}', b'{"status": "\x1b]0;pwned\x07"}', b'{"status": "FAILURE", "message": "caf\xe9"}',
    b'{"date": "99/99/9999", "time": "99:99:99"}', b'{"time": 5, "date": []}', b"\x1b[2J\x1b[H",
    b"\r\r\r", b"\x9b31m", b"\xe2\x80\xae" + b"gnp.exe", b"#status-file 5 ../../etc/passwd", b"|forged",
    b"#cut 99999999999", b"\t \t", b'{"a": ' * 200 + b"1" + b"}" * 200, b"[" * 5000 + b"]" * 5000,
    b'{"epoch": 3, "max_epoch": 9, "kpi": {"val_loss": 0.1}' + b' ' * 100_000 + b'}',
    b"x" * 2_000_000, (b"caf\xe9 " * 1000),
]


@pytest.mark.parametrize("middle", STATUS_MIDDLES, ids=range(len(STATUS_MIDDLES)))
def test_status_json_contents(job, cli, middle):
    _, jid, folder = job
    # the hostile line first, then TAO's: a line without an epoch updates the KPIs of the epoch in effect, as TAO's
    # StatusLogger lines do; every good line after it is read as written
    (folder / "status.json").write_bytes(middle + b"\n" + FIRST + LAST)
    before = _tree(folder)
    for argv in (["status", jid], ["metrics", jid], ["artifacts", jid, "--kpi", "val_loss"]):
        out = cli("tao_jobs.py", *argv)
        _check(out)
        assert out.rc == 0, (argv, out)
    rows = json.loads(cli("tao_jobs.py", "metrics", jid, "--json").out)["rows"]
    good = {r["epoch"]: r.get("val_loss") for r in rows if r.get("epoch") in (0, 1)}
    assert good == {0: 0.5, 1: 0.25}, rows  # the good lines around the hostile one read as written
    status = cli("tao_jobs.py", "status", jid, "--json")
    view = json.loads(status.out)[0]
    assert view["state"] == "RUNNING"
    assert _tree(folder) == before and records.get(jid).state == "RUNNING"


# ------------------------------------------------------------------ results file names
ODD_NAMES: list[bytes] = [
    b"model_\xff.pth", b"caf\xe9.txt", b"\x1b[2J.pth", b"\x1b]0;x\x07.pth", b"a\rb.pth", b"tab\there.pth",
    b"\xe2\x80\xaegnp.pth", b"\xc2\x9b31m.pth", b"-rf", b"--help", b" lead", b"trail ", b"$(id).pth", b"`id`.pth",
    b"a;b.pth", b"q'uote.pth", b'q"uote.pth', b"\\back.pth", b"*.pth", b"?.pth", b"@@file x", b"@@sum 1 2",
    b"#status-file 1 x", b"|pipe", b"model_epoch_001_\xfe.pth", b"\xed\xa0\x80.pth", b"\x7f.pth", b"a" * 200,
    b"\xef\xbf\xbd.pth", b"ok.pth", b"a\xc2\x85b.pth", b"a\xe2\x80\xa8b.pth", b"a\x0bb.pth", b"a\x1cb.pth",
]


@pytest.mark.parametrize("name", ODD_NAMES, ids=range(len(ODD_NAMES)))
def test_results_file_names(job, cli, tmp_path, name):
    engine, jid, folder = job
    (folder / "status.json").write_bytes(FIRST + LAST)
    odd = folder / os.fsdecode(name)
    odd.write_bytes(b"payload " + name)
    records.mark(jid, "COMPLETE")
    before = _tree(folder)
    text = os.fsdecode(name)
    carried = not any(c in "\n\\" or ord(c) < 32 or ord(c) == 127 for c in text)  # paths.is_member's rule
    out = cli("tao_jobs.py", "artifacts", jid)
    _check(out)
    assert out.rc == 0 and f"{2 if carried else 1} files" in out.out, out
    assert carried or "note: 1 file(s) not listed" in out.out  # a name the bank will not carry is said, not hidden
    listed = json.loads(cli("tao_jobs.py", "artifacts", jid, "--json").out)
    assert sorted(os.fsencode(f["path"]) for f in listed["files"]) == sorted([name, b"status.json"][not carried:])
    assert len(listed["left_out"]) == (0 if carried else 1)
    got = cli("tao_jobs.py", "fetch", jid, "--to", str(tmp_path / "to"), "--copy")
    _check(got)
    assert got.rc == 0, got
    fetched = {k: v for k, v in before.items() if carried or k != name}
    assert _tree(tmp_path / "to") == fetched  # every file, under its own bytes, whole
    assert carried or "was not fetched" in got.err, got
    assert _tree(folder) == before  # nothing on the cluster changed


# ------------------------------------------------------------------ damaged records
def _damage(data: dict, how: str) -> bytes | None:
    trs = data["transitions"]
    edits = {
        "complete-then-unknown": lambda: data.update(state="UNKNOWN", transitions=trs + [{**trs[-1], "state": "UNKNOWN"}]),
        "complete-then-running": lambda: data.update(state="RUNNING", transitions=trs + [{**trs[-1], "state": "RUNNING"}]),
        "starts-running": lambda: data.update(transitions=[{**trs[0], "state": "RUNNING"}] + trs[1:]),
        "last-not-state": lambda: data.update(state="RUNNING"),
        "no-transitions": lambda: data.update(transitions=[]),
        "transitions-text": lambda: data.update(transitions="PENDING"),
        "transition-unknown-state": lambda: data.update(transitions=trs + [{"state": "DONE"}]),
        "transition-not-object": lambda: data.update(transitions=trs + ["COMPLETE"]),
        "state-lowercase": lambda: data.update(state="complete"),
        "state-number": lambda: data.update(state=5),
        "platform-mars": lambda: data.update(platform="mars"),
        "id-other": lambda: data.update(id="other-id-12345678"),
        "backend-list": lambda: data.update(backend=[]),
        "backend-float": lambda: data["backend"].update(x=1.5),
        "backend-container-option": lambda: data["backend"].update(container="--privileged"),
        "backend-results-root": lambda: data["backend"].update(results_dir="/"),
        "results-dir-number": lambda: data.update(results_dir=5),
        "attempt-text": lambda: data.update(attempt="1"),
        "attempt-bool": lambda: data.update(attempt=True),
        "message-number": lambda: data.update(message=5),
        "message-escape": lambda: data.update(message="\x1b[2J\x1b]0;x\x07 cleared"),
        "image-list": lambda: data.update(image=["a"]),
        "sweep-bad": lambda: data.update(sweep="UPPER", trial=0, overrides={"a": "1"}),
        "trial-negative": lambda: data.update(sweep="dino-sweep-abcde", trial=-1, overrides={"a": "1"}),
        "created-number": lambda: data.update(created_at=0),
    }
    if how in edits:
        edits[how]()
        return None
    raw = json.dumps(data).encode()
    return {"truncated": raw[: len(raw) // 2], "empty": b"", "not-json": b"not json", "array": b"[]",
            "null": b"null", "latin1": raw.replace(b'"img:1"', b'"img\xe9"'), "nan": raw.replace(b'"attempt": 1',
            b'"attempt": NaN'), "bom": b"\xef\xbb\xbf" + raw, "nul": raw[:20] + b"\x00" + raw[20:],
            "deep": b"[" * 100_000 + b"]" * 100_000, "huge": raw[:-1] + b', "pad": "' + b"x" * (17 << 20) + b'"}',
            "surrogate-escape": raw.replace(b'"img:1"', b'"\\udcff"'), "dup-keys": raw[:-1] + b', "state": "ERROR"}',
            "utf16": json.dumps(data).encode("utf-16"), "escape-id": raw.replace(data["id"].encode(), b"\\u001b[2J"),
            }[how]


DAMAGE = ["complete-then-unknown", "complete-then-running", "starts-running", "last-not-state", "no-transitions",
          "transitions-text", "transition-unknown-state", "transition-not-object", "state-lowercase", "state-number",
          "platform-mars", "id-other", "backend-list", "backend-float", "backend-container-option",
          "backend-results-root", "results-dir-number", "attempt-text", "attempt-bool", "message-number",
          "message-escape", "image-list", "sweep-bad", "trial-negative", "created-number", "truncated", "empty",
          "not-json", "array", "null", "latin1", "nan", "bom", "nul", "deep", "huge", "surrogate-escape", "dup-keys",
          "utf16", "escape-id"]


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_records(job, cli, how):
    engine, good, _ = job
    bad = records.open_record("docker", "img:1", "dino", "train", "A", "/tmp/tao-corpus/{id}",
                              backend={"engine": "docker"})["id"]
    records.mark(bad, "PENDING", backend_ref="ref-b", backend={"container": bad})
    records.mark(bad, "COMPLETE")
    path = records.record_path(bad)
    data = json.loads(path.read_text())
    raw = _damage(data, how)
    fsio.write_private(path, raw if raw is not None else json.dumps(data).encode())
    stored, good_before = path.read_bytes(), records.record_path(good).read_bytes()
    for argv in (["list"], ["status"], ["status", good], ["status", bad], ["cancel", bad], ["artifacts", bad]):
        out = cli("tao_jobs.py", *argv)
        _check(out)
        if argv in (["list"], ["status"], ["status", good]):
            assert out.rc == 0 and good in out.out, (argv, out)  # one damaged record never hides the others
    assert path.read_bytes() == stored  # the damaged record is never rewritten nor removed
    assert records.get(good).state == "RUNNING" and records.record_path(good).read_bytes() != b""
    assert good_before  # the good one was read (and marked RUNNING by the status), never lost


# ------------------------------------------------------------------ KPI names: the direction and the ranking
#: names that say lower is better, names that say higher, names that say neither (ranked only with --mode)
LOWER = ["loss", "val_loss", "train_loss", "Loss", "LOSS_total", "val_loss_epoch", "evaluation_cost",
         "Evaluation_Cost", "cost", "error", "loss\u00e9", "val loss", "rmse", "fid"]
HIGHER = ["mAP", "val_mAP", "mAP50", "mIoU", "val_accuracy", "acc", "f1_score", "recall", "precision", "auc",
          "mAP\u202e"]
NEITHER = ["k" * 200, "a.b", "val_metric"]
KPI_NAMES = LOWER + HIGHER + NEITHER


@pytest.mark.parametrize("kpi", KPI_NAMES)
def test_kpi_names_rank_by_the_direction_of_their_name(job, cli, kpi):
    _, jid, folder = job
    values = (0.4, 0.9, 0.1, 0.6)
    (folder / "status.json").write_text("".join(json.dumps(
        {"status": "RUNNING", "epoch": e, "max_epoch": 3, "kpi": {kpi: v}}) + "\n" for e, v in enumerate(values)))
    for e in range(4):
        (folder / f"model_epoch_{e:03d}.pth").write_text(f"w{e}")
    records.mark(jid, "COMPLETE")
    before = _tree(folder)
    lower = kpi in LOWER
    want = values.index(min(values) if lower else max(values))
    out = cli("tao_jobs.py", "artifacts", jid, "--kpi", kpi, "--json")
    if kpi in NEITHER:  # a usage error (exit 2): one line asking for --mode, nothing ranked
        assert out.rc == 2 and "add --mode min" in out.err and len(out.err.strip().splitlines()) == 1, out
        assert "Traceback" not in out.err and not any(c in out.err for c in RAW), out
        assert _tree(folder) == before
        return
    _check(out)
    best = json.loads(out.out)["best"]
    if len(kpi) > 128 or not kpi.isprintable():  # status.json's reader keeps no such KPI name: none is ranked
        assert best["epoch"] is None and best["note"] and not best["checkpoints"], best
        assert _tree(folder) == before
        return
    assert (best["epoch"], best["mode"], best["mode_from"]) == (want, "min" if lower else "max", "name"), best
    assert kpirank.direction(kpi, None).mode == best["mode"]
    text = cli("tao_jobs.py", "artifacts", jid, "--kpi", kpi)
    _check(text)
    assert "from the KPI's name" in text.out
    flipped = json.loads(cli("tao_jobs.py", "artifacts", jid, "--kpi", kpi, "--mode",
                             "max" if lower else "min", "--json").out)["best"]
    assert flipped["epoch"] == values.index(max(values) if lower else min(values))  # --mode wins
    assert _tree(folder) == before


# ------------------------------------------------------------------ SLURM node sizes
SLURM_SPEC = {"network_arch": "dino", "action": "train", "container_runtime": "none", "num_gpus": 1,
              "cpus_per_task": 4, "time_hours": 1, "command": ["true"], "partition": "gpu"}
N = "@@node gpu*|n1|64|512000|gpu:a100:8(S:0-1)\n@@node gpu*|n2|32|256000|gpu:4\n@@node cpu|c1|256|2048000|(null)\n"
SIZES = [
    # (sinfo's answer, what the job asks, refused?)
    (N, {}, False), (N, {"cpus_per_task": 64}, False), (N, {"cpus_per_task": 65}, True),
    (N, {"memory": "500G"}, False), (N, {"memory": "501G"}, True), (N, {"memory": "512000M"}, False),
    (N, {"memory": "512001M"}, True), (N, {"memory": "524288000K"}, False), (N, {"memory": "1T"}, True),
    (N, {"num_gpus": 8, "max_num_gpus_per_node": 8}, False), (N, {"num_gpus": 16, "max_num_gpus_per_node": 16}, True),
    (N, {"num_nodes": 2, "num_gpus": 4}, False), (N, {"num_nodes": 2, "num_gpus": 16}, True),
    (N, {"num_nodes": 3, "num_gpus": 3}, True), (N, {"cpus_per_task": 33, "num_nodes": 2, "num_gpus": 2}, True),
    (N, {"partition": "cpu", "num_gpus": 0, "cpus_per_task": 256}, False),
    (N, {"partition": "cpu", "num_gpus": 1}, True), (N, {"partition": "gpu,cpu", "cpus_per_task": 200,
                                                            "num_gpus": 0}, False),
    (N, {"partition": "other", "cpus_per_task": 9999}, True),  # no partition of sinfo's: sbatch would refuse it
    ("", {"cpus_per_task": 9999}, False), ("@@node garbage\n@@node \x1b[2J\n", {"cpus_per_task": 9999}, False),
    ("@@node gpu*|n1|x|y|z\n", {"cpus_per_task": 9999}, False), ("@@node gpu*|n1|-1|5|gpu:1\n", {}, False),
    ("@@node gpu*|n1|99999999999999999999|1|gpu:1\n", {"cpus_per_task": 9999, "num_gpus": 1}, False),
    ("@@node gpu*|n1|8+|1000+|gpu:2\n", {"cpus_per_task": 9}, True),
    ("@@node gpu*|n1|8|1000|gpu:tesla:1,gpu:a100:2\n", {"num_gpus": 3, "max_num_gpus_per_node": 4}, False),
    ("@@node gpu*|n1|8|1000|gpu:a100:2,mps:100\n", {"num_gpus": 3, "max_num_gpus_per_node": 4}, True),
    ("@@node gpu*|n1|8|1000|gpu:2\n@@node gpu*|n1|8|1000|gpu:2\n", {"num_nodes": 2, "num_gpus": 2}, True),
    ("@@node gpu*|n1|8|1000|gpu:2\x1b[2J\n", {"cpus_per_task": 9999}, True),  # its CPUs are read all the same
    ("@@node gpu*|n1|8|1000|\x1b[2J\n", {"cpus_per_task": 4, "num_gpus": 0}, False),
]


@pytest.mark.parametrize("sinfo, ask, refused", SIZES, ids=range(len(SIZES)))
def test_slurm_node_sizes(slurm, sinfo, ask, refused):
    slurm.ssh("MISSING", sinfo)
    slurm.ssh("STAGE", "")
    slurm.ssh("FIND", "")
    slurm.ssh("SBATCH", "4242\n")
    try:
        platform.get("slurm").submit({**SLURM_SPEC, **ask}, SubmitOptions(skip_nccl_probe=True))
    except TaoError as exc:
        assert refused and "nothing was submitted" in str(exc) and "\n" not in str(exc), exc
        assert not any(c in str(exc) for c in RAW)
        assert records.list_records() == [] and set(slurm.scripts()) <= {"MISSING"}
        return
    assert not refused, "a job no node can hold was submitted"
    (rec,) = records.list_records()
    assert rec["state"] == "PENDING" and slurm.count("SBATCH") == 1


def test_memory_sizes_are_read_as_slurm_reads_them():
    assert [resources.memory_mb(s) for s in ("1", "1024K", "1025K", "1M", "1G", "1T")] == \
        [1, 1, 2, 1, 1024, 1024 ** 2]
    assert resources.node_sizes("@@node p*|n|8|1000|gpu:a:2(S:0),gpu:b:1\n")[0].gpus == 3
    assert not math.isnan(resources.memory_mb("64G"))
