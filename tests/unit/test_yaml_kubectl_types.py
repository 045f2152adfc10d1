"""YAML the bank writes keeps every string a string for every reader, and any mapping key renders.

kubectl reads YAML with go-yaml (YAML 1.1 with its own quirks): a string PyYAML's resolver leaves
unquoted (``y``, ``1e3``, ``09``, ``0o17``, ``2001-12-14``) comes back true, 1000, 9, 15... So
:func:`taobank.render.dump_yaml` quotes every string value, and leaves a mapping key plain only when
no YAML reader can take it for anything but that string. The real kubectl round trip is
tests/e2e/kubernetes/test_kubectl_roundtrip.py.

A mapping key over 1,024 characters is no implicit YAML key: rendering one used to raise
yaml.ParserError; it now renders exactly, and a Kubernetes key no server accepts is refused in one line.
"""
from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from taobank import render
from tests.support.kube_objects import SCRIPT, objects
from taobank.errors import TaoError
from taobank.platforms.kubernetes.render import MAX_QUALIFIED_KEY_LEN, build_context, render_manifests

#: Strings YAML 1.1 readers (PyYAML, go-yaml v2/v3) may read as something else when left plain.
YAML11_FORMS = [
    "y", "Y", "n", "N", "yes", "No", "on", "ON", "off", "Off", "true", "False", "null", "NULL", "~", "",
    "1e3", "1E3", "09", "0o17", "0x1F", "0b101", "1_000", "+1", "-1", ".5", "1.", "-.inf", ".inf", ".NaN",
    "190:20:30", "1:20", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "=", "<<", "- x", "? x", "a: b", "# c",
    "&a", "*a", "!t", "!!str", "%TAG", "---", "...", "|", ">", "@x", "`x", "'", '"', "\\", "[1]", "{a: 1}",
    " lead", "trail ", "\t", "\x00", "\x85", "\xa0", "\u2028", "\u2029", "\ufeff", "\ufffe", "\x7f", "\x1b",
    "\r\n", "a\nb\n", "\n\n", " \n ", "\\\n", "\U0001F600", "é",
]

strings = st.one_of(
    st.sampled_from(YAML11_FORMS),
    st.text(max_size=40),
    st.lists(st.sampled_from(YAML11_FORMS + [SCRIPT, "x" * 100]), min_size=1, max_size=5).map("".join),
    st.text(alphabet=" ab\n\\\"\x85é", min_size=70, max_size=300),  # long lines the emitter folds
)
keys = st.one_of(strings, st.from_regex(r"[A-Za-z][A-Za-z0-9_./-]{0,20}", fullmatch=True))
STR = "tag:yaml.org,2002:str"


def _string_scalars(node, is_key: bool = False):
    """(node, is_key) for every string scalar of a composed YAML node."""
    if isinstance(node, yaml.ScalarNode):
        if node.tag == STR:
            yield node, is_key
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _string_scalars(item)
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            yield from _string_scalars(k, True)
            yield from _string_scalars(v)


def _unquoted(text: str) -> list[str]:
    """String scalars of ``text`` a YAML 1.1 reader could retype: any plain value, a plain key not safe."""
    return [n.value for doc in yaml.compose_all(text) for n, is_key in _string_scalars(doc)
            if n.style != '"' and (not is_key or n.style is not None or not render.is_plain_key(n.value))]




@pytest.mark.parametrize("value", YAML11_FORMS)
def test_every_yaml11_form_is_written_quoted_and_reads_back(value):
    objs = objects([value], [value or "k"])
    text = render.dump_yaml(objs)
    assert list(yaml.safe_load_all(text)) == objs
    assert _unquoted(text) == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(strings, min_size=1, max_size=8), names=st.lists(keys, min_size=1, max_size=8))
def test_any_strings_dump_quoted_and_load_back_exactly(values, names):
    objs = objects(values, names)
    text = render.dump_yaml(objs)
    assert list(yaml.safe_load_all(text)) == objs
    assert _unquoted(text) == []
    assert text.isascii()  # non-ASCII is escaped: no reader decodes it differently


def test_keys_stay_readable_values_quoted():
    text = render.dump_yaml([{"apiVersion": "v1", "metadata": {"labels": {"nvidia.com/gpu.present": "true"}},
                              "data": {"y": "n", "on": "x"}}])
    assert text.splitlines() == ['apiVersion: "v1"', "metadata:", "  labels:", '    nvidia.com/gpu.present: "true"',
                                 "data:", '  "y": "n"', '  "on": "x"']


