"""A resumed submit whose first run died after creating the Job: the owned objects it lacks are created."""
from __future__ import annotations

import json

import pytest

from fakeproc import echo_applied, items, job, k8s_record
from taobank import records
from taobank.errors import TaoError
from taobank.contract import SubmitOptions
from taobank.platforms.kubernetes import render
from taobank.platforms.kubernetes.adapter import PLATFORM

MULTI = {"image": "nvcr.io/nvidia/tao/tao-toolkit:x", "command": "echo hi", "gpus": 1, "nodes": 2,
         "mounts": [{"pvc": "ws", "mount_path": "/results"}]}
CONFIG = {"text": "epochs: 3\n", "mount_path": "/cfg/spec.yaml"}


def needs_creds(jid: str) -> dict:
    """A pod template whose main container reads the per-job credentials Secret."""
    return {"containers": [{"name": "main", "envFrom": [{"secretRef": {"name": render.cred_secret_name(jid)}}]}]}


def interrupted(fake, *, template=None, existing: dict | None = None) -> tuple[str, dict]:
    rec = k8s_record(launched=False)
    jid = rec["id"]
    the_job = job(jid, "uid-live")
    if template:
        the_job["spec"]["template"] = {"spec": template(jid)}
    fake.kubectl("get", "jobs", "-l", f"tao-job-id={jid}", answer=items([the_job]))
    for kind in ("secrets", "services", "configmaps"):
        fake.kubectl("get", kind, answer=items((existing or {}).get(kind, [])))
    fake.kubectl("create", answer=echo_applied())
    return jid, the_job


def created(fake) -> list[dict]:
    return [json.loads(c.stdin) for c in fake.kubectl_calls("create")]


def test_the_missing_service_and_configmap_are_created_owned_by_the_job(fake, state_dir):
    jid, _ = interrupted(fake)
    view = PLATFORM.submit(MULTI, SubmitOptions(job_id=jid, config=CONFIG)).to_dict()
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": jid, "uid": "uid-live"}]
    made = {o["kind"]: o for o in created(fake)}
    assert set(made) == {"Service", "ConfigMap"}  # never a second Job
    assert all(o["metadata"]["ownerReferences"] == owner for o in made.values())
    assert made["ConfigMap"]["data"] == {"config": "epochs: 3\n"}
    assert view["reconciled"] is True and "created what it lacked" in view["gate"]
    backend = records.load(jid)["backend"]
    assert f"service/{jid}" in backend["owned"] and f"configmap/{render.config_map_name(jid)}" in backend["owned"]


def test_objects_that_exist_are_left_alone_and_already_exists_is_no_error(fake, state_dir):
    jid, _ = interrupted(fake)
    fake.kubectl("get", "services", answer=items([{"kind": "Service", "metadata": {"name": jid}}]))
    fake.kubectl("create", rc=1, stderr=f'Error from server (AlreadyExists): configmaps "{render.config_map_name(jid)}" already exists')
    view = PLATFORM.submit(MULTI, SubmitOptions(job_id=jid, config=CONFIG)).to_dict()
    assert [o["kind"] for o in created(fake)] == ["ConfigMap"]  # the Service was seen, not sent again
    assert view["reconciled"] is True and records.load(jid)["backend"]["uid"] == "uid-live"


def test_a_missing_credentials_secret_is_created_from_the_resumed_inputs(fake, state_dir, monkeypatch):
    jid, _ = interrupted(fake, template=needs_creds)
    monkeypatch.setenv("WANDB_API_KEY", "k-123")
    PLATFORM.submit({**MULTI, "nodes": 1}, SubmitOptions(job_id=jid, secret_env=("WANDB_API_KEY",)))
    (secret,) = [o for o in created(fake) if o["kind"] == "Secret"]
    assert secret["metadata"]["name"] == render.cred_secret_name(jid)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-live"


def test_a_missing_secret_without_its_values_says_what_to_pass(fake, state_dir):
    jid, _ = interrupted(fake, template=needs_creds)
    with pytest.raises(TaoError, match="resume again with the same --secret-env/--secrets-file") as err:
        PLATFORM.submit({**MULTI, "nodes": 1}, SubmitOptions(job_id=jid))
    assert "\n" not in str(err.value)
    assert records.load(jid)["backend"]["uid"] == "uid-live"  # the record is bound to the Job all the same
