"""The agent CLIs (Claude Code, Codex) and the MCP Inspector the client tests drive, installed from npm.

Each pin in versions.yaml ``agent_clients`` (``<package>@<version>``) is
installed once into ``$TAO_CACHE_DIR/npm/<package>@<version>`` (default
``~/.cache/tao-skill-bank``), so a warm CI run only checks a marker file.

  python3 -m devtools.agent_clients install    (from the bank root) install what is missing
  python3 -m devtools.agent_clients paths      print KEY=BIN for each client
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from taobank import pins
from taobank.errors import TaoError

#: versions.yaml key -> the executable the package installs.
BINARIES = {"claude_code": "claude", "codex": "codex", "mcp_inspector": "mcp-inspector"}
MARKER = ".installed"


@dataclass(frozen=True)
class Client:
    key: str
    package: str
    version: str

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"

    @property
    def prefix(self) -> Path:
        return cache_dir() / "npm" / self.spec

    @property
    def binary(self) -> Path:
        return self.prefix / "node_modules" / ".bin" / BINARIES[self.key]

    def installed(self) -> bool:
        """True when a finished install of exactly this spec sits in the cache."""
        marker = self.prefix / MARKER
        return marker.is_file() and marker.read_text(encoding="utf-8").strip() == self.spec and self.binary.is_file()


def cache_dir() -> Path:
    return Path(os.environ.get("TAO_CACHE_DIR") or Path.home() / ".cache" / "tao-skill-bank")


def split_spec(spec: str) -> tuple[str, str]:
    """``@scope/name@1.2.3`` -> (``@scope/name``, ``1.2.3``); the version must be exact."""
    package, sep, version = spec.rpartition("@")
    if not sep or not package or not version or not all(part.isdigit() for part in version.split(".")):
        raise TaoError(f"agent client pin {spec!r} is not <package>@<major.minor.patch>: fix versions.yaml agent_clients")
    return package, version


def client(key: str) -> Client:
    """The pinned client for a versions.yaml ``agent_clients`` key."""
    if key not in BINARIES:
        raise TaoError(f"unknown agent client {key!r}: one of {', '.join(BINARIES)}")
    package, version = split_spec(str(pins.resolve(f"agent_clients.{key}")))
    return Client(key, package, version)


def clients() -> list[Client]:
    return [client(key) for key in BINARIES]


def ensure(c: Client) -> Path:
    """Install ``c`` from npm unless its marker says it is there; return its binary."""
    if c.installed():
        return c.binary
    npm = shutil.which("npm")
    if not npm:
        raise TaoError("npm not found: install Node.js 18+ with npm, then rerun")
    if c.prefix.exists():
        shutil.rmtree(c.prefix)  # a half-finished install: start clean
    c.prefix.mkdir(parents=True)
    proc = subprocess.run(
        [npm, "install", "--prefix", str(c.prefix), "--no-audit", "--no-fund", "--no-save", "--loglevel=error", c.spec],
        capture_output=True, text=True, timeout=900,
    )
    if proc.returncode != 0 or not c.binary.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TaoError(f"npm install {c.spec} failed (exit {proc.returncode}): {tail[0]}")
    (c.prefix / MARKER).write_text(c.spec + "\n", encoding="utf-8")
    return c.binary


def main(argv: list[str]) -> int:
    if argv == ["install"]:
        for c in clients():
            was = c.installed()
            ensure(c)
            print(f"{c.spec}: {'cached' if was else 'installed'} ({c.binary})")
        return 0
    if argv == ["paths"]:
        for c in clients():
            print(f"{c.key}={c.binary}")
        return 0
    print("usage: python3 -m devtools.agent_clients install|paths", file=sys.stderr)
    return 2


if __name__ == "__main__":
    from taobank.cli.entry import run_main

    run_main(main)