def test_a_script_stays_one_scalar_with_its_exact_lines():
    (back,) = yaml.safe_load_all(render.dump_yaml([{"args": [SCRIPT]}]))
    assert back["args"] == [SCRIPT]


@pytest.mark.parametrize("key", ["yes", "No", "ON", "y", "Null", "1e3", "0x1F", "2001-12-14", "a b", "a:b", "-x", "<<"])
def test_a_key_a_reader_could_retype_is_quoted(key):
    assert not render.is_plain_key(key)
    assert f'"{key}": "v"' in render.dump_yaml([{key: "v"}])


# ---------------------------------------------------------------- D6: long mapping keys
LABELS_TMPL = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: {{ labels }}\ndata: {{ data }}\n"
long_keys = st.one_of(
    st.integers(min_value=1000, max_value=1300).map(lambda n: "k" * n),
    st.text(alphabet="a\"\\\n\x85é\u2028", min_size=200, max_size=1200),  # escapes make the JSON key longer
)


@pytest.fixture()
def labels_template(tmp_path, monkeypatch):
    (tmp_path / "labels.yaml.tmpl").write_text(LABELS_TMPL)
    monkeypatch.setattr(render, "TEMPLATES", tmp_path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=long_keys, other=st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=3))
def test_a_mapping_key_of_any_length_renders_exactly(labels_template, key, other):
    labels = {key: "v", **other}
    data = {"nested": {key: [key, {key: key}]}}
    (doc,) = render.render_yaml_documents("labels.yaml.tmpl", {"labels": labels, "data": data})
    assert doc["metadata"]["labels"] == labels and doc["data"] == data
    assert list(yaml.safe_load_all(render.dump_yaml([doc]))) == [doc]


def test_non_string_keys_render_as_json_writes_them(labels_template):
    (doc,) = render.render_yaml_documents("labels.yaml.tmpl", {"labels": {1: "a", False: "b", None: "c", 2.5: "d"},
                                                                 "data": {}})
    assert doc["metadata"]["labels"] == {"1": "a", "false": "b", "null": "c", "2.5": "d"}


def test_yaml_a_template_breaks_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    (tmp_path / "bad.yaml.tmpl").write_text("a: {{ x }}\n b: [\n")
    monkeypatch.setattr(render, "TEMPLATES", tmp_path)
    with pytest.raises(TaoError, match=r"bad.yaml.tmpl rendered YAML that does not parse") as exc:
        render.render_yaml_documents("bad.yaml.tmpl", {"x": 1})
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("field", ["pod_labels", "pod_annotations", "node_selector"])
def test_a_kubernetes_key_longer_than_any_server_accepts_is_refused_naming_the_field(field):
    spec = {"image": "i", "command": "c", "no_results": True, field: {"k" * 1100: "v"}}
    with pytest.raises(TaoError, match=rf"a {field}.* key is 1100 characters long: .* at most {MAX_QUALIFIED_KEY_LEN}"):
        render_manifests(spec, job_id="dino-train-0a1b2c3d", namespace="default")
    spec[field] = {"p" * 253 + "/" + "n" * 63: "v"}  # the longest a server takes still renders
    assert render_manifests(spec, job_id="dino-train-0a1b2c3d", namespace="default")


def test_the_kubernetes_templates_render_a_long_key_exactly():
    ctx = build_context({"image": "i", "command": "c", "no_results": True}, job_id="dino-train-0a1b2c3d",
                        namespace="default")
    key = "x" * 1100
    ctx["pod_annotations"] = {key: "v"}
    ctx["node_selector"] = {key: "w"}
    (job,) = render.render_yaml_documents("k8s/single-pod-job.yaml.tmpl", ctx)
    pod = job["spec"]["template"]
    assert pod["metadata"]["annotations"] == {key: "v"} and pod["spec"]["nodeSelector"] == {key: "w"}


@pytest.mark.parametrize("argv", [["--pod-annotation", "a" * 1100 + "=v"], ["--node-selector", "n" * 1100 + "=v"],
                                  ["--env", "E" * 1100 + "=v"]], ids=["annotation", "node-selector", "env"])
def test_render_cli_with_a_1100_character_key_is_one_line_or_renders(cli, argv):
    out = cli("render_k8s_job.py", "--image", "i", "--command", "c", "--no-results", *argv)
    assert out.rc in (0, 1) and "Traceback" not in out.err, out
    if out.rc == 1:
        assert len(out.err_lines) == 1, out
    else:
        assert yaml.safe_load_all(out.out)
