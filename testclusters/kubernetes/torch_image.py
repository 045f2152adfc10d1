"""The PyTorch-on-CPU image on the real nodes, for the gloo-cpu NCCL probe (test infrastructure).

Built once per version (versions.yaml ``test_clusters.kubernetes.torch_cpu``) into the image cache, and
imported into each real node's containerd only when missing: a warm run costs one ``ctr images ls`` per
node. Not part of ``up``: only the probe's tests need it, and it is large.
"""
from __future__ import annotations

from taobank import pins
from . import images
from .cluster_state import _load_cluster
from .realnodes_ctr import _ctr, _real_nodes


def ref() -> str:
    return images.torch_cpu(str(pins.resolve("test_clusters.kubernetes.torch_cpu"))).ref


def ensure() -> str:
    """The image's reference, present on every real node."""
    image = images.torch_cpu(str(pins.resolve("test_clusters.kubernetes.torch_cpu")))
    archive = None
    for node in _real_nodes(_load_cluster()):
        listed = _ctr(node, "images", "ls", "-q", check=False, timeout=60)
        if listed.ok and image.ref in listed.stdout.split():
            continue
        archive = archive or images.archive(image)
        _ctr(node, "images", "import", str(archive), timeout=900)
    return image.ref
