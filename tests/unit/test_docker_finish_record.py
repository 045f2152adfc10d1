"""submit --job-id after a lost docker run answer: the record's own results folder exists (launch made it) and is
empty, no container was made; finishing the record starts it. Another job's folder, or one with files, is refused."""
from __future__ import annotations

import json

from taobank import records
from taobank.errors import TaoError


def _engine(fake, *, lost: bool):
    def run(call):
        if lost:
            raise TaoError("docker run did not answer within 300s: check connectivity and retry")
        return "0123456789abcdef"

    fake.on("docker", lambda c: c.argv[1] == "info", json.dumps({"ServerVersion": "20.10.24", "SecurityOptions": []}))
    fake.on("docker", lambda c: c.argv[1:3] == ["image", "inspect"], "sha256:1")
    fake.on("docker", lambda c: c.argv[1:3] == ["container", "inspect"], "", rc=1, stderr="Error: No such container: x")
    fake.on("docker", lambda c: c.argv[1] == "run", run)


def _lost_submit(fake, cli, base) -> dict:
    _engine(fake, lost=True)
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--results-dir", str(base), "--", "true")
    assert out.rc != 0 and "may exist" in out.err, out
    (rec,) = records.list_records()
    assert rec["state"] == "PENDING" and (base / rec["id"]).is_dir()
    return rec


def test_finishing_a_record_whose_own_folder_is_empty_starts_the_container(fake, cli, tmp_path):
    rec = _lost_submit(fake, cli, tmp_path)
    _engine(fake, lost=False)
    out = cli("tao_docker.py", "submit", "--job-id", rec["id"], "--image", "img:1", "--gpus", "0",
              "--results-dir", str(tmp_path), "--json", "--", "true")
    assert out.rc == 0, out
    view = json.loads(out.out)
    assert view["id"] == rec["id"] and view["backend_ref"] == "0123456789ab" and len(records.list_records()) == 1
    assert sum(c.argv[1] == "run" for c in fake.calls) == 2


def test_a_folder_that_holds_files_is_still_refused(fake, cli, tmp_path):
    rec = _lost_submit(fake, cli, tmp_path)
    (tmp_path / rec["id"] / "model.pth").write_text("x")
    _engine(fake, lost=False)
    out = cli("tao_docker.py", "submit", "--job-id", rec["id"], "--image", "img:1", "--gpus", "0",
              "--results-dir", str(tmp_path), "--", "true")
    assert out.rc == 1 and "exists already" in out.err and len(out.err_lines) == 1
    assert sum(c.argv[1] == "run" for c in fake.calls) == 1


def test_a_new_job_never_reuses_an_existing_folder(fake, cli, tmp_path):
    """--job-id of no record is refused; a folder that exists for an id is never taken over by a new record."""
    _engine(fake, lost=False)
    base = tmp_path / "results"
    (base / "custom-run-0000beef").mkdir(parents=True)
    out = cli("tao_docker.py", "submit", "--job-id", "custom-run-0000beef", "--image", "img:1", "--gpus", "0",
              "--results-dir", str(base), "--", "true")
    assert out.rc == 1 and "no job record" in out.err and records.list_records() == []
    assert not any(c.argv[1] == "run" for c in fake.calls)
