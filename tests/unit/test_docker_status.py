"""Docker's state mapping and its one inspect for every job, against recorded engine answers."""
from __future__ import annotations

import json

import pytest

from taobank.core import platform
from taobank import records
from taobank.platforms.docker import observe
from taobank.states import State


@pytest.mark.parametrize("state, expect, reason", [
    ({"Status": "created"}, State.PENDING, None),
    ({"Status": "running", "Running": True}, State.RUNNING, None),
    ({"Status": "paused"}, State.RUNNING, None),
    ({"Status": "exited", "ExitCode": 0}, State.COMPLETE, None),
    ({"Status": "exited", "ExitCode": 3}, State.ERROR, "NonZeroExit"),
    ({"Status": "exited", "ExitCode": 137, "OOMKilled": True}, State.ERROR, "OOMKilled"),
    ({"Status": "exited", "ExitCode": 127, "Error": "OCI runtime create failed"}, State.ERROR, "EngineError"),
    (None, State.UNKNOWN, "ContainerGone"),
])
def test_container_state_to_bank_state(state, expect, reason):
    v = observe.classify(state, memory="8g")
    assert v.state == expect and v.reason == reason
    if reason == "OOMKilled":
        assert "8g" in v.message and v.err_class == "ERR_PROGRAM"


def test_an_infrastructure_line_in_the_log_makes_it_err_infra():
    v = observe.classify({"Status": "exited", "ExitCode": 1}, log_tail="RuntimeError: NVML: Driver/library version mismatch")
    assert v.err_class == "ERR_INFRA"


def _rec(jid: str) -> dict:
    rec = records.open_record("docker", "img:1", "custom", "run", "A", f"/tmp/r/{jid}", job_id=jid,
                              backend={"engine": "docker", "container": jid, "results_dir": f"/tmp/r/{jid}"})
    return records.mark(jid, State.PENDING, backend_ref="abc123def456")


def test_one_inspect_for_every_job_and_a_gone_one_is_unknown(fake):
    a, b, c = (_rec(j)["id"] for j in ("job-a-000001", "job-b-000002", "job-c-000003"))
    answer = [{"Name": "/job-a-000001", "Id": "x", "State": {"Status": "exited", "ExitCode": 0}},
              {"Name": "/job-b-000002", "Id": "y", "State": {"Status": "running", "Running": True}}]
    fake.on("docker", lambda call: call.argv[1:3] == ["container", "inspect"], json.dumps(answer), rc=1,
            stderr="Error: No such container: job-c-000003")
    fake.on("sh", lambda call: True, "")  # the status files of the local results folders (none yet)
    fake.on("docker", lambda call: call.argv[1] == "logs", "the end\n")
    fake.on("docker", lambda call: call.argv[1] == "rm", "")
    views = {v.id: v for v in platform.status("docker")}
    inspects = [call for call in fake.calls if call.program == "docker" and call.argv[1] == "container"]
    assert len(inspects) == 1
    # the job that ended has its logs saved once (the running one and the gone one do not)
    saved = [call.argv[-1] for call in fake.calls if call.program == "docker" and call.argv[1] == "logs"]
    assert saved == [a]
    # ... and its container removed with it, in one call (its saved configuration holds its secrets' values)
    assert [call.argv[1:] for call in fake.calls if call.program == "docker" and call.argv[1] == "rm"] == [["rm", "--", a]]
    assert views[a].state == "COMPLETE" and views[b].state == "RUNNING"
    assert views[c].state == "UNKNOWN" and "container is gone" in views[c].message


def test_no_engine_is_one_line(fake):
    _rec("job-a-000001")
    fake.on("docker", lambda call: True, "", rc=1,
            stderr="Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
    with pytest.raises(Exception) as exc:
        platform.status("docker")
    assert "no docker engine answers" in str(exc.value) and "nothing was done" in str(exc.value)
