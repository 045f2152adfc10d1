"""A sweep's dry run against the local cluster: no kubectl call at all and nothing created, and the Jobs the
same sweep then creates for real (its one Indexed Job and trial table) are the ones it showed (the API server's copy, ids swapped)."""
from __future__ import annotations

import json

import pytest
import yaml
import k8s_verbs_support
from k8s_verbs_support import ON_KWOK

from taobank import pins

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s
BUSYBOX = str(pins.resolve("images.busybox"))
FLAGS = ["--image", BUSYBOX, "--network-arch", "dino", "--action", "train", "--gpus", "0", "--no-results", *ON_KWOK,
         "--args-json", json.dumps(["sh", "-c", "exit 0", "tao", "-e", "spec.yaml"]),
         "--sweep", "train.optim.lr=0.1,0.2,0.3", "--max-concurrent", "2"]


def kubectl_calls(k8s) -> list[list[str]]:
    return [argv for argv in k8s.calls() if argv and argv[0].endswith("kubectl")]


def test_the_sweep_preview_contacts_nothing_and_shows_the_indexed_job_the_submit_creates(k8s):
    shown = json.loads(k8s.tao("submit", *FLAGS, "--dry-run", "--json").stdout)
    assert kubectl_calls(k8s) == []  # not even a read
    assert k8s.kubectl("get", "jobs", "-l", "tao-sweep=preview-sweep", "-o", "name").stdout.strip() == ""
    assert [(t["trial"], t["overrides"]) for t in shown["trials"]] == \
        [(i, {"train.optim.lr": v}) for i, v in enumerate(("0.1", "0.2", "0.3"))]
    assert shown["sent"] == []
    docs = {d["name"].split()[0]: yaml.safe_load(d["text"]) for d in shown["shared"]}
    want, want_table = docs["Job"], docs["ConfigMap"]
    assert (want["spec"]["completions"], want["spec"]["parallelism"]) == (3, 2)
    done = json.loads(k8s.tao("submit", *FLAGS, "--json").stdout)
    k8s.ids += [j["id"] for j in done["jobs"]]

    def as_preview(obj: dict) -> dict:
        text = json.dumps(obj)
        for i, job in enumerate(done["jobs"]):
            text = text.replace(job["id"], f"preview-trial-{i}")
        return json.loads(text.replace(done["sweep"], "preview-sweep"))

    try:
        (made,) = [as_preview(j) for j in k8s.kjson("get", "jobs", "-l", f"tao-sweep={done['sweep']}")["items"]]
        for key in [k for k in want["spec"] if k not in ("template", "selector")]:  # the server adds defaults
            assert made["spec"].get(key) == want["spec"][key], (key, made["spec"].get(key), want["spec"][key])
        assert {k: made["metadata"]["labels"][k] for k in want["metadata"]["labels"]} == want["metadata"]["labels"]
        got, exp = made["spec"]["template"]["spec"]["containers"][0], want["spec"]["template"]["spec"]["containers"][0]
        for key in ("image", "command", "env", "volumeMounts"):
            assert got.get(key) == exp.get(key), key
        table = as_preview(k8s.kjson("get", "configmap", want_table["metadata"]["name"].replace(
            "preview-sweep", done["sweep"])))
        assert table["data"] == want_table["data"]
    finally:
        k8s.tao("cancel", "--sweep", done["sweep"], check=False)
