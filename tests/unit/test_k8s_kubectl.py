"""The kubectl client always carries namespace and context; output parsing."""
from __future__ import annotations

import pytest

from taobank.records import Record
from taobank.errors import TaoError
from taobank.platforms.kubernetes.kubectl import Kubectl, json_objects


def test_namespace_and_context_from_env(monkeypatch):
    monkeypatch.setenv("TAO_K8S_NAMESPACE", "tao-jobs")
    monkeypatch.setenv("TAO_K8S_CONTEXT", "prod-east")
    assert Kubectl().argv("get", "jobs") == ["kubectl", "--context", "prod-east", "-n", "tao-jobs", "get", "jobs"]


def test_defaults_when_unset(monkeypatch):
    monkeypatch.delenv("TAO_K8S_NAMESPACE", raising=False)
    monkeypatch.delenv("TAO_K8S_CONTEXT", raising=False)
    assert Kubectl().argv("version") == ["kubectl", "-n", "default", "version"]


def _record(backend: dict) -> Record:
    return Record(id="job", platform="kubernetes", state="RUNNING", image="i", network_arch="dino", action="train",
                  results_dir="/r", backend=backend, transitions=(), attempt=1, created_at="", updated_at="",
                  backend_ref="ns1/job")


def test_record_backend_wins_over_env(monkeypatch):
    monkeypatch.setenv("TAO_K8S_NAMESPACE", "elsewhere")
    monkeypatch.setenv("TAO_K8S_CONTEXT", "other")
    rec = _record({"namespace": "ns1", "context": "ctx1"})
    assert Kubectl.for_record(rec).argv()[1:5] == ["--context", "ctx1", "-n", "ns1"]
    # a record submitted without a context keeps none (the env's context is not borrowed)
    rec = _record({"namespace": "ns1", "context": ""})
    assert Kubectl.for_record(rec).argv() == ["kubectl", "-n", "ns1"]


@pytest.mark.parametrize("bad", ["Bad_NS", "a b", "-x", "x" * 64])
def test_invalid_namespace_refused(bad):
    with pytest.raises(TaoError, match="namespace"):
        Kubectl(bad)


def test_json_objects_accepts_object_list_and_stream():
    assert json_objects('{"kind": "Job"}') == [{"kind": "Job"}]
    assert json_objects('{"kind": "List", "items": [{"a": 1}, {"b": 2}]}') == [{"a": 1}, {"b": 2}]
    assert json_objects('{"a": 1}\n{"b": 2}\n') == [{"a": 1}, {"b": 2}]
    with pytest.raises(TaoError):
        json_objects("Error from server")


def test_created_objects_read_back_byte_for_byte():
    """What ``kubectl create -o json`` echoes is checked against what was staged (a ConfigMap's sha256): a newline,
    a tab or a CR in the file must come back as it is, not escaped for a terminal."""
    text = '{"kind": "ConfigMap", "data": {"spec.yaml": "a: 1\\r\\n\\tb: \\u001b[31m\\n"}}'
    (cm,) = json_objects(text)
    assert cm["data"]["spec.yaml"] == "a: 1\r\n\tb: \x1b[31m\n"
