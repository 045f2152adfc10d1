"""SLURM preflight against the fake ssh: every partition a job needs must exist."""
from __future__ import annotations

import pytest


def test_preflight_checks_the_conversion_partition_too(slurm, monkeypatch):
    from taobank.platforms.slurm import preflight

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
    from taobank.platforms.slurm import preflight

    slurm.ssh("PREFLIGHT", _answer("creatable /lustre/site"))
    report = preflight.run_preflight(partition="gpu")
    assert report["ok"] and report["results_base_state"] == "creatable"
    assert any(ln.startswith("OK: results base:") and "submit creates it (/lustre/site is writable)" in ln
               for ln in report["lines"])
    for state in ("absent", "readonly"):
        slurm.ssh("PREFLIGHT", _answer(state))
        report = preflight.run_preflight(partition="gpu")
        assert not report["ok"] and any(ln.startswith("MISSING: results base") and state in ln for ln in report["lines"])


def test_the_remote_base_check_tells_creatable_from_absent(tmp_path):
    import subprocess

    from taobank.platforms.slurm import remote

    check = remote.PREFLIGHT[remote.PREFLIGHT.index('echo "@@base"'):remote.PREFLIGHT.index('echo "@@enroot"')]
    (tmp_path / "file").write_text("")

    def state(path: str) -> str:
        return subprocess.run(["bash", "-c", check, "x", "gpu", path], capture_output=True, text=True).stdout.split("\n")[1]

    assert state(str(tmp_path)) == "writable"
    assert state(str(tmp_path / "me" / "deeper")) == f"creatable {tmp_path}"
    assert state(str(tmp_path / "file" / "me")) == "absent"  # under a file: mkdir -p cannot make it


# ------------------------------------------------------------------ enroot credentials for NGC: two machine lines
KEY = "nvapi-" + "k" * 40


def test_enroot_credentials_for_nvcr_io_write_both_ngc_machine_lines_key_on_stdin_only(slurm):
    from taobank.platforms.slurm import preflight

    slurm.ssh("ENROOT_CREDS", "")
    preflight.install_enroot_credentials("nvcr.io", KEY)
    (call,) = slurm.of("ssh")
    assert call.script == "ENROOT_CREDS" and call.args == ["nvcr.io", "authn.nvidia.com"]
    assert call.stdin == (f"machine nvcr.io login $oauthtoken password {KEY}\n"
                          f"machine authn.nvidia.com login $oauthtoken password {KEY}\n")
    assert not any(KEY in a for c in slurm.calls for a in c.argv)


def test_the_remote_install_replaces_exactly_those_machine_lines(tmp_path):
    import os
    import subprocess

    from taobank.platforms.slurm import remote

    creds = tmp_path / ".config" / "enroot" / ".credentials"
    creds.parent.mkdir(parents=True)
    creds.write_text("machine nvcr.io login $oauthtoken password old\nmachine authn.nvidia.com login $oauthtoken "
                     "password old\nmachine ghcr.io login me password keep\n")
    new = "machine nvcr.io login $oauthtoken password new\nmachine authn.nvidia.com login $oauthtoken password new\n"
    subprocess.run(["sh", "-c", remote.ENROOT_CREDS, "tao", "nvcr.io", "authn.nvidia.com"], input=new, text=True,
                   check=True, env={**os.environ, "HOME": str(tmp_path)})
    assert sorted(creds.read_text().splitlines()) == sorted(
        ["machine ghcr.io login me password keep"] + new.splitlines())


def test_the_remote_preflight_names_the_machines_and_never_prints_a_value(tmp_path):
    import os
    import subprocess

    from taobank.platforms.slurm import remote

    check = remote.PREFLIGHT[remote.PREFLIGHT.index('echo "@@enroot"'):remote.PREFLIGHT.index('echo "@@pyxis"')]
    creds = tmp_path / ".config" / "enroot" / ".credentials"
    creds.parent.mkdir(parents=True)
    creds.write_text(f"machine nvcr.io login $oauthtoken password {KEY}\n\nmachine\n")
    out = subprocess.run(["sh", "-c", check, "x", "gpu", "/base"], capture_output=True, text=True,
                         env={**os.environ, "HOME": str(tmp_path)}).stdout
    assert out == "@@enroot\npresent\nmachine nvcr.io\n" and KEY not in out


@pytest.mark.parametrize("machines,ok", [([], False), (["nvcr.io"], False), (["nvcr.io", "authn.nvidia.com"], True)])
def test_private_registry_preflight_needs_both_ngc_machine_lines(slurm, machines, ok):
    from taobank.platforms.slurm import preflight

    lines = "".join(f"machine {m}\n" for m in machines)
    slurm.ssh("PREFLIGHT", f"@@partitions\ngpu*|up|4:00:00|2|gpu:8\n@@base\nwritable\n@@enroot\n"
                           f"{'present' if machines else 'absent'}\n{lines}@@pyxis\nyes\n@@sacct\nok\n")
    report = preflight.run_preflight(partition="gpu", private_registry=True)
    assert report["ok"] is ok and report["enroot_machines"] == machines
    if not ok:
        missing = [ln for ln in report["lines"] if ln.startswith("MISSING: enroot credentials")]
        assert len(missing) == 1 and "authn.nvidia.com" in missing[0] and "enroot-credentials" in missing[0]
