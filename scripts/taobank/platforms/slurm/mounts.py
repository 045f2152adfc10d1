"""``srun --container-mounts`` derived from every cluster path a job uses.

Pyxis shows the container only what is mounted into it: a results folder
outside every mount is written into the container's own throwaway
filesystem and lost when the job ends, while the login host's ``test -e``
still passes. So the mount list is not a constant: it is the site roots
(``SLURM_CONTAINER_MOUNTS``, else the results base's first folder such as
``/lustre``) plus every path the job names outside them (results base, which
holds the job folder and results; dataset root, required files, spec-key
paths, inputs; paths the command and its spec files name), each mounted at
the same path, plus the user's extra mounts (``container_mounts``, Pyxis'
``SRC[:DST[:FLAGS]]`` comma list). A path that would land under another
mount's destination (and so show that mount's files instead of its own) is
refused at submit.

The ``.sqsh`` cache is not mounted: enroot reads the image on the host,
outside the container.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from ...errors import TaoError
from ...paths import abs_path, is_under

_FLAGS = re.compile(r"[a-z_+]+\Z")


@dataclass(frozen=True)
class Mount:
    src: str
    dst: str
    flags: str = ""

    def text(self) -> str:
        if self.src == self.dst and not self.flags:
            return self.src
        return f"{self.src}:{self.dst}" + (f":{self.flags}" if self.flags else "")

    @property
    def read_only(self) -> bool:
        return "ro" in self.flags.split("+")


def _path(text: str, what: str) -> str:
    norm = abs_path(text, what)  # the one path rule: no ',' ':' or spaces either (Pyxis splits on them)
    if norm == "/":
        raise TaoError(f"{what} / cannot be a container mount (it would replace the image's own filesystem)")
    return norm


def parse(text: str | None) -> list[Mount]:
    """The user's extra mounts: ``SRC[:DST[:FLAGS]]`` items separated by commas."""
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        parts = item.split(":")
        if len(parts) > 3:
            raise TaoError(f"container mount {item!r} is not SRC[:DST[:FLAGS]]")
        src = _path(parts[0], "container mount source")
        dst = _path(parts[1], "container mount destination") if len(parts) > 1 and parts[1] else src
        flags = parts[2] if len(parts) == 3 else ""
        if flags and not _FLAGS.match(flags):
            raise TaoError(f"container mount {item!r} has flags {flags!r}: Pyxis takes ro, rw, ... (letters, '+', '_')")
        out.append(Mount(src, dst, flags))
    return out


#: The site's shared filesystem roots, mounted into every container (Pyxis ``SRC[:DST[:FLAGS]]`` list).
SITE_ROOTS_ENV = "SLURM_CONTAINER_MOUNTS"


def site_roots(env: Mapping[str, str], base: str, extra: Iterable[Mount] = ()) -> list[Mount]:
    """``SLURM_CONTAINER_MOUNTS``, else the results base's first folder (``/lustre/fsw/me`` -> ``/lustre``),
    so a job sees every path of the shared filesystem; a root an ``extra`` mount's destination covers is the
    user's to mount (their ``:ro`` wins)."""
    given = (env.get(SITE_ROOTS_ENV) or "").strip()
    if given:
        roots = parse(given)
    else:
        root = _path("/" + base.strip("/").split("/")[0], "results base root")
        roots = [Mount(root, root)]
    return [r for r in roots if not any(is_under(r.dst, m.dst) for m in extra)]


def derive(paths: Iterable[tuple[str, str]], extra: Iterable[Mount] = (),
           write: Iterable[tuple[str, str]] = ()) -> list[Mount]:
    """Mounts covering every ``(label, path)`` (read) and ``write`` path at its own path, plus the extra ones.

    A path already inside a same-path mount (``SRC`` = ``DST``, extra or
    derived) adds nothing, unless it must be written and that mount is
    read-only; a path inside another mount's destination is refused in one
    line naming both. Parents come before children (Pyxis mounts in order:
    a later parent would hide an earlier child).
    """
    extra = list(dict.fromkeys(extra))
    items = [(label, _path(p, label), False) for label, p in paths]
    items += [(label, _path(p, label), True) for label, p in write]
    # Outermost first, so a folder's mount covers the files named below it.
    items.sort(key=lambda lp: (lp[1].count("/"), lp[1]))
    same = [m for m in extra if m.src == m.dst]
    moved = [m for m in extra if m.src != m.dst]
    derived: list[Mount] = []
    for label, path, writable in items:
        for m in moved:
            if is_under(path, m.dst) or is_under(m.dst, path):
                raise TaoError(f"{label} {path} is hidden in the container by the mount {m.text()} (its destination "
                               f"{m.dst} overlaps it): mount that data at its own path, or move the mount elsewhere")
        if any(is_under(path, m.src) and not (writable and m.read_only) for m in same + derived):
            continue
        derived.append(Mount(path, path))
    # A derived folder that holds an extra same-path mount makes that mount redundant, not wrong.
    kept = [m for m in extra if not (m.src == m.dst and not m.flags and any(is_under(m.src, d.src) for d in derived))]
    return sorted(derived + kept, key=lambda m: m.dst.count("/"))  # stable: same depth keeps its order


def text(mounts: Iterable[Mount]) -> str:
    return ",".join(m.text() for m in mounts)
