#!/usr/bin/env python3
"""Host preflight for the TAO skill bank: print what is missing, exit 1 if anything is.

  check_host.py [--platform kubernetes|slurm|docker] [--json]

Checks python3 against versions.yaml tools.python_min, the packages listed in
requirements.txt, and the platform client (kubectl >= tools.kubectl_min for
Kubernetes, ssh >= tools.openssh_min for SLURM, docker or podman for Docker). Read-only: installs nothing.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
from importlib import metadata

from taobank import BANK_ROOT, pins, registry
from taobank.cli.entry import BankParser
from taobank.cli.entry import print_json, run_main
from taobank.errors import MissingDependency
from taobank.registry import HostClient
from taobank.run import run

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:>=\s*([0-9][0-9A-Za-z.]*))?")


def version_tuple(text: str) -> tuple[int, ...]:
    """'1.28.3' / 'v1.28.3+k3s1' / '9.2p1' -> (1, 28, 3) / (9, 2): leading numeric fields only."""
    m = re.search(r"\d+(?:\.\d+)*", text or "")
    return tuple(int(p) for p in m.group(0).split(".")) if m else ()


def at_least(found: str, minimum: str) -> bool:
    return version_tuple(found) >= version_tuple(minimum)


def _check(name: str, ok: bool, found: str, need: str, fix: str) -> dict:
    return {"name": name, "ok": ok, "found": found, "need": need, "fix": "" if ok else fix}


def _minimum(key: str) -> str | None:
    """A minimum from versions.yaml, or None while pyyaml itself is missing.

    This is the first thing a fresh host runs: without pyyaml it must still list
    every gap (the package rows say what to install), not stop at the first one.
    """
    try:
        return str(pins.resolve(key))
    except MissingDependency:
        return None


_UNREAD = "minimum not checked until pyyaml is installed"


def check_python() -> dict:
    need = _minimum("tools.python_min")
    found = ".".join(str(p) for p in sys.version_info[:3])
    if need is None:
        return _check("python3", True, found, _UNREAD, "")
    return _check("python3", at_least(found, need), found, f">= {need}", f"install Python >= {need} and run the helpers with it")


def check_requirements() -> list[dict]:
    out = []
    req = BANK_ROOT / "requirements.txt"
    for line in req.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        m = _REQ.match(line)
        if not line or line.startswith("-") or not m:
            continue
        dist, minimum = m.group(1), m.group(2) or ""
        fix = f"{sys.executable} -m pip install -r {req}"
        try:
            found = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out.append(_check(dist, False, "not installed", f">= {minimum}" if minimum else "installed", fix))
            continue
        out.append(_check(dist, not minimum or at_least(found, minimum), found, f">= {minimum}" if minimum else "installed", fix))
    return out


def check_client(client: HostClient) -> dict:
    """A platform's client (its package's ``INFO.client``): one of its programs on PATH, at the version needed."""
    found = [name for name in client.programs if shutil.which(name)]
    wanted = " or ".join(client.programs)
    if not client.version_argv:
        return _check(client.label, bool(found), ", ".join(found) or "not on PATH", wanted, client.install)
    need = _minimum(client.minimum_key) if client.minimum_key else None
    product = f"{client.product} " if client.product else ""
    if not found:
        return _check(client.label, False, "not on PATH", f"{product}>= {need or '(see versions.yaml)'}", client.install)
    res = run(list(client.version_argv), check=False, timeout=20)
    m = re.search(client.version_pattern, res.stdout + res.stderr)
    version = m.group(1) if m else "unknown"
    if need is None:
        return _check(client.label, True, version, _UNREAD, "")
    return _check(client.label, bool(m) and at_least(version, need), version, f"{product}>= {need}",
                  f"upgrade {client.upgrade or client.label} to >= {need}")


def checks(platform: str | None) -> list[dict]:
    out = [check_python(), *check_requirements()]
    if platform:
        out.append(check_client(registry.info(platform).client))
    return out


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    parser = BankParser(prog="check_host.py", description=__doc__.splitlines()[0])
    parser.add_argument("--platform", choices=list(registry.names()), help="also check that platform's client")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    results = checks(args.platform)
    ok = all(r["ok"] for r in results)
    if args.json:
        print_json({"ok": ok, "platform": args.platform, "checks": results})
    else:
        for r in results:
            if r["ok"]:
                print(f"OK: {r['name']} {r['found']} ({r['need']})")
            else:
                print(f"MISSING: {r['name']} {r['found']} (need {r['need']}): {r['fix']}")
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main)
