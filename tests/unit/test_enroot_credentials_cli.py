"""``tao_slurm.py enroot-credentials``: a help text that says what it writes where, and a ``--dry-run`` that prints
the lines it would write with the key masked, contacting nothing; the key never reaches stdout or stderr (a
recognisable fake key is looked for in every output, errors included)."""
from __future__ import annotations

import json

import pytest

KEY = "nvapi-FAKEKEY-" + "q7" * 20  # recognisable: it must never appear in any output


@pytest.fixture()
def key(slurm, monkeypatch):
    monkeypatch.setenv("NGC_KEY", KEY)
    return slurm


def _never_shows_the_key(*outs) -> None:
    for out in outs:
        assert KEY not in out.out and KEY not in out.err, out
        assert KEY[len("nvapi-"):20] not in out.out + out.err, out  # no part of it either


def test_the_help_text_says_what_is_written_where_and_offers_a_dry_run(cli):
    out = cli("tao_slurm.py", "enroot-credentials", "--help")
    assert out.rc == 0, out
    text = " ".join(out.out.split())
    assert "~/.config/enroot/.credentials (mode 600)" in text and "authn.nvidia.com" in text
    assert "on stdin" in text and "never printed" in text and "preflight --private-registry" in text
    for flag, words in (("--registry HOST", "registry host"), ("--key-env NAME", "environment variable"),
                        ("--dry-run", "key masked"), ("--json", "as JSON")):
        assert flag in text and words in text, flag
    assert "enroot-credentials" in cli("tao_slurm.py", "--help").out


def test_dry_run_prints_the_lines_with_the_key_masked_and_contacts_nothing(key, cli):
    out = cli("tao_slurm.py", "enroot-credentials", "--registry", "nvcr.io", "--dry-run")
    assert out.rc == 0 and out.err == "", out
    assert "nothing was contacted or written" in out.out and "~/.config/enroot/.credentials" in out.out
    assert "  machine nvcr.io login $oauthtoken password ********" in out.out.splitlines()
    assert "  machine authn.nvidia.com login $oauthtoken password ********" in out.out.splitlines()
    shown = cli("tao_slurm.py", "enroot-credentials", "--dry-run", "--json")
    got = json.loads(shown.out)
    assert got["dry_run"] is True and got["machines"] == ["nvcr.io", "authn.nvidia.com"] and got["mode"] == "600"
    assert all(line.endswith("password ********") for line in got["lines"]) and got["login_hosts"]
    assert key.calls == []  # no ssh, no remote script: nothing written anywhere
    _never_shows_the_key(out, shown)


def test_dry_run_refuses_as_the_install_would_and_never_names_the_key(key, cli, monkeypatch):
    bad = cli("tao_slurm.py", "enroot-credentials", "--registry", "not a host", "--dry-run")
    assert bad.rc == 1 and "--registry must be a host name" in bad.err, bad
    monkeypatch.setenv("SLURM_HOSTNAME", "")
    no_host = cli("tao_slurm.py", "enroot-credentials", "--dry-run")
    assert no_host.rc == 1 and "SLURM_HOSTNAME is empty" in no_host.err, no_host
    monkeypatch.delenv("NGC_KEY")
    no_key = cli("tao_slurm.py", "enroot-credentials", "--dry-run")
    assert no_key.rc == 1 and "NGC_KEY is not set" in no_key.err, no_key
    assert key.calls == []
    _never_shows_the_key(bad, no_host, no_key)


def test_the_install_itself_prints_no_key_either(key, cli):
    key.ssh("ENROOT_CREDS", "")
    out = cli("tao_slurm.py", "enroot-credentials")
    assert out.rc == 0 and "installed in ~/.config/enroot/.credentials" in out.out, out
    (call,) = key.of("ssh")
    assert KEY in call.stdin and not any(KEY in a for a in call.argv)
    key.ssh("ENROOT_CREDS", "", rc=1, stderr="mkdir: cannot create directory: Permission denied")
    failed = cli("tao_slurm.py", "enroot-credentials", "--json")
    assert failed.rc == 1, failed
    _never_shows_the_key(out, failed)
