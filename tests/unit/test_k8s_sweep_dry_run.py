"""A Kubernetes sweep's ``--dry-run --check`` asks the server's dry run of the one create its submit makes (its
Indexed Job, suspended: that create is the submit's own server check, after the trial records opened), and refuses
as that create is refused, before any record; the submit's calls stay as they were."""
from __future__ import annotations

import json

from fakeproc import k8s_cluster
from taobank import records
from taobank.campaign import sweeps
from taobank.contract import SubmitOptions

SWEEP_SPEC = {"image": "img:1", "args": ["python", "train.py"], "gpus": 1,
              "mounts": [{"pvc": "ws", "mount_path": "/results"}]}
TRIALS = [{"train.optim.lr": "0.1"}, {"train.optim.lr": "0.2"}]


def _server_dry_runs(fake) -> list:
    return [c for c in fake.kubectl_calls("create") if "--dry-run=server" in c.words]


def test_a_sweeps_dry_run_asks_the_server_about_the_create_its_submit_makes(fake):
    k8s_cluster(fake)
    sweeps.preview("kubernetes", SWEEP_SPEC, SubmitOptions(), TRIALS, 1, check=True)
    (dry,) = _server_dry_runs(fake)
    (job,) = json.loads(dry.stdin)["items"]
    assert job["kind"] == "Job" and job["spec"]["suspend"] is True and job["spec"]["completionMode"] == "Indexed"
    assert len(fake.kubectl_calls("create")) == 1 and records.list_records() == []  # nothing made
    fake.calls.clear()
    sweeps.submit("kubernetes", SWEEP_SPEC, SubmitOptions(), TRIALS, 1)  # the submit's create is its check: no more
    assert _server_dry_runs(fake) == [] and len(fake.kubectl_calls("create")) == 1


def test_a_sweeps_dry_run_refuses_a_namespace_the_cluster_lacks_as_its_submit_would(fake, cli):
    k8s_cluster(fake)
    fake.kubectl("create", rc=1, stderr='Error from server (NotFound): namespaces "nope" not found\n')
    out = cli("tao_k8s.py", "submit", "--image", "img:1", "--command", "true", "--gpus", "0", "--no-results",
              "--namespace", "nope", "--sweep", "a=1,2", "--dry-run", "--check")
    assert out.rc == 1 and out.err_lines == ["error: namespace nope does not exist: set TAO_K8S_NAMESPACE (or "
                                             "--namespace) to an existing one, or ask for it to be created"], out
    assert len(_server_dry_runs(fake)) == 1 and records.list_records() == []
