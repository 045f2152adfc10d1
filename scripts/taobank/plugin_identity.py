"""The plugin's name and version (versions.yaml ``bank``), read from any bank checkout.

The SessionStart helper needs them at run time to find Codex's installed copy;
the manifest sync (dev tooling) stamps them into every manifest.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from . import pins


@contextmanager
def versions_of(root: Path) -> Iterator[None]:
    """Point taobank.pins at ``root``'s versions.yaml for the duration (a copy of the bank works)."""
    old = os.environ.get(pins.VERSIONS_ENV)
    os.environ[pins.VERSIONS_ENV] = str(root / "versions.yaml")
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(pins.VERSIONS_ENV, None)
        else:
            os.environ[pins.VERSIONS_ENV] = old


def bank_identity(root: Path) -> dict[str, str]:
    """``{"name", "version"}`` from ``root``'s versions.yaml ``bank`` section."""
    with versions_of(root):
        return {"name": str(pins.resolve("bank.name")), "version": str(pins.resolve("bank.version"))}
