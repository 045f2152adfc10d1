"""Against the local API server: a finished job's credential Secrets are deleted when status sees the end
(one call) or by cancel, never a same-name Secret made for something else; the dry run shows the Secret
names and references submit creates, values masked; a real kubelet's pull retries are one status line."""
from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time

import pytest
import yaml
from k8s_verbs_support import BANK, NAMESPACE, ON_KWOK, ON_REAL, k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk
from taobank import pins

pytestmark = pytest.mark.e2e

BUSYBOX = "docker.io/library/busybox:1.37.0"
BASE = ["--image", BUSYBOX, "--network-arch", "deformable_detr", "--action", "train", "--no-results", "--gpus", "1",
        *ON_KWOK]
CREDS = ["--secret-env", "HF_TOKEN", "--ngc-pull-secret"]


def creds_env() -> dict[str, str]:
    return {"HF_TOKEN": "hf_" + secrets.token_hex(12), "NGC_KEY": "ngc-" + secrets.token_hex(12)}


def secret_names(name: str) -> list[str]:
    return [f"tao-creds-{name}", f"tao-pull-{name}"]


def exists(k8s, kind: str, name: str) -> bool:
    return bool(k8s.kubectl("get", kind, name, "--ignore-not-found", "-o", "name").stdout.strip())


def secret_deletes(k8s) -> list[list[str]]:
    return [a for a in k8s.calls() if a[:1] == ["kubectl"] and "delete" in a and "secret" in a]


def test_status_deletes_the_credential_secrets_when_it_sees_the_end_and_keeps_the_job(k8s):
    out = k8s.submit(*BASE, *CREDS, "--command", "true", "--pod-annotation", f"{lk.RUN_DURATION_ANNOTATION}=2s",
                     env=creds_env())
    for name in secret_names(out["name"]):
        labels = k8s.kjson("get", "secret", name)["metadata"]["labels"]
        assert labels["tao-job-uid"] == out["uid"], labels
    st = k8s.wait(out["id"], lambda s: s["state"] in ("COMPLETE", "ERROR"), timeout=90)
    assert st["state"] == "COMPLETE", st
    assert not any(exists(k8s, "secret", n) for n in secret_names(out["name"]))
    assert exists(k8s, "job", out["name"])  # the Job stays until its TTL (status, logs)
    (call,) = secret_deletes(k8s)  # one call, when the end was first seen
    assert f"tao-job-uid in ({out['uid']})" in call
    k8s.status(out["id"])
    assert len(secret_deletes(k8s)) == 1


def test_cancel_of_a_finished_job_deletes_its_secrets_never_a_same_name_one(k8s):
    out = k8s.submit(*BASE, *CREDS, "--command", "true", "--pod-annotation", f"{lk.RUN_DURATION_ANNOTATION}=1s",
                     env=creds_env())
    end = time.time() + 60
    while k8s.kjson("get", "job", out["name"]).get("status", {}).get("succeeded") != 1:  # nobody polls status
        assert time.time() < end, "the job did not finish"
        time.sleep(1)
    cred, pull = secret_names(out["name"])
    # someone replaced the creds Secret by one of the same name (and even the job-id label), not made for this Job
    k8s.kubectl("delete", "secret", cred, "--wait=true")
    decoy = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": cred, "labels": {"tao-job-id": out["id"]}},
             "stringData": {"KEEP": "me"}}
    k8s.kubectl("create", "-f", "-", stdin=json.dumps(decoy))
    (res,) = json.loads(k8s.tao("cancel", out["id"], "--json").stdout)
    assert res["state"] == "COMPLETE" and res["deleted"] is False, res
    assert "nothing to cancel" in res["message"] and f"deleted its credential Secret(s) {pull}" in res["message"]
    assert not exists(k8s, "secret", pull)
    assert exists(k8s, "secret", cred)  # the same-name Secret of someone else is left alone
    k8s.kubectl("delete", "secret", cred, "--wait=false", check=False)


def test_the_dry_run_shows_the_secret_names_and_references_submit_creates(k8s):
    env = creds_env()
    jid = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_job_record.py"), "open", "--platform",
                          "kubernetes", "--image", BUSYBOX, "--network-arch", "deformable_detr", "--action", "train",
                          "--storage-tier", "A", "--results-dir", "/dev/null"], capture_output=True, text=True,
                         check=True, env=k8s.env).stdout.strip()
    args = [*BASE, *CREDS, "--command", "true", "--job-id", jid, *("--pod-annotation",
                                                                   f"{lk.KEEP_RUNNING_ANNOTATION}=true")]
    dry = k8s.tao("submit", "--dry-run", *args, env=env)
    for value in env.values():
        assert value not in dry.stdout
    shown = {f"{o['kind']}/{o['metadata']['name']}": o for o in yaml.safe_load_all(dry.stdout) if o}
    out = k8s.submit(*args, env=env)
    pod = k8s.kjson("get", "job", out["name"])["spec"]["template"]["spec"]
    preview = shown[f"Job/{out['name']}"]["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == preview["imagePullSecrets"] == [{"name": secret_names(out["name"])[1]}]
    assert [c.get("envFrom") for c in pod["containers"]] == [c.get("envFrom") for c in preview["containers"]]
    for name in secret_names(out["name"]):
        made = k8s.kjson("get", "secret", name)
        assert shown[f"Secret/{name}"]["type"] == made["type"]
        assert shown[f"Secret/{name}"]["data"] == {key: "<masked>" for key in made["data"]}


def test_a_real_kubelets_pull_retries_are_one_status_line(k8s):
    # a tag never pulled, of the repository only the local registry serves (with credentials)
    image = f"{str(pins.resolve('images.tao_toolkit.pyt')).rsplit(':', 1)[0]}:never-pulled-{secrets.token_hex(4)}"
    out = k8s.submit("--image", image, "--network-arch", "deformable_detr", "--action", "train", "--no-results",
                     "--gpus", "1", *ON_REAL, "--command", "true")  # the registry demands credentials: 401
    watch = subprocess.Popen([sys.executable, str(BANK / "scripts" / "tao_k8s.py"), "status", out["id"], "--watch",
                              "--interval", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=k8s.env)
    seen: list[tuple[str, str]] = []
    try:
        end = time.time() + 90
        while time.time() < end:
            st = k8s.status(out["id"])
            if st["reason"] in ("ErrImagePull", "ImagePullBackOff"):
                seen.append((st["reason"], st["message"]))
            if {r for r, _ in seen} == {"ErrImagePull", "ImagePullBackOff"} and len(seen) >= 8:
                break
            time.sleep(1.5)
        time.sleep(3)
    finally:
        watch.terminate()
        text, _ = watch.communicate(timeout=30)
        k8s.tao("cancel", out["id"], check=False)
    assert {r for r, _ in seen} == {"ErrImagePull", "ImagePullBackOff"}, seen  # the kubelet did flip
    assert len({m for _, m in seen}) == 1 and "401 Unauthorized" in seen[0][1], seen
    pulls = [line for line in text.splitlines() if "cannot pull image" in line]
    assert len(pulls) == 1, text
