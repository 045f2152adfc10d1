"""A search's site on Kubernetes, checked before anything is created (fake kubectl): a helper Job of the trials'
own image on their results volume (writable, no GPU) runs the one site rule of every platform
(taobank.campaign.search.site: the journal's lock, python3 3.10+ with numpy); what it finds wrong refuses in one line, a
check pod that cannot run in time is a warning. A study in PostgreSQL skips the lock and its URL travels in the
sweep's Secret, by NAME."""
from __future__ import annotations

import json

import pytest

from fakeproc import items, k8s_cluster
from taobank import records
from taobank.campaign import sweeps
from taobank.contract import SubmitOptions
from taobank.errors import TaoError
from taobank.campaign.search import bundle, settings, site, space

SPEC = {"image": "nvcr.io/nvidia/tao/tao-toolkit:6", "gpus": 0, "command": "sh train.sh",
        "mounts": [{"pvc": "ws", "mount_path": "/results"}]}


def staging(**kw) -> bundle.Staging:
    return bundle.Staging(settings.make("", sampler="tpe", pruner="asha", trials=2, kpi="val_loss", mode=None,
                                        space=space.from_flags(["train.optim.lr=loguniform(1e-5,1e-1)"]), **kw))


def _site_pod(fake, output: str, code: int = 0) -> None:
    k8s_cluster(fake)
    done = {"metadata": {"name": "tao-vol-x-abcde"}, "status": {"phase": "Succeeded", "containerStatuses": [
        {"name": "check", "state": {"terminated": {"exitCode": code}}}]}}
    fake.kubectl("get", "pods", "-l", answer=items([done]))
    fake.kubectl("logs", answer=output)


def _check_job(fake) -> dict:
    (job,) = [json.loads(c.stdin)["items"][0] for c in fake.kubectl_calls("create")
              if json.loads(c.stdin)["items"][0]["metadata"]["name"].startswith("tao-vol-")]
    return job


@pytest.mark.parametrize("output,says", [
    ("no-lock /results\nsite-checked\n", "cannot hold a search's journal.*--study-storage-env NAME"),
    ("no-python\nsite-checked\n", "has no python3 of 3.10 or later with numpy"),
    ("no-write /results\nsite-checked\n", "cannot write in /results on the results volume")])
def test_a_site_that_cannot_run_a_search_is_refused_in_one_line_before_anything(fake, output, says):
    _site_pod(fake, output)
    with pytest.raises(TaoError, match=says) as err:
        sweeps.submit("kubernetes", SPEC, SubmitOptions(), [{}, {}], 2, search=staging())
    assert "\n" not in str(err.value) and "nothing was created" in str(err.value)
    assert records.list_records() == []
    made = [json.loads(c.stdin)["items"][0]["metadata"]["name"] for c in fake.kubectl_calls("create")]
    assert [n for n in made if not n.startswith("tao-vol-")] == []  # only the check's own Job
    pod = _check_job(fake)["spec"]["template"]["spec"]
    (check,) = pod["containers"]
    assert check["image"] == SPEC["image"] and "nvidia.com/gpu" not in json.dumps(pod)
    assert check["command"][:3] == ["/bin/sh", "-c", site.SEARCH_SITE]
    assert check["command"][4:] == ["/results", "lock", "python"]  # the results base, lock, python3
    assert not [m for m in check["volumeMounts"] if m.get("readOnly")]  # it makes (and removes) a lock link


def test_a_site_that_passes_is_said_and_a_stuck_check_pod_is_a_warning(fake, monkeypatch):
    _site_pod(fake, "site-checked\n")
    done = sweeps.submit("kubernetes", SPEC, SubmitOptions(), [{}, {}], 2, search=staging())
    assert "search site ok on the results volume (journal lock, the image's python3 with numpy" in done.gate
    from taobank.platforms.kubernetes import volume_job

    def stuck(*a, **k):
        raise TaoError("checking the search's site: the helper Job tao-vol-1 did not finish in 120s (ErrImagePull)")

    monkeypatch.setattr(volume_job, "run", stuck)
    done = sweeps.submit("kubernetes", SPEC, SubmitOptions(), [{}, {}], 2, search=staging())
    assert "warning: search site not checked (checking the search's site" in done.gate


def test_a_database_study_skips_the_lock_and_sends_its_url_only_in_the_sweeps_secret(fake, monkeypatch):
    url = "postgresql://tao:K8sDbPassw0rdForTests@db.example:5432/studies"
    monkeypatch.setenv("TAO_STUDY_DB", url)
    from taobank.campaign.search import storage

    monkeypatch.setattr(storage, "prepare", lambda name, study, direction, env=None: f"study {study} created")
    _site_pod(fake, "site-checked\n")
    done = sweeps.submit("kubernetes", SPEC, SubmitOptions(), [{}, {}], 2, search=staging(storage_env="TAO_STUDY_DB"))
    assert _check_job(fake)["spec"]["template"]["spec"]["containers"][0]["command"][4:] == ["/results", "-", "python"]
    assert "search site ok on the results volume (the image's python3 with numpy" in done.gate
    (apply,) = fake.kubectl_calls("apply")
    owned = json.loads(apply.stdin)["items"]
    (secret,) = [o for o in owned if o["kind"] == "Secret"]
    assert list(secret["data"]) == ["TAO_STUDY_DB"]  # the URL travels in the sweep's Secret (on stdin) only
    maps = [o for o in owned if o["kind"] == "ConfigMap"]
    assert len(maps) >= 3  # the trial table, the bundle, the database libraries (1 MiB each at most)
    (job,) = json.loads(fake.kubectl_calls("create")[-1].stdin)["items"]
    pod = job["spec"]["template"]["spec"]
    (vol,) = [v for v in pod["volumes"] if v["name"] == "tao-search"]
    assert [s["configMap"]["name"] for s in vol["projected"]["sources"]] == \
        [m["metadata"]["name"] for m in maps if "binaryData" in m]
    for call in fake.calls:
        assert "K8sDbPassw0rd" not in " ".join(call.argv)
    for c in fake.kubectl_calls("create"):
        assert "K8sDbPassw0rd" not in c.stdin
    assert all("K8sDbPassw0rd" not in json.dumps(records.load(v.id)) for v in done.views)


def test_an_image_pulled_with_the_pull_secret_the_submit_creates_is_not_checked_and_the_gate_says_so(fake, monkeypatch):
    """No pod can use the NGC pull Secret before the submit makes it: the check is skipped at once (a check pod
    would only wait in ImagePullBackOff), said as a warning; the sweep goes on."""
    monkeypatch.setenv("NGC_KEY", "nvapi-" + "k" * 60)
    _site_pod(fake, "site-checked\n")
    done = sweeps.submit("kubernetes", SPEC, SubmitOptions(ngc_pull_secret=True), [{}, {}], 2, search=staging())
    assert "warning: search site not checked: the trials' image is pulled with the NGC pull secret" in done.gate
    assert not [c for c in fake.kubectl_calls("create") if "tao-vol-" in (c.stdin or "")]
