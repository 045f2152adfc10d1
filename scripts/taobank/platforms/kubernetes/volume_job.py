"""A short-lived, GPU-less Job that mounts a job's volumes and runs one small command there.

The agent's machine cannot see a PVC; a pod can. Submit uses it to check
that the inputs a job names exist before GPUs are spent; ``logs`` uses it to
read the copy of the output a job kept on its results volume after TTL
cleanup removed the pods. It is a Job (not a bare Pod) so ``create jobs`` is
the only write it needs and its own TTL removes it.

:func:`reader` keeps such a pod up so several commands can run in it with
``kubectl exec`` (a byte-exact stream, unlike a Job's logs): ``artifacts``,
``fetch`` and ``prune`` use it, and also need ``create pods/exec``.
"""
from __future__ import annotations

import secrets
import time
from contextlib import contextmanager
from typing import Any, BinaryIO, ContextManager, Iterator, Mapping

from ... import pins
from ...errors import TaoError
from .spec import KubernetesSpec
from . import MANAGED_BY, render
from ...run import Result, pipe, signals_held, signals_interrupt
from .kubectl import Kubectl

#: Label of the helper Jobs (never the job-id label: status and cancel must not see them as the job's pods).
HELPER_LABEL = "tao-skill-bank/volume-job"
#: the job (id) whose results a reader pod serves
FOR_JOB_LABEL = "tao-skill-bank/for-job"


