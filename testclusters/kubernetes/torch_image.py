"""The PyTorch-on-CPU image on the real nodes, for the gloo-cpu NCCL probe (test infrastructure).

Built once per version (versions.yaml ``test_clusters.kubernetes.torch_cpu``) into the image cache, and
imported into each real node's containerd only when missing: a warm run costs one ``ctr images ls`` per
node. Not part of ``up``: only the probe's tests need it, and it is large.
"""
from __future__ import annotations

from taobank import pins
from . import images
from .realnodes_ctr import ensure_image


def ref() -> str:
    return images.torch_cpu(str(pins.resolve("test_clusters.kubernetes.torch_cpu"))).ref


def ensure() -> str:
    """The image's reference, present on every real node."""
    return ensure_image(images.torch_cpu(str(pins.resolve("test_clusters.kubernetes.torch_cpu"))))
