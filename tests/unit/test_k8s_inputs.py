"""Inputs checked before submit: which paths, the check Job, the refusal with the list (fake kubectl)."""
from __future__ import annotations

import json

import pytest

from fakeproc import echo_applied, items, node, k8s_cluster
from taobank.contract import SubmitOptions
from taobank.core import platform
from taobank import records
from taobank.errors import TaoError
from taobank.platforms.kubernetes.spec import KubernetesSpec
from taobank.platforms.kubernetes import gates

WS = [{"pvc": "data", "mount_path": "/data", "read_only": True}, {"pvc": "ws", "mount_path": "/results"}]


def test_paths_named_under_mounts_are_inputs_outputs_are_not():
    spec = {"image": "i", "mounts": WS, "inputs": ["/data/coco/annotations.json"],
            "args": ["dino", "train", "-e", "/data/specs/train.yaml", "dataset.root=/data/coco",
                     "results_dir=/results/run1", "output_dir=/data/out", "/etc/hosts", "/data/*.json",
                     "/results/r/{id}/x", "/data/coco"]}
    found = gates.input_paths(KubernetesSpec.from_dict(spec), "/results/r")
    assert found.required == ["/data/coco/annotations.json", "/data/specs/train.yaml", "/data/coco"]
    assert found.possible == []  # the bare /data/coco is already required through dataset.root
    cmd = {"image": "i", "mounts": WS, "command": "cat /data/s.yaml; dino train -e '/data/a b.yaml' > /data/log.txt"}
    found = gates.input_paths(KubernetesSpec.from_dict(cmd), "/results/x")
    assert (found.required, found.possible) == (["/data/a b.yaml"], ["/data/s.yaml"])
    with pytest.raises(TaoError, match="input /elsewhere/x is on no mounted volume"):
        gates.input_paths(KubernetesSpec(image="i", mounts=WS, inputs=["/elsewhere/x"]), None)


@pytest.mark.parametrize("command,required,possible", [
    # outputs named as plain words (a results flag, mkdir, tee) are only possible inputs: never refused
    ("tao model dino train -e /data/t.yaml -r /results/run7", ["/data/t.yaml"], ["/results/run7"]),
    ("mkdir -p /data/out && python train.py --output_dir /data/out", [], ["/data/out"]),
    ("python t.py | tee /data/run.log", [], ["/data/run.log"]),
    ("python t.py --checkpoint-dir /data/ckpt --config /data/c.yaml", ["/data/c.yaml"], ["/data/ckpt"]),
    ("train spec_file=/data/s.yaml train.checkpoint_dir=/data/ck log_file=/data/l", ["/data/s.yaml"], []),
])
def test_only_plain_inputs_are_required(command, required, possible):
    found = gates.input_paths(KubernetesSpec(image="i", mounts=WS, command=command), None)
    assert (found.required, found.possible) == (required, possible)


def test_verdict_reads_the_check_output():
    assert gates.input_verdict(["/a", "/b", "/c"], "ok /a\nmissing /b\n") == (["/b"], ["/c"])


def _cluster(fake, output: str) -> None:
    k8s_cluster(fake)
    done = {"metadata": {"name": "tao-vol-x-abcde"}, "status": {"phase": "Succeeded", "containerStatuses": [
        {"name": "check", "state": {"terminated": {"exitCode": 0}}}]}}
    fake.kubectl("get", "pods", "-l", answer=items([done]))
    fake.kubectl("logs", answer=output)


def test_a_missing_input_is_refused_with_the_list_before_any_record(fake):
    _cluster(fake, "ok /data/specs/train.yaml\nmissing /data/coco\n")
    spec = {"image": "i", "gpus": 1, "mounts": WS, "args": ["dino", "train", "-e", "/data/specs/train.yaml",
                                                             "model.pretrained_backbone_path=/data/coco"]}
    with pytest.raises(TaoError, match=r"input path\(s\) missing on the job's volumes: /data/coco \(checked"):
        platform.get("kubernetes").submit(spec, SubmitOptions())
    assert records.list_records() == []
    (check,) = [json.loads(c.stdin)["items"][0] for c in fake.kubectl_calls("create")
                if "--dry-run=server" not in c.words]
    pod = check["spec"]["template"]["spec"]
    assert check["metadata"]["name"].startswith("tao-vol-") and "tao-job-id" not in check["metadata"]["labels"]
    assert "resources" in pod["containers"][0] and "nvidia.com/gpu" not in json.dumps(pod)  # no GPU
    assert pod["containers"][0]["command"][4:] == ["/data/specs/train.yaml", "/data/coco"]
    assert all(m.get("readOnly") for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] != "/dev/shm")
    asked = [c.words[2:4] for c in fake.kubectl_calls("auth", "can-i")]
    assert asked == [["list", "pods"], ["get", "pods/log"]]  # create jobs: the server dry run authorized it


def test_inputs_found_let_the_submit_go_on_and_say_so(fake):
    _cluster(fake, "ok /data/specs/train.yaml\n")
    spec = {"image": "i", "gpus": 1, "mounts": WS, "args": ["dino", "train", "-e", "/data/specs/train.yaml"]}
    view = platform.get("kubernetes").submit(spec, SubmitOptions())
    assert "inputs: 1 path(s) found on the volumes" in view.extra["gate"]


def test_a_missing_possible_output_only_warns(fake):
    _cluster(fake, "ok /data/specs/train.yaml\nmissing /data/out\n")
    spec = {"image": "i", "gpus": 1, "mounts": WS,
            "command": "mkdir -p /data/out && dino train -e /data/specs/train.yaml"}
    view = platform.get("kubernetes").submit(spec, SubmitOptions())
    assert "warning: not found on the volumes: /data/out (the command names them" in view.extra["gate"]
    assert "; " not in view.extra["gate"].split("warning: ", 1)[1]  # the helper shows it as one warning
    assert view.state == "PENDING"


def test_a_helper_pod_that_cannot_run_warns_instead_of_blocking(fake, monkeypatch):
    from taobank.platforms.kubernetes import volume_job

    def stuck(*a, **k):
        raise TaoError("checking the inputs on the volumes: the helper Job tao-vol-1 did not finish in 120s "
                       "(ImagePullBackOff)")
    monkeypatch.setattr(volume_job, "run", stuck)
    _cluster(fake, "")
    spec = {"image": "i", "gpus": 1, "mounts": WS, "args": ["dino", "train", "-e", "/data/specs/train.yaml"]}
    view = platform.get("kubernetes").submit(spec, SubmitOptions())
    assert "warning: inputs not checked (checking the inputs" in view.extra["gate"] and "--no-input-check" in \
        view.extra["gate"]


def test_no_input_check_skips_the_helper_and_its_permissions(fake):
    _cluster(fake, "missing /data/specs/train.yaml\n")
    spec = {"image": "i", "gpus": 1, "mounts": WS, "check_inputs": False,
            "args": ["dino", "train", "-e", "/data/specs/train.yaml"]}
    view = platform.get("kubernetes").submit(spec, SubmitOptions())
    assert "inputs" not in view.extra["gate"]
    assert fake.kubectl_calls("auth", "can-i") == []  # no input check: the dry run answers for the Job
