"""Kubernetes side of the NCCL probe: the cluster key, the probe's job spec and its submit.

The probe goes through the core's submit (same gates, record; a pull Secret only when asked for);
the verdict, wait and per-cluster cache are :mod:`taobank.core.nccl_probe`'s. On the
local kwok nodes no container runs: the probe then exercises the lifecycle
only, never real NCCL traffic.
"""
from __future__ import annotations

from ...core import nccl_probe as core
from ... import pins
from ...contract import SubmitOptions
from .kubectl import Kubectl

ADVICE = ("set TAO_K8S_NCCL_ENV to a file of NCCL_*=value lines for this cluster (NCCL_SOCKET_IFNAME, "
          "NCCL_IB_HCA, ...) and re-probe: tao_k8s.py nccl-probe --force")


def build_spec(*, nodes: int, gpus: int, image: str | None, timeout: int,
               pod_annotations: dict[str, str] | None = None, node_selector: dict[str, str] | None = None,
               image_pull_secret: str | None = None, backend: str = "nccl") -> dict:
    """The probe's job spec, finished as every submit's spec is (TAO_K8S_NCCL_ENV applies). Its pods go one
    per node (a required pod anti-affinity): two ranks on one node would prove nothing about the path between
    nodes. gloo-cpu asks for no GPU."""
    from .spec import finish

    gpus = core.check_request(nodes, gpus, backend)
    spec: dict = {"image": image or pins.resolve("images.nccl_probe"), "command": core.probe_command(timeout, backend),
                  "one_pod_per_node": True,
                  "network_arch": "nccl-probe", "action": "probe", "no_results": True, "nodes": nodes, "gpus": gpus,
                  # the cluster stops it even if nobody waits
                  "active_deadline_seconds": int(timeout) + core.WAIT_SLACK_S}
    for key, given in (("pod_annotations", pod_annotations), ("node_selector", node_selector)):
        if given:
            spec[key] = dict(given)
    if image_pull_secret:
        spec["image_pull_secret"] = image_pull_secret
    return finish(spec)


def probe(*, kube: Kubectl, nodes: int = 2, gpus: int = 1, image: str | None = None, timeout: int = 300,
          force: bool = False, interval: float = 5.0, pod_annotations: dict[str, str] | None = None,
          node_selector: dict[str, str] | None = None, max_wait: float | None = None,
          ngc_pull_secret: bool = False, image_pull_secret: str | None = None, backend: str = "nccl") -> dict:
    """Run (or reuse) the probe; returns {"verdict", "cached", "cluster", "job_id", "message", ...}.
    The probe image (nvcr.io) may need a pull secret as any job's: ``ngc_pull_secret`` makes the per-job
    one from $NGC_KEY, ``image_pull_secret`` names one already in the namespace."""
    spec = build_spec(nodes=nodes, gpus=gpus, image=image, timeout=timeout, pod_annotations=pod_annotations,
                      node_selector=node_selector, image_pull_secret=image_pull_secret, backend=backend)
    opts = SubmitOptions(probe=True, namespace=kube.namespace, context=kube.context or None,
                         ngc_pull_secret=ngc_pull_secret)
    return core.probe("kubernetes", kube.cluster_key(), spec, opts, nodes=nodes, gpus=gpus, backend=backend,
                      timeout=timeout, advice=ADVICE, force=force, interval=interval, max_wait=max_wait)
