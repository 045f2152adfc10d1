"""Container image forms for Pyxis/Enroot and the cached ``.sqsh`` conversion.

Accepted: ``/path/image.sqsh``, ``registry#image:tag``,
``docker://registry#image:tag`` and plain ``registry/image:tag`` (turned into
the Pyxis form ``registry#image:tag``). A missing ``.sqsh`` is made by a small
conversion job on a CPU partition; the training job waits for it
(``--dependency=afterok``) and is cancelled by SLURM if it fails: the GPU job
never falls back to pulling from the registry itself, and ``submit`` never
waits for a download.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ...errors import TaoError
from .spec import SlurmSpec
from ...jobspec import given
from ...paths import abs_path

_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@#+-]*\Z")
#: The first 4 bytes of every squashfs image (0x73717368, little-endian); remote.MISSING checks the same.
SQUASHFS_MAGIC = "hsqs"
#: Where the conversion job's enroot unpacks the image (else the node's local disk): first set wins.
TEMP_PATH_ENV = ("TAO_ENROOT_TEMP_PATH", "ENROOT_TEMP_PATH")


def pyxis_image(image: str) -> str:
    """The form ``srun --container-image`` takes (a .sqsh path stays a path)."""
    img = str(image).strip()
    if not img or any(c.isspace() for c in img):
        raise TaoError(f"image {image!r} is empty or has spaces: give registry/image:tag or /path/image.sqsh")
    if img.startswith("/"):
        if not img.endswith(".sqsh"):
            raise TaoError(f"image path {img} is not a .sqsh file: give /path/image.sqsh or a registry image")
        return abs_path(img, "image path")
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


@dataclass
class Conversion:
    """The conversion job: its own small CPU job that the training job depends on (afterok)."""

    job_name: str
    sqsh: str
    image: str  # Pyxis form
    log: str  # <job_dir>/slurm-logs/convert-%j.out
    partition: str
    account: str | None
    time_minutes: int
    cpus: int
    mem: str
    force: bool = False
    temp_path: str = ""  # ENROOT_TEMP_PATH of the import; "" = the node's local disk

    def directives(self) -> list[tuple[str, str | None]]:
        from .cpujob import directives

        return directives(job_name=self.job_name, log=self.log, partition=self.partition, account=self.account,
                          cpus=self.cpus, mem=self.mem, time_minutes=self.time_minutes)


def conversion(job_name: str, image: str, sqsh: str, log: str, spec: SlurmSpec | Mapping[str, Any], env: Mapping[str, str],
               *, gpu_partition: str, account: str | None, force: bool) -> Conversion:
    """Conversion settings: the spec's ``conversion_*`` fields, else the pins (``slurm.conversion``);
    the partition also from ``TAO_SLURM_CONVERSION_PARTITION``, else the first GPU partition; the enroot
    temp folder from the submitter's ``TAO_ENROOT_TEMP_PATH`` or ``ENROOT_TEMP_PATH`` (a node's small
    local disk cannot hold a large image unpacked)."""
    from ... import pins
    from .resources import _MEM, _num

    spec = SlurmSpec.of(spec)
    d = dict(pins.resolve("slurm.conversion"))
    part = (spec.conversion_partition or env.get("TAO_SLURM_CONVERSION_PARTITION") or d["partition"]
            or gpu_partition.split(",")[0])
    mem = str(spec.conversion_mem or d["mem"])
    if not _MEM.match(mem):
        raise TaoError(f"conversion_mem {mem!r} is not a SLURM size like 32G")
    return Conversion(
        job_name=job_name, sqsh=sqsh, image=pyxis_image(image), log=log, partition=str(part).split(",")[0],
        account=spec.conversion_account or account,
        time_minutes=_num(given(spec.conversion_time_minutes, d["time_minutes"]), "conversion_time_minutes", int, 1),
        cpus=_num(given(spec.conversion_cpus, d["cpus"]), "conversion_cpus", int, 1), mem=mem, force=force,
        temp_path=enroot_temp_path(env))


def enroot_temp_path(env: Mapping[str, str]) -> str:
    """The submitter's enroot temp folder for the import (one path rule), "" when none is set."""
    for name in TEMP_PATH_ENV:
        if env.get(name):
            return abs_path(env[name], name)
    return ""


def render_conversion(c: Conversion) -> str:
    """The conversion job's sbatch script (templates/slurm/convert.sbatch.tmpl)."""
    from ...render import Raw, render_text
    from .render import check_directive_value

    dirs = c.directives()
    for opt, value in dirs:
        if value is not None:
            check_directive_value(opt, value)
    return render_text("slurm/convert.sbatch.tmpl", {
        "directives": [(Raw(o), v) for o, v in dirs], "sqsh": c.sqsh, "image": c.image,
        "force": "1" if c.force else "0", "stale_minutes": int(c.time_minutes), "temp_path": c.temp_path,
        "magic": SQUASHFS_MAGIC}, "shell")
