"""Producer action requests end to end: staged config, hash-verified, mounted read-only; args mode."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from k8s_verbs_support import BANK, ON_KWOK, k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk

pytestmark = pytest.mark.e2e
RENDER = BANK / "scripts" / "render_k8s_job.py"


def request(mode: str) -> dict:
    req = {
        "backend": "K8S", "image": "docker.io/library/busybox:1.37.0", "network_arch": "visual_changenet",
        "action": "train", "mode": mode, "results_dir": "/results",
        "mounts": [
            {"source": {"pvc": lk.PVC_NAME, "sub_path": "datasets"}, "path": "/data",
             "aliases": ["/workspace/datasets", "/lustre/fsw/portfolios/edgeai/datasets"], "read_only": True},
            {"source": {"pvc": lk.PVC_NAME, "sub_path": "results"}, "path": "/results"},
        ],
        "resources": {"gpus": 1},
    }
    if mode == "config":
        req["argv"] = ["visual_changenet", "train", "-e", "{config_path}"]
        req["config"] = {"dataset": {"segment": {"root_dir": "/lustre/fsw/portfolios/edgeai/datasets/levir"}},
                         "wandb": {"name": "a \"quoted\" {{x}}"}, "results_dir": "/results/vcn"}
    else:
        req["argv"] = ["python3", "-c", "import sys; print(sys.argv)", "--flag=$(id)"]
    return req


def test_config_mode_stages_exact_file_read_only(k8s, tmp_path):
    req = tmp_path / "req.json"
    req.write_text(json.dumps(request("config")))
    cfg = tmp_path / "spec.yaml"
    digest = subprocess.run([sys.executable, str(RENDER), "--request", str(req), "--materialize-config", str(cfg)],
                            capture_output=True, text=True, check=True, env=k8s.env).stdout.strip()
    assert digest == hashlib.sha256(cfg.read_bytes()).hexdigest()
    out = k8s.submit("--request", str(req), "--config-file", str(cfg), "--config-sha256", digest, *ON_KWOK)
    cm = k8s.kjson("get", "configmap", f"tao-config-{out['name']}")
    assert hashlib.sha256(cm["data"]["spec.yaml"].encode()).hexdigest() == digest
    assert cm["metadata"]["ownerReferences"][0]["uid"] == out["uid"]
    pod = k8s.kjson("get", "job", out["name"])["spec"]["template"]["spec"]
    main = pod["containers"][0]
    # native argv, passed as "$@" to the output-copy wrapper (never re-parsed); TAO told the GPUs it is given and
    # the job's folder to write in
    assert main["command"][4:] == ["visual_changenet", "train", "-e", "/tao/config/spec.yaml",
                                   f"train.num_gpus={request('config').get('gpus', 1)}",
                                   f"results_dir=/results/{out['id']}"]
    mounts = {m["mountPath"]: m for m in main["volumeMounts"]}
    assert mounts["/tao/config/spec.yaml"]["readOnly"] is True
    # one volume for the duplicate-source aliases, mounted at every alias
    assert mounts["/data"]["name"] == mounts["/workspace/datasets"]["name"] == \
        mounts["/lustre/fsw/portfolios/edgeai/datasets"]["name"]
    assert k8s.record(out["id"])["backend_ref"] == f"tao-jobs/{out['name']}"
    # a tampered file is refused before anything is applied
    cfg.write_text(cfg.read_text() + "# edited\n")
    bad = k8s.tao("submit", "--request", str(req), "--config-file", str(cfg), "--config-sha256", digest, check=False)
    assert bad.returncode == 1 and "sha256" in bad.stderr


def test_config_mode_refuses_unmounted_embedded_path(k8s, tmp_path):
    r = request("config")
    r["config"]["dataset"]["segment"]["root_dir"] = "/not/mounted/anywhere"
    req = tmp_path / "req.json"
    req.write_text(json.dumps(r))
    proc = subprocess.run([sys.executable, str(RENDER), "--request", str(req)], capture_output=True, text=True,
                          env=k8s.env)
    assert proc.returncode == 1 and "/not/mounted/anywhere" in proc.stderr


def test_args_mode_native_argv(k8s, tmp_path):
    req = tmp_path / "req.json"
    req.write_text(json.dumps(request("args")))
    out = k8s.submit("--request", str(req), *ON_KWOK)
    main = k8s.kjson("get", "job", out["name"])["spec"]["template"]["spec"]["containers"][0]
    assert main["command"][:2] == ["/bin/sh", "-c"] and main["command"][3] == "tao-main"
    assert main["command"][4:] == ["python3", "-c", "import sys; print(sys.argv)", "--flag=$(id)"]


def test_request_schema_error_is_one_clear_line(k8s, tmp_path):
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"backend": "kubernetes", "image": "x", "mode": "args"}))
    proc = k8s.tao("submit", "--request", str(req), check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "action-request.schema.json" in proc.stderr
