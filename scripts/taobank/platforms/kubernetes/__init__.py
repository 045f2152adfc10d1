"""Kubernetes platform: kubectl client, gates, rendering, status mapping, and one module per verb.

Every kubectl call goes through :class:`kubectl.Kubectl`, which always adds
``-n <namespace>`` and ``--context <context>`` (when one is set).
"""
from ...registry import HostClient, PlatformInfo

PLATFORM = "kubernetes"

#: who this platform is (:mod:`taobank.registry`)
INFO = PlatformInfo(
    dry_run_shows="the manifest", preflight_list=True, name=PLATFORM, helper="tao_k8s.py", aliases=("k8s", "kube"),
    client=HostClient("kubectl", ("kubectl",), "install kubectl (https://kubernetes.io/docs/tasks/tools/) and put it on PATH",
                      ("kubectl", "version", "--client", "-o", "json"), r'"gitVersion"\s*:\s*"v?([^"]+)"',
                      "tools.kubectl_min"))

#: Label put on every object a submit creates (Job, pods, Service, Secrets, ConfigMap).
JOB_LABEL = "tao-job-id"
MANAGED_BY = {"app.kubernetes.io/managed-by": "tao-skill-bank"}
#: Label on the objects a Job owns (Secrets, Service, ConfigMap): the Job's UID, so a cleanup by label
#: deletes only what was made for that very Job, never a same-name object made for another.
OWNER_UID_LABEL = "tao-job-uid"
#: The label of a sweep's Job and its pods (the sweep id); cleanup of a failed create finds them by it.
SWEEP_LABEL = "tao-sweep"
#: The job spec as submitted, next to the record (artifact folder): logs reads the volume copy through it.
SPEC_FILE = "spec.json"
