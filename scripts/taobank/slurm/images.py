"""Container image forms for Pyxis/Enroot and the cached ``.sqsh`` conversion.

Accepted: ``/path/image.sqsh``, ``registry#image:tag``,
``docker://registry#image:tag`` and plain ``registry/image:tag`` (turned into
the Pyxis form ``registry#image:tag``). A conversion that fails stops the
submit: the GPU job never falls back to pulling from the registry itself.
"""
from __future__ import annotations

import posixpath
import re

from ..errors import TaoError

_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@#+-]*\Z")


def pyxis_image(image: str) -> str:
    """The form ``srun --container-image`` takes (a .sqsh path stays a path)."""
    img = str(image).strip()
    if not img or any(c.isspace() for c in img):
        raise TaoError(f"image {image!r} is empty or has spaces: give registry/image:tag or /path/image.sqsh")
    if img.startswith("/"):
        if not img.endswith(".sqsh"):
            raise TaoError(f"image path {img} is not a .sqsh file: give /path/image.sqsh or a registry image")
        return posixpath.normpath(img)
    if img.startswith("docker://"):
        img = img[len("docker://"):]
    elif "://" in img:
        raise TaoError(f"image {image!r}: only docker:// is understood; give registry/image:tag")
    if not _REF.match(img) or img.count("#") > 1:
        raise TaoError(f"image {image!r} is not an image reference: give registry/image:tag")
    if "#" in img:
        return img
    first, _, rest = img.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return img  # Docker Hub name such as ubuntu:22.04


def is_sqsh(image: str) -> bool:
    return str(image).startswith("/")


def is_latest(image: str) -> bool:
    """No tag or ``:latest`` (a digest pins the image)."""
    ref = pyxis_image(image).split("#")[-1]
    if "@" in ref:
        return False
    last = ref.rsplit("/", 1)[-1]
    return ":" not in last or last.endswith(":latest")


def sqsh_name(image: str) -> str:
    """Cache file name per image name: ``nvcr.io#nvidia/tao/x:1`` -> ``nvcr.io+nvidia+tao+x+1.sqsh``."""
    ref = pyxis_image(image)
    return re.sub(r"[^A-Za-z0-9._-]", "+", ref) + ".sqsh"


def sqsh_path(image: str, cache_dir: str) -> str:
    return posixpath.join(cache_dir, sqsh_name(image))


def needs_conversion(image: str, cached: bool, force_reconvert_latest: bool = False) -> bool:
    """Convert when no cache exists, or for ``:latest`` when forced."""
    if is_sqsh(image):
        return False
    if not cached:
        return True
    return force_reconvert_latest and is_latest(image)


def conversion_argv(image: str, sqsh: str, partition: str) -> list[str]:
    """One-time import on a compute node: ``srun -n1 -p <part> enroot import``.

    Written to ``<sqsh>.part`` first and renamed, so a failed or interrupted
    import never leaves a half file that a later job would use.
    """
    part = partition.split(",")[0]
    return ["srun", "-n1", "-p", part, "enroot", "import", "-o", sqsh + ".part", "docker://" + pyxis_image(image)]
