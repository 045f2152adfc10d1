"""Every rendered manifest passes the secret lint and the API server's dry run; the version gate refuses."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from k8s_verbs_support import BANK, NAMESPACE, ON_KWOK, k8s  # noqa: F401  (k8s is a fixture)

pytestmark = pytest.mark.e2e
RENDER = BANK / "scripts" / "render_k8s_job.py"
LINT = BANK / "scripts" / "redact_secrets.py"

SPECS = {
    "single": {"image": "busybox", "command": "echo 'a \"b\"' {{x}} $(id)", "gpus": 1, "cpu": "2", "memory": "4Gi",
               "env": {"A": "x: y", "PASSWORD_FILE": "/run/secrets/p"}, "node_selector": {"nvidia.com/gpu.present": "true"},
               "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
               "active_deadline_seconds": 600, "mounts": [{"pvc": "tao-results", "mount_path": "/results"}]},
    "args": {"image": "busybox", "args": ["python3", "-c", "print('hi')"], "gpus": 0, "no_results": True},
    "multinode": {"image": "busybox", "command": "torchrun train.py", "gpus": 2, "nodes": 3,
                  "nccl_env": {"NCCL_IB_HCA": "mlx5"}, "mounts": [{"pvc": "tao-results", "mount_path": "/results"}]},
    "tier-c": {"image": "busybox", "command": "train", "gpus": 1, "storage_tier": "C", "results_dir": "s3://bucket/runs",
               "s3_inputs": [{"uri": "s3://bucket/coco/", "path": "/tao-staging/coco"}],
               "s3_outputs": [{"path": "/tao-staging/out", "uri": "s3://bucket/out/"}]},
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_rendered_manifest_passes_lint_and_server_dry_run(k8s, tmp_path, name):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPECS[name]))
    out = tmp_path / "m.yaml"
    cmd = [sys.executable, str(RENDER), "--spec", str(spec), "--namespace", NAMESPACE, "--job-id", f"dry-{name}", "-o", str(out)]
    if name == "tier-c":
        cmd += ["--cred-secret", "tao-creds-dry-tier-c"]
    subprocess.run(cmd, check=True, env=k8s.env)
    lint = subprocess.run([sys.executable, str(LINT), "lint", str(out)], capture_output=True, text=True, env=k8s.env)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    dry = k8s.kubectl("apply", "--dry-run=server", "-f", str(out), "-o", "json", check=False)
    assert dry.returncode == 0, dry.stderr
    objs = list(yaml.safe_load_all(out.read_text()))
    assert all(o["metadata"]["namespace"] == NAMESPACE for o in objs)
    assert k8s.kubectl("get", "job", f"dry-{name}", "--ignore-not-found", "-o", "name").stdout == ""  # nothing created


def test_version_gate_refuses_multinode_below_minimum(k8s, tmp_path):
    pins = yaml.safe_load((BANK / "versions.yaml").read_text())
    pins["kubernetes"]["min_version_multinode"] = "1.99"
    vf = tmp_path / "versions.yaml"
    vf.write_text(yaml.safe_dump(pins))
    env = {"TAO_VERSIONS_FILE": str(vf)}
    proc = k8s.tao("submit", "--image", "busybox", "--command", "true", "--gpus", "0", "--nodes", "2", "--no-results", *ON_KWOK,
                   "--skip-nccl-probe", check=False, env=env)  # (the NCCL gate comes first)
    assert proc.returncode == 1
    assert "need Kubernetes >= 1.99, the server is 1.34" in proc.stderr
    assert "batch.kubernetes.io/job-completion-index" in proc.stderr and "1.21" in proc.stderr
    from pathlib import Path  # noqa: PLC0415

    assert not list(Path(k8s.env["TAO_STATE_DIR"]).glob("*.json"))  # refused before the record opened
    single = k8s.submit("--image", "busybox", "--command", "true", "--gpus", "0", "--no-results", *ON_KWOK, env=env)  # single-node: no version gate
    assert single["uid"]
