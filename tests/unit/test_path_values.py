"""Every path value passes the one path rule before it reaches a template, a manifest or argv.

A value starting with ``-`` would be read as an option by the command it reaches
(``find "$dir"`` read ``-delete`` as an expression and deleted the files of its
working folder), so every path field of every spec schema is enumerated here and
refused with such a value, for any text that follows the dash.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from taobank import paths, spec
from taobank.errors import TaoError
from taobank.platforms.slurm import storage
from taobank.platforms.slurm import submit as slurm_submit

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
FORMATS = {spec.PATH_FORMAT, spec.LOCATION_FORMAT}

#: One valid spec per schema that holds every path field at least once.
FULL = {
    "k8s-job-spec.schema.json": {
        "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "command": "echo hi", "storage_tier": "C",
        "results_dir": "s3://bucket/results", "inputs": ["/data/train"], "staging_dir": "/staging",
        "working_dir": "/workspace",
        "mounts": [{"pvc": "data", "mount_path": "/data", "sub_path": "team/a"},
                   {"nfs": {"server": "nfs.local", "path": "/export/x"}, "mount_path": "/nfs"}],
        "s3_inputs": [{"uri": "s3://bucket/in", "path": "/staging/in"}],
        "s3_outputs": [{"uri": "s3://bucket/out", "path": "/staging/out"}],
    },
    "slurm-job-spec.schema.json": {
        "network_arch": "dino", "action": "train", "command": ["python3", "train.py"],
        "results_base": "/lustre/me", "sqsh_cache_dir": "/lustre/me/sqsh", "container_mounts": "/scratch:/scratch:ro",
        "dataset": {"root": "lustre:///lustre/data", "required": ["train/a.json"],
                    "spec_keys": {"custom.train.path": "lustre:///lustre/data/x"}},
        "inputs": ["lustre:///lustre/data/y"],
    },
    "action-request.schema.json": {
        "backend": "kubernetes", "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "mode": "args",
        "argv": ["train"], "config_path": "/config/spec.yaml",
        "mounts": [{"source": {"nfs": {"server": "nfs.local", "path": "/export"}}, "path": "/data",
                    "aliases": ["/datasets"]}],
    },
}


def _path_fields(schema: dict, node: object, where: tuple) -> list[tuple]:
    """Every location (``[]`` for any array item) whose schema has one of the bank's path formats."""
    if not isinstance(node, dict):
        return []
    if "$ref" in node:
        return _path_fields(schema, schema["$defs"][node["$ref"].split("/")[-1]], where)
    out = [where] if node.get("format") in FORMATS else []
    for key, sub in (node.get("properties") or {}).items():
        out += _path_fields(schema, sub, where + (key,))
    if isinstance(node.get("items"), dict):
        out += _path_fields(schema, node["items"], where + ("[]",))
    if isinstance(node.get("additionalProperties"), dict):
        out += _path_fields(schema, node["additionalProperties"], where + ("{}",))
    return out


def _set(obj: object, where: tuple, value: str) -> object:
    """A copy of ``obj`` with ``value`` at ``where`` (every item for ``[]``, the first key for ``{}``)."""
    if not where:
        return value
    out = copy.deepcopy(obj)
    key, rest = where[0], where[1:]
    if key == "[]":  # items that lack the rest of the path (a pvc mount for an nfs field) stay as they are
        return [_set(item, rest, value) if not rest or rest[0] in item else item for item in out]
    if key == "{}":
        key = next(iter(out))
    out[key] = _set(out.get(key), rest, value)
    return out


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


#: Path fields checked by a pattern of their own (relative paths, the Pyxis mount list).
PATTERN_FIELDS = [("k8s-job-spec.schema.json", ("mounts", "[]", "sub_path")),
                  ("slurm-job-spec.schema.json", ("container_mounts",)),
                  ("slurm-job-spec.schema.json", ("dataset", "required", "[]"))]
FORMAT_FIELDS = [(name, where) for name in FULL for where in _path_fields(_schema(name), _schema(name), ())]
CASES = FORMAT_FIELDS + PATTERN_FIELDS


def test_every_schema_path_field_is_covered_by_the_full_specs():
    for name, full in FULL.items():
        spec.validate(full, name, "spec")  # the base case is valid
    found = {name: {w for n, w in FORMAT_FIELDS if n == name} for name in FULL}
    assert len(found["k8s-job-spec.schema.json"]) == 10 and len(found["slurm-job-spec.schema.json"]) == 5
    assert len(found["action-request.schema.json"]) == 4


