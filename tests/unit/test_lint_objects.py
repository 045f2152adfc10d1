"""Manifests are linted as the objects sent, never as a YAML dump folded near 80 columns."""
from __future__ import annotations

import pytest

from taobank import redact
from taobank.errors import TaoError
from taobank.render import dump_yaml

SECRET = "s3cr3tVALUE42xyz"
#: where a fold between the credential word and its value hid the value from the line rules
SHAPES = [("tool --password ", ""), ('curl -H "Authorization: Bearer ', '" https://x'), ("DB_PASSWORD = '", "'"),
          ("mysql -u root -p", " -e 'select 1'"), ("--from-literal=HF_TOKEN=", "")]


def _job(arg: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "tao-x"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "busybox", "command": ["bash", "-c"], "args": [arg]}]}}}}


def test_folded_dump_hides_what_the_objects_show():
    folded = 0
    for shape, tail in SHAPES:
        for pad in range(0, 100):
            objs = [_job("echo " + "x" * pad + " && " + shape + SECRET + tail + " && echo done")]
            if not redact.lint_text(dump_yaml(objs), "m"):
                folded += 1  # the control: the dumped text was folded between the word and the value
            findings = redact.lint_objects(objs, "manifest")
            assert findings, (shape, pad)
            assert all(SECRET[:6] not in str(f) for f in findings)
    assert folded > 0, "no placement folded: the control no longer shows the fault"


def test_lint_objects_reads_every_string_and_the_structure():
    env = [{"name": "HF_TOKEN", "value": SECRET}]
    script = "set -e\nexport NGC_API_KEY=" + SECRET + "\npython train.py\u00e9"  # non-ASCII: a JSON/YAML escape
    objs = [{"kind": "Pod", "spec": {"containers": [{"name": "a", "env": env}]}},
            {"kind": "Pod", "spec": {"containers": [{"name": "b", "args": [script]}]}},
            {"kind": "Secret", "metadata": {"name": "s"}, "stringData": {"x": SECRET}},
            {"kind": "Pod", "spec": {"containers": [{"name": "c", "args": ["--api-key", SECRET]}]}}]
    rules = {f.rule for f in redact.lint_objects(objs, "m")}
    assert {"k8s-env-literal", "credential-assignment", "secret-manifest-data", "password-flag"} <= rules
    clean = [{"kind": "Pod", "spec": {"containers": [{"name": "a", "env": [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "tao-creds-x", "key": "HF_TOKEN"}}},
        {"name": "HF_TOKEN_PATH", "value": "/run/secrets/hf"}],
        "args": ["--token-file", "/run/secrets/t", "bash -c 'export HF_TOKEN=$(cat /run/secrets/hf)'"]}]}}]
    assert redact.lint_objects(clean, "m") == []
    # the string findings name where the string sits
    f = [f for f in redact.lint_objects(objs[1:2], "the job") if "args" in f.file]
    assert f and f[0].file == "the job doc[0].spec.containers[0].args[0]" and f[0].line == 2


@pytest.mark.parametrize("pad", range(0, 100, 7))
def test_submit_refuses_a_credential_the_dump_would_fold(state_dir, pad):
    from taobank import run
    from taobank.contract import SubmitOptions
    from taobank.platforms.kubernetes.adapter import PLATFORM

    before = len(run.CALLS)
    spec = {"image": "busybox", "command": "echo " + "y" * pad + " && tool --password " + SECRET, "no_results": True}
    with pytest.raises(TaoError, match="looks like a secret") as exc:
        PLATFORM.submit(spec, SubmitOptions(namespace="tao-jobs"))
    assert SECRET[:4] not in str(exc.value)
    assert len(run.CALLS) == before  # refused before any kubectl call
