"""A short-lived, GPU-less Job that mounts a job's volumes and runs one small command there.

The agent's machine cannot see a PVC; a pod can. Submit uses it to check
that the inputs a job names exist before GPUs are spent; ``logs`` uses it to
read the copy of the output a job kept on its results volume after TTL
cleanup removed the pods. It is a Job (not a bare Pod) so ``create jobs`` is
the only write it needs and its own TTL removes it.
"""
from __future__ import annotations

import secrets
import time

from .. import pins
from ..errors import TaoError
from . import MANAGED_BY, render
from .kubectl import Kubectl

#: Label of the helper Jobs (never the job-id label: status and cancel must not see them as the job's pods).
HELPER_LABEL = "tao-skill-bank/volume-job"


def manifest(spec: dict, name: str, namespace: str, argv: list[str], *, deadline_s: int) -> dict:
    """The helper Job: the job's mounts (read-only), its node placement and pull secret, no GPU."""
    volumes, mounts = render.volumes_and_mounts(spec, "64Mi")
    mounts = [{**m, "readOnly": True} if m["mountPath"] != "/dev/shm" else m for m in mounts]
    pod: dict = {"restartPolicy": "Never", "containers": [{
        "name": "check", "image": pins.resolve("kubernetes.volume_job_image"), "command": argv,
        "volumeMounts": mounts, "resources": {"limits": {"cpu": "200m", "memory": "64Mi"}}}],
        "volumes": volumes}
    for key, field in (("node_selector", "nodeSelector"), ("tolerations", "tolerations")):
        if spec.get(key):
            pod[field] = spec[key]
    if spec.get("image_pull_secret"):
        pod["imagePullSecrets"] = [{"name": spec["image_pull_secret"]}]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {HELPER_LABEL: "true", **MANAGED_BY}},
            "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 60, "activeDeadlineSeconds": deadline_s,
                     "template": {"metadata": {"labels": {HELPER_LABEL: "true", **MANAGED_BY}}, "spec": pod}}}


def run(kube: Kubectl, spec: dict, argv: list[str], *, purpose: str, timeout_s: int | None = None,
        sleep=time.sleep) -> tuple[int | None, str]:
    """Run ``argv`` next to the job's volumes; (exit code or None if it never ended, its output)."""
    timeout_s = int(timeout_s or pins.resolve("kubernetes.volume_job_timeout_s"))
    name = f"tao-vol-{secrets.token_hex(4)}"
    kube.apply([manifest(spec, name, kube.namespace, argv, deadline_s=timeout_s)], create=True)
    end = time.monotonic() + timeout_s + 15
    while True:
        pods = kube.items("pods", "-l", f"job-name={name}", what="kubectl get pods")
        done = [p for p in pods if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")]
        if done:
            pod = done[0]
            break
        if time.monotonic() > end:
            why = "; ".join(filter(None, (_waiting(p) for p in pods))) or "not scheduled"
            raise TaoError(f"{purpose}: the helper Job {name} did not finish in {timeout_s}s ({why}): check the "
                           f"volumes with kubectl describe job {name}")
        sleep(1)
    res = kube.run("logs", pod["metadata"]["name"], check=False, what="kubectl logs")
    code = None
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated") or {}
        if "exitCode" in term:
            code = int(term["exitCode"])
    return code, res.stdout if res.ok else ""


def _waiting(pod: dict) -> str:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        why = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
        if why and why != "ContainerCreating":
            return why
    return ""
