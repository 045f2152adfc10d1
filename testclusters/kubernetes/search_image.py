"""Python 3 with numpy on the real nodes, for a search's trials (test infrastructure).

Built once into the image cache from Debian's packages, and imported into each real node's containerd only when
missing (one ``ctr images ls`` per node when warm). Not part of ``up``: only the search's tests need it.
"""
from __future__ import annotations

from . import images
from .realnodes_ctr import ensure_image


def ensure() -> str:
    """The image's reference, present on every real node."""
    return ensure_image(images.python_numpy())
