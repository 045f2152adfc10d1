"""Final logs are saved beside the record by ONE core helper that redacts: a credential a job printed does not
outlive the job in a plain file, on Docker as on Kubernetes."""
from __future__ import annotations

import json

import pytest

from taobank.core import jobfiles, platform
from taobank import records
from taobank.platforms.docker import engine as eng, logs as docker_logs
from taobank.errors import TaoError
from taobank.states import State

TOKEN = "hf_abcdEFGHijklMNOPqrstUVWXyz012345"


def test_the_core_helper_redacts_text_and_streams(state_dir):
    _rec("job-a-000001")
    path = jobfiles.save_logs("job-a-000001", "logs.txt", f"epoch 1\nlogin with {TOKEN}\n")
    assert TOKEN not in path.read_text() and "epoch 1" in path.read_text() and oct(path.stat().st_mode)[-3:] == "600"
    path = jobfiles.save_logs("job-a-000001", "s.json", {"stdout": f"token={TOKEN}\n", "stderr": "ok\n"})
    data = json.loads(path.read_text())
    assert TOKEN not in path.read_text() and data["stderr"] == "ok\n"


def _rec(jid: str) -> dict:
    rec = records.open_record("docker", "img:1", "custom", "run", "A", f"/tmp/r/{jid}", job_id=jid,
                              backend={"engine": "docker", "container": jid, "results_dir": f"/tmp/r/{jid}"})
    return records.mark(jid, State.PENDING, backend_ref="abc123def456")


def test_docker_saves_the_finished_jobs_logs_redacted_and_logs_shows_that_copy(fake):
    rec = _rec("job-a-000001")
    fake.on("docker", lambda c: c.argv[1] == "logs", f"step 1\nexport HF_TOKEN={TOKEN}\n", stderr=f"warn {TOKEN}\n")
    docker_logs.save(records.Record.of(rec), eng.Engine("docker"))
    saved = (records.artifact_dir(rec["id"]) / docker_logs.SAVED).read_text()
    assert TOKEN not in saved and "step 1" in saved
    fake.on("docker", lambda c: c.argv[1] == "logs", "", rc=1, stderr="Error: No such container: job-a-000001")
    got = platform.get("docker").read_logs(records.get(rec["id"]), tail=50)
    assert got.source == "saved" and "step 1" in got.sections["stdout"] and TOKEN not in json.dumps(got.sections)


def test_kubernetes_saves_through_the_same_helper(state_dir, monkeypatch):
    from taobank.platforms.kubernetes import logs as k8s_logs

    _rec("job-a-000001")
    seen = []
    real = jobfiles.save_logs
    monkeypatch.setattr(k8s_logs, "format_logs", lambda kube, pods, tail, **kw: f"rank 0 {TOKEN}\n")
    monkeypatch.setattr(jobfiles, "save_logs", lambda *a: seen.append(a[:2]) or real(*a))
    path = k8s_logs.save_final_logs(None, records.get("job-a-000001"), [{"metadata": {"name": "p"}}])
    assert [(getattr(job, "id", job), name) for job, name in seen] == [("job-a-000001", "logs.txt")]
    text = open(path).read()
    assert text.startswith("rank 0 ") and TOKEN not in text


def test_docker_reads_again_a_tail_whose_first_read_failed_and_a_refused_folder_is_said(fake):
    """The tail a failure's classification read is kept only when that read worked; a job whose folder is not a
    plain folder is one line, as saving it alone is (its logs are never dropped unsaid)."""
    from taobank.run import Result

    rec = records.Record.of(_rec("job-a-000002"))
    fake.on("docker", lambda c: c.argv[1] == "logs", "epoch 3\n")
    docker_logs.save_many([(rec, eng.Engine("docker"))], {rec.id: Result([], 1, "", "engine busy")})
    saved = json.loads((records.artifact_dir(rec) / docker_logs.SAVED).read_text())
    assert saved["stdout"] == "epoch 3\n"
    other = records.Record.of(_rec("job-a-000003"))
    folder = records.state_dir() / f"{other.id}.d"
    folder.write_text("not a folder")
    with pytest.raises(TaoError, match="not a plain folder"):
        docker_logs.save_many([(other, eng.Engine("docker"))])
