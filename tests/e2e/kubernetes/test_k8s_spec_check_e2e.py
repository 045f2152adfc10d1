"""The spec check on the real Kubernetes cluster: a DINO submit with a misspelt TAO key is refused in one line
naming the real key before anything is created (no kubectl call that creates, no Job, no record); a spec on the
job's volume cannot be read here, which is said, and its overrides are still checked."""
from __future__ import annotations

import json

import pytest
from k8s_verbs_support import ON_KWOK, k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk
from taobank import pins

BUSYBOX_IMAGE = pins.resolve("images.busybox")

pytestmark = pytest.mark.e2e


def test_a_dino_submit_with_a_misspelt_key_is_refused_in_one_line(k8s):
    proc = k8s.tao("submit", "--image", BUSYBOX_IMAGE, "--network-arch", "dino", "--action", "train", "--gpus", "1",
                   "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_KWOK, "--command",
                   "dino train -e /results/specs/train.yaml train.num_epoch=10", check=False)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: train.num_epoch: ") and \
        "did you mean train.num_epochs?" in lines[0], proc.stderr
    assert not list((k8s.call_log.parent / "state").glob("*.json")), "a record was opened"
    made = [c for c in k8s.calls() if any(f'"{w}"' in json.dumps(c) for w in ("create", "apply"))]
    assert not made, made
    jobs = k8s.kjson("get", "jobs", "-l", "tao-job-id")
    assert not [j for j in jobs.get("items", []) if "num_epoch=10" in str(j)]
