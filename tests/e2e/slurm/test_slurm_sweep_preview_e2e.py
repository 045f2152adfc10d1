"""A sweep's dry run with the local SLURM cluster's settings: no ssh at all and no record, and the array script
and trial scripts the same sweep then stages on the cluster are the ones it showed (ids swapped)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_helpers import base_spec, call_log

from taobank import records
from taobank.campaign import sweeps
from taobank.platforms.slurm.ssh import Connection

pytestmark = pytest.mark.e2e

BANK = Path(__file__).resolve().parents[3]


def helper(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_slurm.py"), *args], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_the_sweep_preview_contacts_nothing_and_shows_what_the_submit_stages(slurm_env, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(base_spec(container_runtime="none", command=["sh", "-c", "exit 0", "tao", "-e",
                                                                             "spec.yaml"])))
    flags = ["--spec", str(spec), "--sweep", "train.optim.lr=0.1,0.2,0.3", "--max-concurrent", "2", "--json"]
    shown = json.loads(helper("submit", *flags, "--dry-run").stdout)
    assert call_log(slurm_env["call_log"]) == [] and records.list_records() == []  # no ssh, not even a lint
    assert [t["overrides"] for t in shown["trials"]] == [{"train.optim.lr": v} for v in ("0.1", "0.2", "0.3")]
    done = json.loads(helper("submit", *flags).stdout)
    try:
        ids = [j["id"] for j in done["jobs"]]

        def swapped(text: str) -> str:
            for i, jid in enumerate(ids):
                text = text.replace(jid, sweeps.preview_ids(len(ids))[i])
            return text.replace(done["sweep"], sweeps.PREVIEW_SWEEP)

        jobs_dir = Path(done["jobs"][0]["backend"]["job_dir"]).parent
        paths = [str(jobs_dir / done["sweep"] / "sbatch" / "array.sbatch")] + \
            [str(jobs_dir / jid / "sbatch" / f"job_{jid}.sbatch") for jid in ids]
        conn = Connection()
        staged = [conn.remote(["cat", "--", p]).stdout for p in paths]
        assert swapped(staged[0]) == shown["shared"][0]["text"]
        assert [swapped(s) for s in staged[1:]] == [d["text"] for d in shown["sent"]]
        assert [swapped(j["results_dir"]) for j in done["jobs"]] == [t["results_dir"] for t in shown["trials"]]
    finally:
        subprocess.run([sys.executable, str(BANK / "scripts" / "tao_jobs.py"), "cancel", "--sweep", done["sweep"]],
                       capture_output=True, text=True, timeout=120)
