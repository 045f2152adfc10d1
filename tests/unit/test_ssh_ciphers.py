"""The SSH master asks for AES-GCM first where ssh_config left OpenSSH's default cipher order and the CPU has AES
instructions; a site's own cipher list is never touched."""
from __future__ import annotations

from taobank.platforms.slurm import ssh


def test_aes_gcm_first_only_over_the_default_order_on_an_aes_cpu():
    assert ssh.cipher_options(ssh.DEFAULT_CIPHERS, aes=True) == ["-o", f"Ciphers={ssh.AES_FIRST_CIPHERS}"]
    assert ssh.cipher_options(ssh.DEFAULT_CIPHERS, aes=False) == []
    assert ssh.cipher_options("aes256-ctr", aes=True) == []  # the site chose: kept
    assert ssh.cipher_options(None, aes=True) == []  # ssh -G said nothing
    # the same set, reordered: a server that accepted the default accepts this
    assert sorted(ssh.AES_FIRST_CIPHERS.split(",")) == sorted(ssh.DEFAULT_CIPHERS.split(","))


def test_cpu_flags_are_read_on_x86_and_arm(tmp_path):
    x86, arm, none = tmp_path / "x86", tmp_path / "arm", tmp_path / "none"
    x86.write_text("processor\t: 0\nflags\t\t: fpu sse2 aes avx2\n")
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd aes pmull sha1\n")
    none.write_text("processor\t: 0\nflags\t\t: fpu sse2 aesx\n")
    assert ssh.cpu_has_aes(str(x86)) and ssh.cpu_has_aes(str(arm))
    assert not ssh.cpu_has_aes(str(none)) and not ssh.cpu_has_aes(str(tmp_path / "missing"))


def test_a_new_master_asks_for_aes_first_when_ssh_g_shows_the_default(fake, monkeypatch):
    monkeypatch.setenv("SLURM_HOSTNAME", "login")
    monkeypatch.setenv("SLURM_USER", "u")
    monkeypatch.setattr(ssh, "cpu_has_aes", lambda: True)
    fake.on("ssh", lambda c: c.words == ["-O", "check"], "", rc=255, label="no master")
    fake.on("ssh", lambda c: c.words == ["-G"], f"controlpath /nonexistent/x\nciphers {ssh.DEFAULT_CIPHERS}\n")
    fake.on("ssh", lambda c: c.argv[-1] == "true", "", label="master")
    ssh.Connection().connect()
    (master,) = [c for c in fake.of("ssh") if c.argv[-1] == "true"]
    assert f"Ciphers={ssh.AES_FIRST_CIPHERS}" in master.argv
