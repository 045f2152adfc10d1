"""On the real SLURM cluster, ``submit --dry-run --check`` refuses what the submit would be refused for, before the
submit stages anything: a partition the cluster does not have (sbatch's ``Invalid partition name specified``, said
in one line naming the partitions sinfo lists, from the one preflight command), and a credential in ``--name``
(refused by every dry run and by the submit before any ssh command, the value never printed)."""
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
WRONG = ("error: partition gpuu is not a partition of this cluster (sinfo lists convert, local (the default)): set "
         "--partition or SLURM_PARTITION to one of them; nothing was submitted")


def _remote(log: Path) -> list[list[str]]:
    """The remote commands run (ssh with a command; the control master's own calls left out)."""
    return [argv for argv in call_log(log) if Path(argv[0]).name == "ssh" and "-O" not in argv and "-G" not in argv
            and argv[-1] != "true"]


def _submit(spec: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TAO_SLURM), "submit", "--spec", str(spec), *flags],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())


def _jobs_folder(env: dict) -> set[str]:
    folder = Path(env["SLURM_BASE_RESULTS_DIR"]) / "jobs"  # the local cluster's shared filesystem is this host's
    return set(os.listdir(folder)) if folder.is_dir() else set()


@pytest.fixture()
def spec(tmp_path) -> Path:
    path = tmp_path / "stand-in.json"
    path.write_text(json.dumps(base_spec(container_runtime="none")))
    return path


@pytest.mark.parametrize("partition", ["gpuu", "local,gpuu"])
def test_an_unknown_partition_fails_the_dry_run_check_as_the_submit_would(slurm_env, spec, partition):
    checked = _submit(spec, "--partition", partition, "--dry-run", "--check")
    assert checked.returncode == 1 and checked.stderr.splitlines() == [WRONG], checked.stderr
    assert len(_remote(slurm_env["call_log"])) == 1  # the one preflight command, as before: sinfo runs in it
    assert records.list_records() == []


def test_the_submit_refuses_it_before_staging_and_a_known_partition_passes(slurm_env, spec):
    refused = _submit(spec, "--partition", "gpuu")
    assert refused.returncode == 1 and refused.stderr.splitlines() == [WRONG], refused.stderr
    # the one preflight command and no other: nothing was staged (staging is a remote command of its own; the
    # shared jobs folder itself is no witness: other tests stage their jobs there meanwhile)
    assert len(_remote(slurm_env["call_log"])) == 1 and records.list_records() == []
    for partition in ("convert", "local"):
        good = _submit(spec, "--partition", partition, "--dry-run", "--check")
        assert good.returncode == 0, good.stderr
        assert f"(partition {partition}: 2 of its 2 node(s) can hold the job)" in good.stderr.splitlines()[0]
    assert records.list_records() == []


@pytest.mark.parametrize("flags", [("--dry-run",), ("--dry-run", "--check"), ()], ids=["dry-run", "check", "submit"])
def test_a_credential_in_the_name_is_refused_alike_with_no_command_run(slurm_env, spec, flags):
    res = _submit(spec, "--name", f"coco {TOKEN}", *flags)
    assert res.returncode == 1 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "the job name/description (--name) looks like it carries a credential" in res.stderr
    assert TOKEN not in res.stderr + res.stdout
    assert _remote(slurm_env["call_log"]) == [] and records.list_records() == []
