"""Who the container runs as, so the job's results belong to the submitting user on every kind of engine.

A rootful engine runs the container as root unless told otherwise: ``--user UID:GID`` (the caller's).
A rootless engine maps the container's root to the caller already; there ``--user UID:GID`` would be a
sub-uid of the caller's namespace that cannot write the bind-mounted folder. So rootless Docker gets no
``--user``, rootless Podman ``--userns keep-id`` (the caller's own uid inside the container too).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from ...errors import TaoError
from . import engine as eng


def read_info(e: eng.Engine) -> dict:
    """``<engine> info`` as JSON (one call: the version, the runtimes, rootless or not)."""
    res = e.run(["info", "--format", "{{json .}}"], what=f"{e.name} info")
    try:
        info = json.loads(res.stdout)
    except ValueError:
        raise TaoError(f"{e.name} info printed no JSON: check the engine ({e.name} info)") from None
    return info if isinstance(info, dict) else {}


def version(info: Mapping[str, Any]) -> str:
    """The engine's version: Docker's ``ServerVersion``, Podman's ``version.Version``."""
    return str(info.get("ServerVersion") or (info.get("version") or {}).get("Version") or "?")


def rootless(info: Mapping[str, Any]) -> bool:
    """Docker lists ``name=rootless`` in SecurityOptions; Podman says ``host.security.rootless`` (also when it
    answers as ``docker``, the podman-docker shim)."""
    if any("name=rootless" in str(o) or str(o) == "rootless" for o in info.get("SecurityOptions") or []):
        return True
    return bool(((info.get("host") or {}).get("security") or {}).get("rootless"))


def user_flags(engine: str, is_rootless: bool, caller: str) -> tuple[str, str | None]:
    """(``--user`` value, ``--userns`` value) for the run; an empty user means no ``--user``."""
    if not is_rootless:
        return caller, None
    return ("", "keep-id") if engine == "podman" else ("", None)


def note(engine: str, is_rootless: bool) -> str:
    """The gate line's words on who the container runs as."""
    if not is_rootless:
        return "runs as you (--user)"
    return "rootless: runs as you (--userns keep-id)" if engine == "podman" else "rootless: its root is you (no --user)"
