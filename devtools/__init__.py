"""Development and CI tooling of the bank (skill lint, plugin manifests, pin
stamping, the pinned agent CLIs for the client tests).

Kept beside ``scripts/`` rather than in ``taobank``, the runtime package the
skills call: taobank never imports this package. These tools use taobank, which
lives uninstalled in ``scripts/``, so importing this package puts that folder
on ``sys.path`` (``python3 -m devtools.agent_clients`` from the bank root works).
"""
from __future__ import annotations

import sys
from pathlib import Path

_SCRIPTS = str(Path(__file__).resolve().parents[1] / "scripts")
if _SCRIPTS not in sys.path:
    sys.path.insert(1, _SCRIPTS)
