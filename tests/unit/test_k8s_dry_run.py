"""``tao_k8s.py submit --dry-run`` shows what submit creates: the same Secret names and references, the
Secret objects with every value masked, and the same refusals; it contacts nothing and reads no value."""
from __future__ import annotations

import base64
import json

import pytest
import yaml

from fakeproc import k8s_record
from test_orchestration_k8s import cluster
from taobank.contract import SubmitOptions
from taobank.core import platform
from taobank import records
from taobank.platforms.kubernetes import render
from taobank.platforms.kubernetes.render import MASKED

HF = "hf_dryrunvalue7f3a9c1d5e0b"
AWS = "aws-dry-run-secret-4c2e9a7b1d"
NGC = "ngc-dry-run-key-8e1f5a3c7b"
TIER_C = ["--storage-tier", "C", "--results-dir", "s3://bucket/runs", "--no-input-check"]
BASE = ["submit", "--image", "nvcr.io/nvidia/tao/tao-toolkit:x", "--command", "echo hi", "--no-results"]


@pytest.fixture()
def creds(monkeypatch):
    for name, value in (("HF_TOKEN", HF), ("AWS_ACCESS_KEY_ID", "AKIA" + AWS[:16].upper()),
                        ("AWS_SECRET_ACCESS_KEY", AWS), ("NGC_KEY", NGC)):
        monkeypatch.setenv(name, value)


def objects(text: str) -> dict[str, dict]:
    """The dry run's documents by kind/name."""
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in yaml.safe_load_all(text) if o}


def pod_spec(job: dict) -> dict:
    return job["spec"]["template"]["spec"]


def never_shown(text: str) -> None:
    for value in (HF, AWS, NGC):
        for form in (value, base64.b64encode(value.encode()).decode()):
            assert form not in text
    assert "$oauthtoken" not in text


def test_tier_c_with_its_s3_credentials_passes_the_dry_run_as_it_passes_submit(fake, cli, creds):
    out = cli("tao_k8s.py", *BASE[:-1], *TIER_C, "--secret-env", "AWS_ACCESS_KEY_ID", "--secret-env",
              "AWS_SECRET_ACCESS_KEY", "--dry-run")
    assert out.rc == 0, out
    docs = objects(out.out)
    cred = render.cred_secret_name("tao-render-preview")
    job = docs["Job/tao-render-preview"]
    assert all(c.get("envFrom") == [{"secretRef": {"name": cred}}]
               for c in pod_spec(job)["containers"] + pod_spec(job)["initContainers"])
    assert docs[f"Secret/{cred}"]["data"] == {"AWS_ACCESS_KEY_ID": MASKED, "AWS_SECRET_ACCESS_KEY": MASKED}
    never_shown(out.out)
    assert fake.calls == [] and records.list_records() == []


def test_the_preview_references_and_shows_the_secrets_submit_creates_values_masked(fake, cli, creds):
    out = cli("tao_k8s.py", *BASE, "--secret-env", "HF_TOKEN", "--ngc-pull-secret", "--dry-run")
    assert out.rc == 0, out
    docs = objects(out.out)
    cred, pull = render.cred_secret_name("tao-render-preview"), render.pull_secret_name("tao-render-preview")
    assert list(docs) == ["Job/tao-render-preview", f"Secret/{cred}", f"Secret/{pull}"]  # submit's create order
    pod = pod_spec(docs["Job/tao-render-preview"])
    assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": cred}}]
    assert pod["imagePullSecrets"] == [{"name": pull}]
    assert docs[f"Secret/{cred}"]["data"] == {"HF_TOKEN": MASKED}
    assert docs[f"Secret/{pull}"]["type"] == "kubernetes.io/dockerconfigjson"
    assert docs[f"Secret/{pull}"]["data"] == {".dockerconfigjson": MASKED}
    never_shown(out.out)
    js = cli("tao_k8s.py", *BASE, "--secret-env", "HF_TOKEN", "--ngc-pull-secret", "--dry-run", "--json")
    assert js.rc == 0 and objects(json.loads(js.out)["manifest"]) == docs
    never_shown(js.out)
    assert fake.calls == [] and records.list_records() == []


def test_the_preview_job_is_the_job_submit_creates(fake, creds):
    rec = k8s_record(launched=False)  # tao_job_record.py open: the id both runs use
    options = SubmitOptions(job_id=rec["id"], secret_env=("HF_TOKEN",), ngc_pull_secret=True)
    spec = {"image": "nvcr.io/nvidia/tao/tao-toolkit:x", "command": "echo hi", "no_results": True, "gpus": 1}
    kube = platform.get("kubernetes")
    preview = list(yaml.safe_load_all(kube.preview(kube.typed_spec(spec), options)))
    assert fake.calls == []
    cluster(fake)
    fake.kubectl("get", "jobs", "-l", answer={"items": []})
    platform.get("kubernetes").submit(spec, options)
    sent = [json.loads(c.stdin) for c in fake.kubectl_calls("create") if "--dry-run=server" not in c.words]
    created = [o for body in sent for o in (body.get("items") or [body])]
    assert [o["kind"] for o in created] == [o["kind"] for o in preview] == ["Job", "Secret", "Secret"]
    assert created[0] == preview[0]  # the Job, byte for byte
    for made, shown in zip(created[1:], preview[1:]):
        assert shown["metadata"]["name"] == made["metadata"]["name"] and shown["type"] == made["type"]
        assert set(shown["data"]) == set(made["data"]) and set(shown["data"].values()) == {MASKED}


def test_the_dry_run_refuses_what_submit_refuses_without_showing_values(fake, cli, creds, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    unset = cli("tao_k8s.py", *BASE, "--secret-env", "HF_TOKEN", "--dry-run")
    assert unset.rc == 1 and "HF_TOKEN is not set in the environment" in unset.err and len(unset.err_lines) == 1
    monkeypatch.delenv("NGC_KEY")
    no_key = cli("tao_k8s.py", *BASE, "--ngc-pull-secret", "--dry-run")
    assert no_key.rc == 1 and "needs NGC_KEY" in no_key.err
    no_creds = cli("tao_k8s.py", *BASE[:-1], *TIER_C, "--dry-run")
    assert no_creds.rc == 1 and "needs S3 credentials" in no_creds.err
    assert fake.calls == []


def test_a_secrets_file_shows_its_keys_never_its_values(fake, cli, tmp_path):
    f = tmp_path / "job.env"
    f.write_text(f"HF_TOKEN={HF}\nexport AWS_SECRET_ACCESS_KEY='{AWS}'\n")
    f.chmod(0o600)
    out = cli("tao_k8s.py", *BASE, "--secrets-file", str(f), "--dry-run")
    assert out.rc == 0, out
    secret = objects(out.out)[f"Secret/{render.cred_secret_name('tao-render-preview')}"]
    assert secret["data"] == {"HF_TOKEN": MASKED, "AWS_SECRET_ACCESS_KEY": MASKED}
    never_shown(out.out)
    f.chmod(0o644)
    loose = cli("tao_k8s.py", *BASE, "--secrets-file", str(f), "--dry-run")
    assert loose.rc == 1 and "readable by others" in loose.err
