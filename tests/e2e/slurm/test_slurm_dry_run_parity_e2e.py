"""On the real SLURM cluster, a dry run refuses what the submit would be refused for, before the submit stages
anything: a credential in ``--name`` (refused by every dry run and by the submit before any ssh command, the value
never printed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_helpers import base_spec, call_log

from taobank import records

pytestmark = pytest.mark.e2e
TAO_SLURM = Path(__file__).resolve().parents[3] / "scripts" / "tao_slurm.py"
#: made here, so no scanner of this repository flags the file; the shape of an NGC API key
TOKEN = "nvapi-" + "Zq8Xw3Lp9Rt2Vb6Nm4Kc7Hd1Fg5Js0Ya" * 2


def _remote(log: Path) -> list[list[str]]:
    """The remote commands run (ssh with a command; the control master's own calls left out)."""
    return [argv for argv in call_log(log) if Path(argv[0]).name == "ssh" and "-O" not in argv and "-G" not in argv
            and argv[-1] != "true"]


def _submit(spec: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TAO_SLURM), "submit", "--spec", str(spec), *flags],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())


@pytest.fixture()
def spec(tmp_path) -> Path:
    path = tmp_path / "stand-in.json"
    path.write_text(json.dumps(base_spec(container_runtime="none")))
    return path


@pytest.mark.parametrize("flags", [("--dry-run",), ("--dry-run", "--check"), ()], ids=["dry-run", "check", "submit"])
def test_a_credential_in_the_name_is_refused_alike_with_no_command_run(slurm_env, spec, flags):
    res = _submit(spec, "--name", f"coco {TOKEN}", *flags)
    assert res.returncode == 1 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "the job name/description (--name) looks like it carries a credential" in res.stderr
    assert TOKEN not in res.stderr + res.stdout
    assert _remote(slurm_env["call_log"]) == [] and records.list_records() == []
