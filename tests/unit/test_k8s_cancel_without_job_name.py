"""cancel of a Kubernetes record that holds the Job's UID but not its name (a record bound by hand, or by an older
bank): the Job is found by the job-id label, as for an interrupted submit, never asked for by the name "None"."""
from __future__ import annotations

import json

from fakeproc import items, job, pod
from taobank.core import platform
from taobank import records


def test_cancel_finds_the_job_by_its_label_when_the_record_names_no_job(fake):
    rec = records.open_record("kubernetes", "nvcr.io/nvidia/tao/tao-toolkit:x", "dino", "train", "A", "/results",
                              backend={"namespace": "default", "context": ""})
    jid = rec["id"]
    records.mark(jid, "RUNNING", backend_ref=f"default/{jid}", backend={"uid": f"uid-{jid}", "namespace": "default"})
    fake.kubectl("get", "jobs", "-l", f"tao-job-id={jid}", answer=items([job(jid, f"uid-{jid}")]))
    fake.kubectl("get", "job", jid, answer=job(jid, f"uid-{jid}"))
    fake.kubectl("get", "pods", "-l", answer=items([pod(jid, f"uid-{jid}")]))
    fake.kubectl("logs", answer="last words\n")
    fake.kubectl("delete", "--raw", answer="{}")
    fake.kubectl("delete", "secret,service,configmap", answer="")
    views, errors = platform.cancel("kubernetes", [jid])
    assert errors == [] and views[0].state == "CANCELED" and views[0].extra["deleted"] is True
    (raw,) = fake.kubectl_calls("delete", "--raw")
    assert raw.words[2] == f"/apis/batch/v1/namespaces/default/jobs/{jid}"
    assert json.loads(raw.stdin)["preconditions"] == {"uid": f"uid-{jid}"}
