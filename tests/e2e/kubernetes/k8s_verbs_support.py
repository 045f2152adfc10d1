"""Support for the Kubernetes verb tests (test_k8s_*.py): run the real helpers against the local cluster."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import testclusters.kubernetes as lk

BANK = Path(__file__).resolve().parents[3]
#: kwok-imitated scenarios (annotations steer the fake pods) stay on the fake nodes ...
ON_KWOK = ["--node-selector", f"{lk.FAKE_NODE_LABEL}=true"]
#: ... real-container tests go to the real kubelets.
ON_REAL = ["--node-selector", f"{lk.REAL_NODE_LABEL}=true"]
TAO_K8S = BANK / "scripts" / "tao_k8s.py"
NAMESPACE = "tao-jobs"


class K8s:
    """Runs tao_k8s.py / kubectl with the cluster env, a private state dir and a call log."""

    def __init__(self, env: dict[str, str], state: Path, call_log: Path) -> None:
        self.env = {**os.environ, **env, "TAO_STATE_DIR": str(state), "TAO_CALL_LOG": str(call_log),
                    "TAO_K8S_NAMESPACE": NAMESPACE}
        self.env.pop("TAO_K8S_CONTEXT", None)
        self.call_log = call_log
        self.ids: list[str] = []

    def tao(self, *args: str, check: bool = True, env: dict | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, str(TAO_K8S), *args], capture_output=True, text=True,
                              env={**self.env, **(env or {})}, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"tao_k8s.py {' '.join(args)} failed ({proc.returncode}): {proc.stderr}{proc.stdout}")
        return proc

    def submit(self, *args: str, env: dict | None = None) -> dict:
        """Submit; while other tests hold the shared cluster's GPUs, wait for the gate to pass."""
        end = time.time() + 120
        while True:
            proc = self.tao("submit", "--json", *args, env=env, check=False)
            if proc.returncode == 0 or "insufficient GPUs" not in proc.stderr or time.time() > end:
                break
            time.sleep(3)
        if proc.returncode != 0:
            raise AssertionError(f"tao_k8s.py submit {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        out = json.loads(proc.stdout)
        self.ids.append(out["id"])
        return out

    def status(self, job_id: str) -> dict:
        (view,) = json.loads(self.tao("status", job_id, "--json").stdout)  # always a list
        return view

    def wait(self, job_id: str, pred, timeout: float = 90) -> dict:
        end = time.time() + timeout
        while True:
            st = self.status(job_id)
            if pred(st):
                return st
            if time.time() > end:
                raise AssertionError(f"timed out waiting on {job_id}: last status {st}")
            time.sleep(1)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True, ns: str = NAMESPACE) -> subprocess.CompletedProcess:
        proc = subprocess.run(["kubectl", "-n", ns, *args], input=stdin, capture_output=True, text=True,
                              env=self.env, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    def kjson(self, *args: str, ns: str = NAMESPACE) -> dict:
        return json.loads(self.kubectl(*args, "-o", "json", ns=ns).stdout or "{}")

    def calls(self) -> list[list[str]]:
        if not self.call_log.exists():
            return []
        return [json.loads(line) for line in self.call_log.read_text().splitlines() if line.strip()]

    def record(self, job_id: str) -> dict:
        return json.loads((Path(self.env["TAO_STATE_DIR"]) / f"{job_id}.json").read_text())

    def cleanup(self) -> None:
        for jid in self.ids:
            self.kubectl("delete", "jobs,secrets,services,configmaps,pods", "-l", f"tao-job-id={jid}",
                         "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture()
def k8s(k8s_cluster, tmp_path):
    helper = K8s(k8s_cluster, tmp_path / "state", tmp_path / "calls.jsonl")
    yield helper
    helper.cleanup()


@pytest.fixture()
def trainer_on_pvc():
    """The fake TAO trainer (testclusters/fake_tao_train.sh) in a folder of the local PVC (its host path), as
    ``/results/<folder>/fake_tao_train.sh`` in a pod mounting that PVC at /results: no image of its own."""
    import secrets as _secrets
    import shutil

    folder = f".e2e-trainer-{_secrets.token_hex(4)}"
    host = lk.state_root() / "pv" / folder
    host.mkdir(parents=True)
    shutil.copy(BANK / "testclusters" / "fake_tao_train.sh", host / "fake_tao_train.sh")
    yield f"/results/{folder}/fake_tao_train.sh"
    shutil.rmtree(host, ignore_errors=True)


def gloo_probe_on_real_nodes(k8s) -> dict:
    """The gloo-cpu probe on the two real kubelets (PyTorch on CPU from Debian, in a local image): a real
    all-reduce over TCP between two pods in their own network namespaces, on two nodes."""
    from testclusters.kubernetes import torch_image

    image = torch_image.ensure()  # built once per version, imported into each node's containerd when missing
    proc = k8s.tao("nccl-probe", "--json", *ON_REAL, "--interval", "1", "--image", image, "--backend", "gloo-cpu", "--timeout", "120",
                   "--force", check=False, timeout=400)
    out = json.loads(proc.stdout)
    k8s.ids.append(out["job_id"])
    assert proc.returncode == 0 and out["verdict"] == "ok", (out, proc.stderr)
    return out
