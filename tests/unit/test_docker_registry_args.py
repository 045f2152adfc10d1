"""pull and login: the image or registry is checked by the spec schema's image pattern, and reaches the engine
after ``--``, so a value can never be read as one of the engine's options."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from taobank.docker import spec as specmod
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
    assert fake.calls[-1].argv == ["docker", "pull", "--", "127.0.0.1:5000/nvidia/tao:1"]


def test_the_submit_image_check_uses_the_end_of_options_too(fake):
    from taobank.docker import engine as eng, registry

    fake.on("docker", lambda c: c.argv[1:3] == ["image", "inspect"], "sha256:1")
    assert registry.ensure_image(eng.Engine("docker"), "img:1", "missing", print) == "image img:1 present"
    assert fake.calls[-1].argv[-2:] == ["--", "img:1"]


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
    assert ok == schema_ok and (not ok or not value.startswith("-"))
