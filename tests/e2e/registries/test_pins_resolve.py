"""Every package pin of versions.yaml resolves on its registry: ``pip download --no-deps`` of each wheel pin,
its extras declared by the package. Needs PyPI (marked e2e: it runs in scripts/test.sh, never skipped)."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from taobank import pins

pytestmark = pytest.mark.e2e

WHEELS = sorted(pins.resolve("wheels").items())


@pytest.mark.parametrize("key,pin", WHEELS, ids=[k for k, _ in WHEELS])
def test_the_pinned_wheel_downloads_and_has_its_extras(key, pin, tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                        "-q", "-d", str(tmp_path), pin], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"wheels.{key} {pin!r} does not resolve on PyPI: {r.stderr.strip()[-400:]}"
    (wheel,) = list(Path(tmp_path).glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        meta = Parser().parsestr(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())
    extras = pin.split("[", 1)[1].split("]", 1)[0].split(",") if "[" in pin else []
    assert set(extras) <= set(meta.get_all("Provides-Extra") or []), (pin, meta.get_all("Provides-Extra"))
    assert meta["Version"] == pin.split("==", 1)[1]