def manifest(spec: KubernetesSpec | Mapping[str, Any], name: str, namespace: str, argv: list[str], *,
             deadline_s: int, writable: bool = False, for_job: str | None = None, image: str | None = None) -> dict:
    """The helper Job: the job's mounts (read-only unless ``writable``: prune, a search's site check), its node
    placement and pull secret, no GPU; labelled with the job whose results it reads (``for_job``), so each can
    be found alone; the pinned small image unless ``image`` (a search's site check runs the job's own). A
    mapping (the spec file saved beside a record) is read as its typed spec."""
    spec = KubernetesSpec.of(spec)
    volumes, mounts = render.volumes_and_mounts(spec, "64Mi")
    if not writable:
        mounts = [{**m, "readOnly": True} if m["mountPath"] != "/dev/shm" else m for m in mounts]
    pod: dict = {"restartPolicy": "Never", "containers": [{
        "name": "check", "image": image or pins.resolve("kubernetes.volume_job_image"), "command": argv,
        "volumeMounts": mounts, "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                              "limits": {"cpu": "1", "memory": "256Mi"}}}],
        "volumes": volumes}
    if spec.node_selector:
        pod["nodeSelector"] = spec.node_selector
    if spec.tolerations:
        pod["tolerations"] = spec.tolerations
    if spec.image_pull_secret:
        pod["imagePullSecrets"] = [{"name": spec.image_pull_secret}]
    labels = {HELPER_LABEL: "true", **MANAGED_BY, **({FOR_JOB_LABEL: for_job} if for_job else {})}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 60, "activeDeadlineSeconds": deadline_s,
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}


def run(kube: Kubectl, spec: KubernetesSpec | Mapping[str, Any], argv: list[str], *, purpose: str, timeout_s: int | None = None,
        sleep=time.sleep, image: str | None = None, writable: bool = False) -> tuple[int | None, str]:
    """Run ``argv`` next to the job's volumes (``image``, ``writable``: :func:`manifest`); (exit code or None if
    it never ended, its output)."""
    timeout_s = int(timeout_s or pins.resolve("kubernetes.volume_job_timeout_s"))
    name = f"tao-vol-{secrets.token_hex(4)}"
    kube.apply([manifest(spec, name, kube.namespace, argv, deadline_s=timeout_s, image=image, writable=writable)],
               create=True)
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


class Reader:
    """A running helper pod: scripts run in it with ``kubectl exec`` (text, or a binary stream)."""

    def __init__(self, kube: Kubectl, pod: str) -> None:
        self.kube, self.pod = kube, pod

    def argv(self, script: str, args: list[str], *, stdin: bool = False) -> list[str]:
        return self.kube.argv("exec", *(["-i"] if stdin else []), self.pod, "-c", "check", "--",
                              "sh", "-c", script, "tao", *args)

    def text(self, script: str, args: list[str], *, what: str) -> Result:
        from ...results_shell import TEXT_TIMEOUT_S
        from ...run import run

        return run(self.argv(script, args), check=False, timeout=TEXT_TIMEOUT_S, what=what)

    def stream(self, script: str, args: list[str], *, stdin: str, what: str) -> ContextManager[BinaryIO]:
        return pipe(self.argv(script, args, stdin=True), stdin=stdin, what=what)


@contextmanager
def reader(kube: Kubectl, spec: KubernetesSpec | Mapping[str, Any], *, purpose: str, writable: bool = False, for_job: str | None = None,
           sleep=time.sleep) -> Iterator[Reader]:
    """A helper pod on the job's volumes (at the job's paths) kept up until the block ends, then deleted, on
    every way out (SIGTERM and SIGHUP included: :func:`taobank.run.signals_interrupt`). A client killed
    outright leaves it until it has been idle :data:`READER_IDLE_S` (:data:`READER_WATCHDOG`), at most its
    deadline (``kubernetes.results_reader_max_s``); the Job's TTL then removes it."""
    max_s = int(pins.resolve("kubernetes.results_reader_max_s"))
    wait_s = int(pins.resolve("kubernetes.volume_job_timeout_s"))
    name = f"tao-read-{secrets.token_hex(4)}"
    obj = manifest(spec, name, kube.namespace, ["sh", "-c", READER_WATCHDOG, "tao-reader", str(READER_IDLE_S)],
                   deadline_s=max_s, writable=writable, for_job=for_job)
    obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 1  # sh as PID 1 ignores TERM
    with signals_interrupt():
        yield from _up(kube, obj, name, purpose, wait_s, sleep)


def _up(kube: Kubectl, obj: dict, name: str, purpose: str, wait_s: int, sleep) -> Iterator[Reader]:
    try:
        kube.apply([obj], create=True)
        end = time.monotonic() + wait_s
        while True:
            pods = kube.items("pods", "-l", f"job-name={name}", what="kubectl get pods")
            up = [p for p in pods if any("running" in (cs.get("state") or {})
                                         for cs in (p.get("status") or {}).get("containerStatuses") or [])]
            if up:
                break
            ended = [p for p in pods if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")]
            if ended or time.monotonic() > end:
                why = "; ".join(filter(None, (_waiting(p) for p in pods))) or ("it ended" if ended else "not scheduled")
                raise TaoError(f"{purpose}: the reader pod of Job {name} did not start in {wait_s}s ({why}): check "
                               f"the volumes with kubectl describe job {name}")
            sleep(1)
        yield Reader(kube, up[0]["metadata"]["name"])
    finally:
        with signals_held():  # a second Ctrl-C must not stop the delete
            kube.run("delete", "job", name, "--ignore-not-found", "--wait=false", check=False,
                     what="kubectl delete job")


#: $1: seconds. The reader pod's PID 1: it ends once no ``kubectl exec`` has run in it for $1 seconds (counted
#: in /proc the same way at start and every 5 s), so a client killed with SIGKILL leaves it up that long, not
#: until its deadline; the Job's TTL then removes it.
READER_WATCHDOG = r"""
count() { set -- /proc/[0-9]*; echo $#; }
base=$(count); idle=0
while [ "$idle" -lt "$1" ]; do
  sleep 5
  if [ "$(count)" -gt "$base" ]; then idle=0; else idle=$((idle + 5)); fi
done
"""
#: How long a reader pod waits for its first or next command (the client runs them back to back).
READER_IDLE_S = 60
