"""A fourth platform is a folder and one registry line: the toy (tests/support/toyplatform, jobs in memory) is
made by docs/architecture.md's steps alone, and submit, status, logs, cancel and a sweep run on it through the
core and the helpers every platform shares."""
from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from taobank.core import platform
from taobank import records, registry
from taobank.campaign import sweeps
from taobank.contract import SubmitOptions

SUPPORT = Path(__file__).resolve().parents[1] / "support"
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture
def toy(state_dir, monkeypatch):
    monkeypatch.syspath_prepend(str(SUPPORT))
    monkeypatch.setitem(registry.PACKAGES, "toy", "toyplatform")  # the one registry line
    from toyplatform import adapter

    adapter.JOBS.clear()
    return adapter


def tao_jobs(*argv: str) -> tuple[int, str]:
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import tao_jobs as helper

    out = io.StringIO()
    with redirect_stdout(out):
        code = helper.main(list(argv))
    return code, out.getvalue()


def test_the_toy_is_a_platform_of_the_registry(toy):
    assert "toy" in registry.names() and registry.canonical("TOY") == "toy"
    assert platform.get("toy") is toy.PLATFORM and platform.get("toy").name == "toy"


def test_submit_status_logs_and_cancel_run_on_the_toy(toy):
    view = platform.get("toy").submit({"image": "toy:1", "command": "echo hi"}, SubmitOptions())
    rec = records.get(view.id)
    assert (rec.platform, rec.state, rec.backend_ref) == ("toy", "PENDING", f"toy/{view.id}")

    other = platform.get("toy").submit({"image": "toy:1", "command": "echo bye"}, SubmitOptions())
    toy.finish(view.id, "COMPLETE")
    code, out = tao_jobs("status", view.id, other.id, "--json")
    states = {row["id"]: row["state"] for row in json.loads(out)}
    assert states == {view.id: "COMPLETE", other.id: "RUNNING"}

    code, out = tao_jobs("logs", other.id)
    assert code == 0 and f"{other.id} is RUNNING" in out
    code, out = tao_jobs("cancel", other.id)
    assert code == 0 and records.get(other.id).state == "CANCELED" and toy.JOBS[other.id] == "CANCELED"
    code, out = tao_jobs("list", "--platform", "toy", "--json")
    assert {row["id"] for row in json.loads(out)} == {view.id, other.id}


def test_a_sweep_runs_on_the_toy_and_cancels_as_one(toy):
    done = sweeps.submit("toy", {"image": "toy:1", "command": "train"}, SubmitOptions(),
                         [{"lr": "0.1"}, {"lr": "0.2"}, {"lr": "0.3"}])
    ids = [v.id for v in done.views]
    assert len(ids) == 3 and all(records.get(i).sweep == done.sweep for i in ids)
    assert [records.get(i).backend_ref for i in ids] == [f"toy/{i}" for i in ids]
    toy.finish(ids[0], "ERROR")
    rows = sweeps.status(done.sweep)
    assert sorted(r.state for r in rows) == ["ERROR", "RUNNING", "RUNNING"]
    stopped, problems = sweeps.cancel(done.sweep)
    assert problems == [] and {records.get(i).state for i in ids[1:]} == {"CANCELED"}
