"""Debian packages the local clusters need, installed with apt-get when missing (test infrastructure).

Package maintainer scripts must not start system daemons (containerd,
docker-registry, munge, mariadb, slurm) on their default sockets and ports:
the clusters start their own instances, so a temporary ``policy-rc.d``
refuses every service start during the install.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from taobank.errors import TaoError
from taobank.run import run

POLICY_RC = Path("/usr/sbin/policy-rc.d")


def installed(packages: tuple[str, ...]) -> dict[str, str]:
    """``{package: version}`` of those of ``packages`` that are installed."""
    res = run(["dpkg-query", "-W", "-f", "${Package} ${Status} ${Version}\\n", *packages], check=False, timeout=30)
    found = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[1:4] == ["install", "ok", "installed"]:
            found[parts[0]] = parts[4]
    return found


def ensure(packages: tuple[str, ...], what: str) -> tuple[dict[str, str], float]:
    """Install what is missing (root, apt-get); return ``(installed versions, seconds spent)``."""
    found = installed(packages)
    if len(found) == len(packages):
        return found, 0.0
    missing = sorted(set(packages) - set(found))
    if os.geteuid() != 0:
        raise TaoError(f"the local {what} needs packages {missing}: install them as root (apt-get install ...)")
    if not shutil.which("apt-get"):
        raise TaoError(f"missing packages {missing} and no apt-get: use Debian 12")
    t0 = time.monotonic()
    guard = not POLICY_RC.exists()
    if guard:
        POLICY_RC.write_text("#!/bin/sh\nexit 101\n", encoding="utf-8")
        POLICY_RC.chmod(0o755)
    try:
        apt_env = {"DEBIAN_FRONTEND": "noninteractive"}
        run(["apt-get", "update", "-qq"], timeout=600, env=apt_env, what="apt-get update")
        run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
            timeout=1200, env=apt_env, what=f"apt-get install ({what} packages)")
    finally:
        if guard:
            POLICY_RC.unlink(missing_ok=True)
    return installed(packages), time.monotonic() - t0


def check_pins(found: dict[str, str], pinned: dict[str, str]) -> None:
    """Refuse a package whose version does not start with its versions.yaml pin (``{package: key}``)."""
    from taobank import pins

    for pkg, key in pinned.items():
        want = str(pins.resolve(key))
        have = found.get(pkg, "?").split(":", 1)[-1]
        if not have.startswith(want):
            raise TaoError(f"{pkg} {have} is installed but versions.yaml {key} pins {want}: use Debian 12 or update the pin")
