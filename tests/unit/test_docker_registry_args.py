"""pull and login: the image or registry is checked by the spec schema's image pattern, and reaches the engine
after ``--``, so a value can never be read as one of the engine's options."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from taobank.platforms.docker import spec as specmod
from taobank.errors import TaoError


@pytest.mark.parametrize("bad", ["-q", "--all-tags", "", "a b", "nvcr.io/x;rm -rf /", "img\n:1"])
def test_pull_refuses_what_is_not_an_image_before_any_engine_call(fake, cli, bad):
    out = cli("tao_docker.py", "pull", "--", bad)
    assert out.rc != 0 and fake.calls == [] and len(out.err_lines) == 1, out


@pytest.mark.parametrize("bad", ["-q", "--password=x", "reg istry"])
def test_login_refuses_a_registry_that_is_no_host_before_any_engine_call(fake, cli, monkeypatch, bad):
    monkeypatch.setenv("NGC_KEY", "nvapi-secretvalue1234567890")
    out = cli("tao_docker.py", "login", f"--registry={bad}")
    assert out.rc != 0 and fake.calls == [] and "nvapi-secretvalue1234567890" not in out.err, out


def test_pull_puts_the_image_after_the_end_of_options(fake, cli):
    fake.on("docker", lambda c: c.argv[1] == "pull", "done\n")
    out = cli("tao_docker.py", "pull", "127.0.0.1:5000/nvidia/tao:1")
    assert out.rc == 0, out
    assert [c.argv for c in fake.calls if c.argv[1] == "pull"] == [["docker", "pull", "--", "127.0.0.1:5000/nvidia/tao:1"]]


def test_the_submit_image_check_uses_the_end_of_options_too(fake):
    from taobank.platforms.docker import engine as eng, registry

    fake.on("docker", lambda c: c.argv[1:3] == ["image", "inspect"], "sha256:1")
    assert registry.ensure_image(eng.Engine("docker"), "img:1", "missing", print) == "image img:1 present"
    (inspect,) = [c for c in fake.calls if c.argv[1:3] == ["image", "inspect"]]
    assert inspect.argv[-2:] == ["--", "img:1"]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_check_image_agrees_with_the_schema(value):
    """One rule: what check_image accepts is exactly what the job spec schema accepts as an image."""
    from taobank import spec as core_spec

    schema_ok = not list(core_spec.validator(specmod.SCHEMA_NAME).iter_errors({"image": value, "command": "x"}))
    try:
        specmod.check_image(value)
        ok = True
    except TaoError as exc:
        ok = False
        assert "\n" not in str(exc)
    from taobank.redact import lint_text

    assert ok == (schema_ok and not lint_text(value)) and (not ok or not value.startswith("-"))


NVAPI = "nvapi-" + "Zx9_" * 8
AWS_SECRET = "wJalrXUtnFEMI/" + "K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize("key", [NVAPI, "nvapi-abcdefghijklmnopqrstuvwxyz0123", "ghp_" + "a1B2" * 10, AWS_SECRET])
def test_a_key_given_as_the_image_to_pull_never_reaches_argv_or_the_terminal(fake, cli, key):
    """Issue 38 item 5: ``pull KEY`` was passed on the engine's argv and printed back ("pulled nvapi-...")."""
    fake.on("docker", lambda c: True, f"Error: {key} not found\n", rc=1)
    out = cli("tao_docker.py", "pull", key)
    assert out.rc == 1 and fake.calls == [] and key not in out.out + out.err and len(out.err_lines) == 1, out
    assert "looks like a credential" in out.err


@pytest.mark.parametrize("flag", ["--registry", "--username"])
@pytest.mark.parametrize("key", [NVAPI, AWS_SECRET])
def test_a_key_given_as_registry_or_user_of_login_is_refused_unshown(fake, cli, monkeypatch, flag, key):
    monkeypatch.setenv("NGC_KEY", "nvapi-secretvalue1234567890")
    fake.on("docker", lambda c: True, "Login Succeeded\n")
    out = cli("tao_docker.py", "login", flag, key)
    assert out.rc == 1 and fake.calls == [] and key not in out.out + out.err and len(out.err_lines) == 1, out


def test_pull_progress_from_the_engine_is_masked_and_escaped(fake, cli):
    fake.on("docker", lambda c: c.argv[1] == "pull",
            f"\x1b]0;owned\x07layer 1 done\nauth {NVAPI}\n\x1b[2Jdone\n")
    out = cli("tao_docker.py", "pull", "127.0.0.1:5000/nvidia/tao:1")
    assert out.rc == 0 and "\x1b" not in out.err and "\x07" not in out.err and NVAPI not in out.err, out
    assert "layer 1 done" in out.err and "\\x1b" in out.err
