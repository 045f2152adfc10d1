"""Inputs checked before submit: which paths, the check Job, the refusal with the list (fake kubectl)."""
from __future__ import annotations

import json

import pytest

from fakeproc import echo_applied, items, node
from taobank import platform, records
from taobank.errors import TaoError
from taobank.kubernetes import inputs

WS = [{"pvc": "data", "mount_path": "/data", "read_only": True}, {"pvc": "ws", "mount_path": "/results"}]


def test_paths_named_under_mounts_are_inputs_outputs_are_not():
    spec = {"image": "i", "mounts": WS, "inputs": ["/data/coco/annotations.json"],
            "args": ["dino", "train", "-e", "/data/specs/train.yaml", "dataset.root=/data/coco",
                     "results_dir=/results/run1", "output_dir=/data/out", "/etc/hosts", "/data/*.json",
                     "/results/r/{id}/x", "/data/coco"]}
    assert inputs.paths(spec, "/results/r") == ["/data/coco/annotations.json", "/data/specs/train.yaml", "/data/coco"]
    cmd = {"image": "i", "mounts": WS, "command": "cat /data/s.yaml; dino train -e '/data/a b.yaml' > /data/log.txt"}
    assert inputs.paths(cmd, "/results/x") == ["/data/s.yaml", "/data/a b.yaml"]
    with pytest.raises(TaoError, match="input /elsewhere/x is on no mounted volume"):
        inputs.paths({"image": "i", "mounts": WS, "inputs": ["/elsewhere/x"]}, None)


def test_verdict_reads_the_check_output():
    assert inputs.verdict(["/a", "/b", "/c"], "ok /a\nmissing /b\n") == (["/b"], ["/c"])


def _cluster(fake, output: str) -> None:
    fake.kubectl("get", "nodes", answer=items([node("gpu-0", 8)]))
    fake.kubectl("get", "pods", "--all-namespaces", answer=items([]))
    fake.kubectl("auth", "can-i", answer="yes\n")
    fake.kubectl("create", answer=echo_applied())
    fake.kubectl("version", answer={"serverVersion": {"gitVersion": "v1.34.4"}})
    done = {"metadata": {"name": "tao-vol-x-abcde"}, "status": {"phase": "Succeeded", "containerStatuses": [
        {"name": "check", "state": {"terminated": {"exitCode": 0}}}]}}
    fake.kubectl("get", "pods", "-l", answer=items([done]))
    fake.kubectl("logs", answer=output)


def test_a_missing_input_is_refused_with_the_list_before_any_record(fake):
    _cluster(fake, "ok /data/specs/train.yaml\nmissing /data/coco\n")
    spec = {"image": "i", "gpus": 1, "mounts": WS, "args": ["dino", "train", "-e", "/data/specs/train.yaml",
                                                             "dataset.root=/data/coco"]}
    with pytest.raises(TaoError, match=r"input path\(s\) missing on the job's volumes: /data/coco \(checked"):
        platform.get("kubernetes").submit(spec, {})
    assert records.list_records() == []
    (check,) = [json.loads(c.stdin)["items"][0] for c in fake.kubectl_calls("create")
                if "--dry-run=server" not in c.words]
    pod = check["spec"]["template"]["spec"]
    assert check["metadata"]["name"].startswith("tao-vol-") and "tao-job-id" not in check["metadata"]["labels"]
    assert "resources" in pod["containers"][0] and "nvidia.com/gpu" not in json.dumps(pod)  # no GPU
    assert pod["containers"][0]["command"][4:] == ["/data/specs/train.yaml", "/data/coco"]
    assert all(m.get("readOnly") for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] != "/dev/shm")
    asked = [c.words[2:4] for c in fake.kubectl_calls("auth", "can-i")]
    assert asked == [["create", "jobs"], ["list", "pods"], ["get", "pods/log"]]


def test_inputs_found_let_the_submit_go_on_and_say_so(fake):
    _cluster(fake, "ok /data/specs/train.yaml\n")
    spec = {"image": "i", "gpus": 1, "mounts": WS, "args": ["dino", "train", "-e", "/data/specs/train.yaml"]}
    view = platform.get("kubernetes").submit(spec, {})
    assert "inputs: 1 path(s) found on the volumes" in view.extra["gate"]
