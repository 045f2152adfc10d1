"""A search's site checked on the real kubelets before anything is created: a helper Job of the trials' own image
on the shared PVC runs the one site rule (the journal's lock where the study will live, python3 3.10+ with numpy).
An image without python3 (the pinned busybox helper image) is refused in one line, with no sweep Job, ConfigMap or
record left; the search image passes and the gate says what was checked."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import k8s_verbs_support
from k8s_verbs_support import ON_REAL

import testclusters.kubernetes as lk
from taobank import pins
from testclusters.kubernetes import search_image

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s


def _submit(k8s, image: str, *extra: str, network: str = "dino"):
    return k8s.tao("submit", "--json", "--image", image, "--network-arch", network, "--action", "train",
                   "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "0", "--no-input-check",
                   "--command", "sh -c 'exit 0'", "--search", "random", "--trials", "2", "--kpi", "val_loss",
                   "--space", "train.optim.lr=loguniform(1e-5,1e-1)", *extra, check=False, timeout=400)


def test_an_image_without_python_is_refused_by_a_pod_of_it_and_nothing_is_left(k8s):
    image = str(pins.resolve("kubernetes.volume_job_image"))  # busybox: sh, no python3
    # a network no other test here submits: the namespace is shared with the tests running beside this one
    proc = _submit(k8s, image, network="rtdetr")
    assert proc.returncode != 0, proc.stdout
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "has no python3 of 3.10 or later with numpy" in line and "nothing was created" in line, line
    assert not list(Path(k8s.env["TAO_STATE_DIR"]).glob("*.json"))  # no record
    made = k8s.kjson("get", "jobs,configmaps", "-l", "tao-sweep")["items"]  # no sweep Job, table or bundle
    assert not [o for o in made if o["metadata"]["name"].startswith(("tao-search-rtdetr", "tao-sweep-rtdetr"))], made


def test_the_search_image_passes_and_the_gate_says_what_was_checked(k8s):
    image = search_image.ensure()
    proc = _submit(k8s, image)
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    k8s.ids += [j["id"] for j in done["jobs"]] + [done["sweep"]]
    assert "search site ok on the results volume (journal lock, the image's python3 with numpy" in done["gate"]
