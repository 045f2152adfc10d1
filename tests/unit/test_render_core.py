"""taobank.render on its own templates: any value lands exactly as given (YAML) or is refused/quoted (shell).

The platform renderers have their own property tests; these pin the core's
escaping for the pitfalls (quotes, '\\b', YAML fragments, '#SBATCH' injection).
"""
from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from taobank import render
from taobank.errors import TaoError

YAML_TMPL = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ name }}
spec:
  template:
    spec:
      containers:
      - name: main
        command: ["/bin/sh", "-c", {{ command }}]
        env:
        - name: X
          value: {{ value }}
"""
SHELL_TMPL = "#!/bin/sh\n#SBATCH --job-name={{ name }}\nprintf '%s' {{ value }}\n"

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)


@pytest.fixture(autouse=True)
def templates(tmp_path, monkeypatch):
    (tmp_path / "t.yaml.tmpl").write_text(YAML_TMPL)
    (tmp_path / "t.sh.tmpl").write_text(SHELL_TMPL)
    monkeypatch.setattr(render, "TEMPLATES", tmp_path)


def _expected(name, command, value):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"containers": [
                {"name": "main", "command": ["/bin/sh", "-c", command], "env": [{"name": "X", "value": value}]}]}}}}


PITFALLS = [
    'a" ; securityContext: {privileged: true}',
    "x\n        securityContext:\n          privileged: true",
    "\\b backspace \\n not a newline",
    "{{ name }} {% raw %}",
    "- item\n- other",
    "'single' and \"double\" and `back`",
    "\u2028\u2029\x85\x7f\x00\ufeff",
    "yes", "null", "0x10", "1e3", "~", "",
]


@pytest.mark.parametrize("s", PITFALLS)
def test_yaml_pitfall_strings_land_exactly(s):
    docs = render.render_yaml_documents("t.yaml.tmpl", {"name": s, "command": s, "value": s})
    assert docs == [_expected(s, s, s)]
    assert render.render_yaml_documents("t.yaml.tmpl", {"name": "n", "command": s, "value": s})[0] == _expected("n", s, s)


@settings(max_examples=300, deadline=None)
@given(_text, _text, _text)
def test_yaml_any_string_lands_exactly(name, command, value):
    docs = render.render_yaml_documents("t.yaml.tmpl", {"name": name, "command": command, "value": value})
    assert docs == [_expected(name, command, value)]
    # and survives a dump/parse round trip (what apply reads)
    import yaml

    assert list(yaml.safe_load_all(render.dump_yaml(docs))) == docs


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x00"), max_size=40))
def test_shell_any_single_line_value_reaches_the_program_exactly(value):
    text = render.render_text("t.sh.tmpl", {"name": "job", "value": value}, "shell")
    assert text.count("\n") == 3  # no value adds a line
    out = subprocess.run(["sh", "-c", text], capture_output=True, timeout=30)
    assert out.returncode == 0 and out.stdout == value.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("value", ["x\n#SBATCH --partition=evil", "x\rrm -rf /", "x\x00y"])
def test_shell_values_that_could_add_a_line_are_refused(value):
    with pytest.raises(TaoError, match="newline or NUL"):
        render.render_text("t.sh.tmpl", {"name": value, "value": "v"}, "shell")


def test_raw_is_verbatim_and_undefined_is_one_error():
    text = render.render_text("t.sh.tmpl", {"name": render.Raw("$(code-made)"), "value": "v"}, "shell")
    assert "#SBATCH --job-name=$(code-made)\n" in text
    with pytest.raises(TaoError, match="cannot render template t.sh.tmpl"):
        render.render_text("t.sh.tmpl", {"name": "x"}, "shell")
