"""nvidia-smi's failures reach the user as one line: the last line of its multi-line output, never all of it."""
from __future__ import annotations

import pytest

from taobank.platforms.docker import gpus
from taobank.errors import TaoError

STDERR = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
          "Make sure that the latest NVIDIA driver is installed and running.\n\n")


def test_a_failing_nvidia_smi_is_one_line(fake, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    fake.on("nvidia-smi", lambda c: True, "", rc=9, stderr=STDERR)
    with pytest.raises(TaoError) as exc:
        gpus.host_gpus()
    text = str(exc.value)
    assert "\n" not in text and "Make sure that the latest NVIDIA driver" in text and "exit 9" in text
    assert "couldn't communicate" not in text  # only the last line is quoted
