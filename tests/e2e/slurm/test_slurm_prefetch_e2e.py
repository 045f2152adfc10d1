"""submit --prefetch for real: the local SLURM cluster's CPU-only prefetch job fetches from the local S3 server
(the Kubernetes cluster's moto endpoint on the bridge address, reached from the SLURM nodes over TCP) with the
nodes' AWS CLI; the training job waits for it, and over the cap it never starts.

Hugging Face and NGC cannot be reached from here: their commands are pinned by unit tests
(tests/unit/test_slurm_prefetch.py), and references/prefetch.md says so.
"""
from __future__ import annotations

import os
import sys
import time
import uuid

import pytest

from taobank.core import platform
from taobank.platforms.slurm import logs as slurm_logs, submit as slurm_submit
from taobank.platforms.slurm.ssh import Connection
from testclusters.kubernetes import cluster_s3, s3

sys.path.insert(0, os.path.dirname(__file__))
from slurm_helpers import ArgvWatcher, base_spec, wait_state  # noqa: E402

SECRET = "tao-e2e-prefetch-secret-4b1e9d"


@pytest.fixture()
def s3_bucket(k8s_cluster, slurm_env, monkeypatch):
    """A fresh bucket on the local S3 server, and the submitter's S3 variables exported as a user would."""
    bucket = f"tao-prefetch-{uuid.uuid4().hex[:10]}"
    cluster_s3.s3_make_bucket(bucket)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("S3_ENDPOINT_URL", cluster_s3.s3_endpoint())
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3.REGION)
    return bucket


def _show_job(jid: str) -> str:
    return Connection().remote(["scontrol", "show", "job", "-o", jid]).stdout


def test_prefetch_from_s3_runs_in_a_cpu_job_before_training_and_keeps_keys_out(s3_bucket):
    cluster_s3.s3_put(s3_bucket, "models/model.pth", "weights-v1\n")
    cluster_s3.s3_put(s3_bucket, "cfg/a.yaml", "a: 1\n")
    cluster_s3.s3_put(s3_bucket, "cfg/sub/b.yaml", "b: 2\n")
    spec = base_spec(prefetch={"ckpt/model.pth": f"s3://{s3_bucket}/models/model.pth",
                               "cfg": f"s3://{s3_bucket}/cfg/"},
                     command=["bash", "-c", 'cat "$1"; cat "$2/a.yaml" "$2/sub/b.yaml"; '
                              'echo "keys seen by training: ${AWS_SECRET_ACCESS_KEY:-none}"',
                              "tao", "{prefetch}/ckpt/model.pth", "{prefetch}/cfg"])
    with ArgvWatcher(SECRET) as watcher:
        rec = slurm_submit.submit(spec)
    assert watcher.scans > 0 and watcher.hits == []  # the key never on any argv, here or on the cluster
    b = rec["backend"]
    assert b["prefetch_job_id"].isdigit() and int(b["prefetch_job_id"]) < int(b["slurm_job_id"])
    done = wait_state(rec["id"], timeout=180)
    assert done["state"] == "COMPLETE", done
    out = slurm_logs.logs(rec["id"])["main.out"]
    assert "weights-v1" in out and "a: 1" in out and "b: 2" in out
    assert "keys seen by training: none" in out  # the prefetch's credentials never reach the training job
    pre = _show_job(b["prefetch_job_id"])
    assert " Partition=convert " in pre and "gres/gpu" not in pre  # a CPU partition, no GPU asked for
    shown = platform.logs("slurm", rec["id"]).sections
    assert "tao: prefetched 21 bytes" in shown[b["prefetch_log"]]  # 11 + 5 + 5
    creds = b["job_dir"] + "/env/prefetch-credentials.sh"
    assert slurm_submit.preflight_paths(Connection(), [creds]) == [creds]  # removed by the prefetch job


def test_prefetch_over_the_cap_fails_loudly_and_the_training_job_never_starts(s3_bucket):
    cluster_s3.s3_put(s3_bucket, "big.pth", "x" * 4096)
    t0 = time.monotonic()
    rec = slurm_submit.submit(base_spec(prefetch={"big.pth": f"s3://{s3_bucket}/big.pth"}, prefetch_max_bytes=1000,
                                        command=["bash", "-c", "echo training ran"]))
    assert time.monotonic() - t0 < 30  # submit does not wait for the prefetch
    b = rec["backend"]
    done = wait_state(rec["id"], timeout=180)
    assert done["state"] == "ERROR" and done["err_class"] == "ERR_PROGRAM", done
    assert f"prefetch job {b['prefetch_job_id']} ended FAILED" in done["message"]
    assert "4096 bytes" in done["message"] and "prefetch cap of 1000 bytes" in done["message"], done["message"]
    assert "training job will not start" in done["message"]
    for _ in range(30):  # SLURM cancels the dependent job (--kill-on-invalid-dep) before it ever starts
        train = _show_job(b["slurm_job_id"])
        if " JobState=PENDING " not in train:
            break
        time.sleep(1)
    assert " JobState=CANCELLED " in train and " Reason=DependencyNeverSatisfied " in train
    main_out = b["log_dir"] + "/main.out"
    folder = b["job_dir"] + "/prefetch"
    creds = b["job_dir"] + "/env/prefetch-credentials.sh"
    # it never ran; what was fetched is gone; the keys too
    assert slurm_submit.preflight_paths(Connection(), [main_out, folder, creds]) == [main_out, folder, creds]


def test_prefetch_of_a_missing_object_names_it(s3_bucket):
    rec = slurm_submit.submit(base_spec(prefetch={"m.pth": f"s3://{s3_bucket}/no/such.pth"},
                                        command=["true"]))
    done = wait_state(rec["id"], timeout=180)
    assert done["state"] == "ERROR", done
    assert f"cannot read the size of s3://{s3_bucket}/no/such.pth (missing, or no access)" in done["message"]
