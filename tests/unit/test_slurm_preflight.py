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


def _answer(base: str) -> str:
    return (f"@@partitions\ngpu*|up|4:00:00|2|gpu:8\n@@base\n{base}\n@@enroot\nabsent\n@@pyxis\nyes\n"
            "@@sacct\nok\n")


def test_a_new_users_base_that_submit_would_create_is_ok(slurm):
    from taobank.slurm import preflight

    slurm.ssh("PREFLIGHT", _answer("creatable /lustre/site"))
    report = preflight.run_preflight(partition="gpu")
    assert report["ok"] and report["results_base_state"] == "creatable"
    assert any(ln.startswith("OK results base:") and "submit creates it (/lustre/site is writable)" in ln
               for ln in report["lines"])
    for state in ("absent", "readonly"):
        slurm.ssh("PREFLIGHT", _answer(state))
        report = preflight.run_preflight(partition="gpu")
        assert not report["ok"] and any(ln.startswith("MISSING: results base") and state in ln for ln in report["lines"])


def test_the_remote_base_check_tells_creatable_from_absent(tmp_path):
    import subprocess

    from taobank.slurm import remote

    check = remote.PREFLIGHT[remote.PREFLIGHT.index('echo "@@base"'):remote.PREFLIGHT.index('echo "@@enroot"')]
    (tmp_path / "file").write_text("")

    def state(path: str) -> str:
        return subprocess.run(["bash", "-c", check, "x", "gpu", path], capture_output=True, text=True).stdout.split("\n")[1]

    assert state(str(tmp_path)) == "writable"
    assert state(str(tmp_path / "me" / "deeper")) == f"creatable {tmp_path}"
    assert state(str(tmp_path / "file" / "me")) == "absent"  # under a file: mkdir -p cannot make it