@pytest.mark.parametrize("name,where", CASES, ids=[f"{n.split('.')[0]}:{'.'.join(w)}" for n, w in CASES])
@settings(max_examples=25, deadline=None)
@given(rest=st.text(max_size=40))
def test_a_path_starting_with_a_dash_is_refused_in_every_field(name, where, rest):
    bad = _set(FULL[name], where, "-" + rest)
    with pytest.raises(TaoError):
        spec.validate(bad, name, "spec")


@pytest.mark.parametrize("value", ["-delete", "/lustre/me/run%j", "/a b", "/a\n", "/a,b", "/a:b", "/a/$(id)", "relative",
                                   "/a/../b", "/a\x00b", "/*"])
def test_the_one_path_rule(value):
    assert not paths.is_path(value)
    with pytest.raises(TaoError):
        paths.abs_path(value, "x")


@given(st.text(max_size=60))
def test_the_path_rule_never_lets_a_dash_or_an_unsafe_character_through(text):
    if paths.is_path(text):
        assert text.startswith("/") and re.fullmatch(r"[A-Za-z0-9._+@/-]*", text) and ".." not in text.split("/")
        assert paths.abs_path(text, "x").startswith("/")


def _slurm_plan(extra: dict, env: dict | None = None) -> dict:
    base = {"network_arch": "dino", "action": "train", "command": ["python3", "train.py"],
            "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "container_runtime": "pyxis"}
    return slurm_submit.plan({**base, **extra}, env or {"SLURM_BASE_RESULTS_DIR": "/lustre/me"})


def test_a_dash_sqsh_cache_dir_never_reaches_the_conversion_script():
    with pytest.raises(TaoError, match="sqsh_cache_dir"):
        _slurm_plan({"sqsh_cache_dir": "-delete"})
    assert _slurm_plan({"sqsh_cache_dir": "lustre:///lustre/cache"}).sqsh.startswith("/lustre/cache/")


@pytest.mark.parametrize("env_value", ["-delete", "/lustre/me/run%j", "rel/dir", "/a b"])
def test_a_results_base_from_the_environment_obeys_the_same_rule(env_value):
    with pytest.raises(TaoError, match="results base"):
        _slurm_plan({}, {"SLURM_BASE_RESULTS_DIR": env_value})


def test_a_percent_in_the_results_base_is_refused_before_an_sbatch_pattern_can_expand_it():
    with pytest.raises(TaoError):
        _slurm_plan({"results_base": "/lustre/me/run%j"})


def test_a_sqsh_image_path_obeys_the_rule():
    with pytest.raises(TaoError):
        _slurm_plan({"image": "/lustre/img/x y.sqsh"})
    assert _slurm_plan({"image": "/lustre/img/x.sqsh"}).pyxis_image == "/lustre/img/x.sqsh"


def test_dataset_required_entries_cannot_start_with_a_dash_or_climb_out():
    for rel in ("../x", "a/../../x", "/etc/x"):
        with pytest.raises(TaoError):
            storage.dataset_paths({"dataset": {"root": "lustre:///lustre/data", "required": [rel]}})


def test_no_schema_pattern_matches_before_a_trailing_newline():
    """Python's ``$`` also matches before a final newline: every pattern ends with ``\\Z`` instead."""
    for f in SCHEMAS.glob("*.json"):
        text = f.read_text()
        assert not re.findall(r'"pattern": "[^"]*\$"', text), f.name


@pytest.mark.parametrize("field,value", [("image_pull_secret", "ngc"), ("cpu", "2"), ("memory", "8Gi"),
                                         ("shm_size", "16Gi")])
def test_a_trailing_newline_is_refused(field, value):
    base = {"image": "x", "command": "true", field: value}
    spec.validate(base, "k8s-job-spec.schema.json", "spec")
    with pytest.raises(TaoError):
        spec.validate({**base, field: value + "\n"}, "k8s-job-spec.schema.json", "spec")
    with pytest.raises(TaoError):
        spec.validate({"image": "x", "command": "true", "mounts": [{"pvc": "data\n", "mount_path": "/d"}]},
                      "k8s-job-spec.schema.json", "spec")


def test_a_path_error_names_the_field_and_never_shows_a_secret():
    with pytest.raises(TaoError) as exc:
        spec.validate({"image": "x", "command": "true", "working_dir": "-ghp_" + "A1b2" * 9},
                      "k8s-job-spec.schema.json", "spec")
    assert "working_dir" in str(exc.value) and "ghp_" not in str(exc.value)


@pytest.mark.parametrize("uri,ok", [("s3://bucket/x", True), ("s3://my.bucket-1", True), ("s3://-x/y", False),
                                    ("s3://Bucket/x", False), ("s3://ab", False), ("lustre:///a/b", True)])
def test_an_s3_location_names_a_valid_bucket(uri, ok):
    assert paths.is_location(uri) is ok
