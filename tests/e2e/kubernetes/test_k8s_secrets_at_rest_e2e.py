"""Secrets at rest on the local cluster: etcd holds the bank's per-job Secret only encrypted.

Reads the raw etcd value below the apiserver (what a copy of etcd or of its
backups shows) and checks that the Secret's value is not in it.
"""
from __future__ import annotations

import base64
import secrets
import time

import pytest
from k8s_verbs_support import ON_KWOK, k8s  # noqa: F401  (k8s is a fixture)

from taobank import pins
import testclusters.kubernetes as lk

pytestmark = pytest.mark.e2e

BASE = ["--image", pins.resolve("images.busybox"), "--network-arch", "deformable_detr", "--action", "train",
        "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_KWOK,
        "--pod-annotation", f"{lk.KEEP_RUNNING_ANNOTATION}=true"]


def test_the_per_job_secret_is_encrypted_in_etcd(k8s):
    token = "hf_" + secrets.token_hex(16)
    out = k8s.submit(*BASE, "--command", "sleep 1000", "--gpus", "0", "--secret-env", "HF_TOKEN",
                     env={"HF_TOKEN": token})
    name = f"tao-creds-{out['name']}"
    # the API still serves the value (decrypted by the apiserver)
    assert base64.b64decode(k8s.kjson("get", "secret", name)["data"]["HF_TOKEN"]).decode() == token
    raw = lk.etcd_get(f"/registry/secrets/{lk.NAMESPACE}/{name}")
    assert raw is not None, "the Secret is not where the apiserver stores Secrets"
    assert raw.startswith(lk.ENCRYPTED_PREFIX.encode()), raw[:40]
    assert token.encode() not in raw and base64.b64encode(token.encode()) not in raw
    k8s.tao("cancel", out["id"])  # deletes the Secret: its key leaves etcd's current revision
    end = time.time() + 30
    while lk.etcd_get(f"/registry/secrets/{lk.NAMESPACE}/{name}") is not None:
        assert time.time() < end, f"{name} still in etcd after cancel"
        time.sleep(1)


def test_a_kubectl_secret_is_encrypted_in_etcd(k8s):
    name, value = f"at-rest-{secrets.token_hex(3)}", "v-" + secrets.token_hex(16)
    k8s.kubectl("create", "secret", "generic", name, f"--from-literal=key={value}")
    try:
        raw = lk.etcd_get(f"/registry/secrets/{lk.NAMESPACE}/{name}")
        assert raw is not None and raw.startswith(lk.ENCRYPTED_PREFIX.encode()) and value.encode() not in raw
    finally:
        k8s.kubectl("delete", "secret", name, "--ignore-not-found", check=False)
