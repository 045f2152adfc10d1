"""Python 3 with numpy on the real nodes, for a search's trials (test infrastructure).

Built once into the image cache from Debian's packages, and imported into each real node's containerd only when
missing (one ``ctr images ls`` per node when warm). Not part of ``up``: only the search's tests need it.
"""
from __future__ import annotations

from . import images
from .cluster_state import _load_cluster
from .realnodes_ctr import _ctr, _real_nodes


def ensure() -> str:
    """The image's reference, present on every real node."""
    image = images.python_numpy()
    archive = None
    for node in _real_nodes(_load_cluster()):
        listed = _ctr(node, "images", "ls", "-q", check=False, timeout=60)
        if listed.ok and image.ref in listed.stdout.split():
            continue
        archive = archive or images.archive(image)
        _ctr(node, "images", "import", str(archive), timeout=900)
    return image.ref
