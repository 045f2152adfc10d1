"""SLURM preflight against the fake ssh: every partition a job needs must exist."""
from __future__ import annotations


def test_preflight_checks_the_conversion_partition_too(slurm, monkeypatch):
    from taobank.slurm import preflight

    answer = ("@@partitions\ngpu*|up|4:00:00|2|gpu:8\n@@base\nwritable\n@@enroot\nabsent\n@@pyxis\nyes\n"
              "@@sacct\nok\n")
    slurm.ssh("PREFLIGHT", answer)
    monkeypatch.setenv("TAO_SLURM_CONVERSION_PARTITION", "cpu")
    report = preflight.run_preflight(partition="gpu")
    assert not report["ok"] and any("MISSING: partition(s) cpu not in sinfo" in ln for ln in report["lines"])
    monkeypatch.setenv("TAO_SLURM_CONVERSION_PARTITION", "gpu")
    assert preflight.run_preflight(partition="gpu")["ok"]
