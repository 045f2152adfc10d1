"""A Docker record whose container is gone, or whose results folder is not named after its job: every verb says so
in one line (the error branches read the typed record, never ``rec["id"]``), and so does the platform contract's
default refusal of a parent kept in object storage."""
from __future__ import annotations

import pytest

from taobank.core import platform
from taobank import records
from taobank.errors import TaoError
from taobank.states import State

JOB = "job-gone-000001"


def _record(results_dir: str, state: State = State.COMPLETE) -> str:
    records.open_record("docker", "img:1", "custom", "train", "A", results_dir, job_id=JOB,
                        backend={"engine": "docker", "container": JOB, "results_dir": results_dir})
    records.mark(JOB, State.RUNNING, backend_ref="abc123def456")
    if state != State.RUNNING:
        records.mark(JOB, state)
    return JOB


def _one_line(out) -> str:
    assert out.rc != 0, out
    assert "Traceback" not in out.err and len(out.err_lines) == 1, out
    return out.err_lines[0]


def test_logs_of_a_job_whose_container_is_gone_and_no_copy_was_saved(docker_fake, cli, tmp_path):
    jid = _record(str(tmp_path / "results" / JOB))
    docker_fake.on("docker", lambda call: call.argv[1] == "logs", "", rc=1, stderr=f"Error: No such container: {jid}")
    line = _one_line(cli("tao_jobs.py", "logs", jid))
    assert f"job {jid}: its container {jid} is gone" in line and "no copy of its logs was saved" in line


def test_following_the_logs_of_a_container_that_went_away(docker_fake, cli, tmp_path):
    jid = _record(str(tmp_path / "results" / JOB), State.RUNNING)
    docker_fake.on("docker", lambda call: call.argv[1:3] == ["logs", "--follow"], "", rc=1,
                   stderr=f"Error: No such container: {jid}")
    line = _one_line(cli("tao_jobs.py", "logs", jid, "--follow"))
    assert "is the container still there?" in line and f"tao_docker.py status {jid}" in line


@pytest.mark.parametrize("verb", [("artifacts",), ("fetch", "--to", "{to}"), ("prune", "--yes")])
def test_results_verbs_refuse_a_folder_not_named_after_the_job(docker_fake, cli, tmp_path, verb):
    jid = _record(str(tmp_path / "results" / "someone-elses"))
    argv = [w.replace("{to}", str(tmp_path / "into")) for w in verb]
    line = _one_line(cli("tao_jobs.py", argv[0], jid, *argv[1:]))
    assert f"job {jid}: its record names" in line and "not named after the job: refused" in line
    assert not [c for c in docker_fake.calls if c.program == "sh"]  # refused before the folder is read


@pytest.mark.parametrize("name", ["docker", "slurm"])
def test_the_default_lineage_fetch_refuses_a_parent_in_object_storage_in_one_line(fake, name):
    """Docker and SLURM keep the contract's default: a parent whose results are in S3 cannot be downloaded by
    their jobs."""
    jid = _record("s3://bucket/runs/" + JOB)
    with pytest.raises(TaoError) as exc:
        platform.get(name).lineage_fetch(platform.get(name).spec_type(), records.get(jid), "s3://bucket/runs/" + JOB, {"model.pth": "model.pth"})
    assert f"job {jid} keeps its results in s3://bucket/runs/{JOB}" in str(exc.value)
    assert "\n" not in str(exc.value)
