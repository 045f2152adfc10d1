"""Shared core of the TAO skill bank.

Every helper in ``scripts/`` imports this package from the directory beside
it, so the bank runs without being installed (only its dependencies are).
"""
from __future__ import annotations

from pathlib import Path

#: Root of the bank checkout (the folder holding versions.yaml).
BANK_ROOT: Path = Path(__file__).resolve().parents[2]
