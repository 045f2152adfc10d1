"""Fixtures every client test shares: a private copy of the bank and a private HOME for the client."""
from __future__ import annotations

from pathlib import Path

import pytest
from client_harness import client_env, copy_bank


@pytest.fixture()
def bank(tmp_path) -> Path:
    return copy_bank(tmp_path / "clone")


@pytest.fixture()
def env(tmp_path) -> dict[str, str]:
    return client_env(tmp_path / "home")
