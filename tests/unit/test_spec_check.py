"""``tao_jobs.py spec``: list, template, keys and check, as a user runs them; Hydra overrides; bad input.

Each bad input is one line (exit 1, or 2 for argparse's usage), never a traceback or a hang.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from taobank import tao_spec_check, tao_spec_schema, tao_command
from taobank.errors import TaoError

BANK = Path(__file__).resolve().parents[2]
JOBS = BANK / "scripts" / "tao_jobs.py"


def jobs(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(JOBS), "spec", *argv], capture_output=True, text=True,
                          cwd=cwd, timeout=60, stdin=subprocess.DEVNULL)


def one_line_error(r: subprocess.CompletedProcess, rc: int = 1) -> str:
    assert r.returncode == rc, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr.strip()


@pytest.fixture()
def dino_train(tmp_path) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(tao_spec_schema.template("dino", "train"), encoding="utf-8")
    return path


def test_list_names_every_network_and_its_actions():
    r = jobs("list", "--json")
    data = json.loads(r.stdout)
    assert data["tao_version"] == tao_command.tao_version()
    assert set(data["networks"]) == set(tao_command.networks())
    assert "train" in data["networks"]["dino"] and "dataset_convert" in data["networks"]["pointpillars"]


def test_a_template_checks_clean_and_a_typo_names_the_real_key(dino_train):
    r = jobs("check", str(dino_train), "--network", "dino", "--action", "train")
    assert r.returncode == 0 and r.stdout.startswith("ok: "), r.stdout + r.stderr
    r = jobs("check", str(dino_train), "train.num_epoch=10", "--network", "dino", "--action", "train")
    assert r.returncode == 1 and r.stdout.strip().splitlines() == [
        f"train.num_epoch: no such key in dino's spec (TAO {tao_command.tao_version()}): did you mean train.num_epochs?"]


def test_check_names_each_problem_on_its_own_line_with_its_path(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("train:\n  num_epochs: ten\n  optim:\n    lr: -1\n  num_gpus: 0\nmodel:\n  backbone: resnet_51\n"
                    "evaluate:\n  checkpoint: ???\n", encoding="utf-8")
    r = jobs("check", str(spec), "train.precision=fp64", "+train.num_epochs=3", "--network", "dino",
             "--action", "train", "--json")
    got = sorted((p["path"], p["kind"]) for p in json.loads(r.stdout)["problems"])
    assert r.returncode == 1
    assert got == [("model.backbone", "options"), ("train.num_epochs", "override"), ("train.num_epochs", "type"),
                   ("train.num_gpus", "range"), ("train.optim.lr", "range"), ("train.precision", "options")], got
    r = jobs("check", str(spec), "--network", "dino", "--action", "evaluate")
    lines = r.stdout.strip().splitlines()
    assert any(line.startswith("evaluate.checkpoint: TAO requires a value") for line in lines), lines
    assert any(line.startswith("train.num_epochs: 'ten' is not a whole number") for line in lines), lines


def test_keys_show_type_default_range_and_description():
    r = jobs("keys", "dino", "train", "num_epochs")
    assert r.returncode == 0
    assert r.stdout.startswith("train.num_epochs (integer) = 10 [1..inf]  Number of epochs"), r.stdout
    rows = json.loads(jobs("keys", "dino", "train", "--json").stdout)
    assert {"key": "train.optim.lr", "type": "number"}.items() <= rows[[r["key"] for r in rows].index(
        "train.optim.lr")].items()


def test_template_json_is_a_json_schema_that_jsonschema_takes():
    import jsonschema

    doc = json.loads(jobs("template", "dino", "train", "--json").stdout)
    jsonschema.Draft202012Validator.check_schema(doc)
    validator = jsonschema.Draft202012Validator(doc)
    template = tao_spec_check.spec_mapping(tao_spec_schema.template("dino", "train"), "t")
    assert not list(validator.iter_errors(template))
    template["train"]["num_epoch"] = 10
    assert [e.validator for e in validator.iter_errors(template)] == ["additionalProperties"]


@pytest.mark.parametrize("word,value", [
    ("a=1", 1), ("a=1.5", 1.5), ("a=1e-4", 1e-4), ("a=true", True), ("a=False", False), ("a=null", None),
    ("a=abc", "abc"), ("a='1'", "1"), ('a="x y"', "x y"), ("a=[1,2]", [1, 2]), ("a=[]", []),
    ("a=[[1,2],[3]]", [[1, 2], [3]]), ("a={b: 1, c: [x]}", {"b": 1, "c": ["x"]}), ("a=/data/x.json", "/data/x.json"),
    ("a=${oc.env:RESULTS_DIR}", "${oc.env:RESULTS_DIR}"), ("a=", ""), ("a=inf", float("inf")),
])
def test_override_values_read_as_hydra_reads_them(word, value):
    assert tao_spec_check.parse_override(word).value == value


def test_a_number_longer_than_python_converts_is_text_and_refused_for_an_integer():
    assert tao_spec_check.parse_override("a=" + "9" * 5000).value == "9" * 5000
    report = tao_spec_check.check("dino", "train", {}, ["train.num_epochs=" + "9" * 5000])
    assert [p.kind for p in report.problems] == ["type"]


@pytest.mark.parametrize("word,op,has_value", [("+a.b=1", "+", True), ("++a=1", "++", True), ("~a.b", "~", False),
                                               ("a.b_c=1", "", True)])
def test_override_operators(word, op, has_value):
    ov = tao_spec_check.parse_override(word)
    assert (ov.op, ov.has_value) == (op, has_value)


@pytest.mark.parametrize("word,said", [
    ("train.num_epochs", "has no '='"), ("=5", "no valid dotted key"), ("a=1,2", "a sweep"), ("a=[1,2", "not closed"),
    ("a='x", "not closed"), ("a=" + "[" * 5000, "nested deeper than 32"),
])
def test_a_bad_override_is_one_line(word, said):
    with pytest.raises(TaoError, match=said):
        tao_spec_check.parse_override(word)


def test_bad_input_is_one_line_each(tmp_path, dino_train):
    base = ["--network", "dino", "--action", "train"]
    cases = {
        "notyaml.yaml": ("train: [1,\n", "not valid YAML"),
        "list.yaml": ("- a\n- b\n", "not a mapping"),
        "bomb.yaml": ("a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n", "aliases"),
        "scalar.yaml": ("train:\n  num_epochs:\n    x: 1\n", None),
    }
    for name, (text, said) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        r = jobs("check", str(tmp_path / name), *base)
        if said is None:  # a key path through a value: a problem line of the check
            assert r.returncode == 1 and r.stdout.strip() == "train.num_epochs: a mapping is not a whole number", r.stdout
            continue
        assert said in one_line_error(r), (name, r.stderr)
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(100 << 20)  # a 100 MB file (sparse: nothing is written)
    assert "MiB" in one_line_error(jobs("check", str(big), *base))
    assert "known: action_recognition" in one_line_error(jobs("check", str(dino_train), "--network", "nope",
                                                              "--action", "train"))
    assert "known: distill, evaluate" in one_line_error(jobs("template", "dino", "nope"))
    r = jobs("check", str(dino_train), "train.num_epochs", *base)  # a problem line, as the others
    assert r.returncode == 1 and len(r.stdout.splitlines()) == 1 and "has no '='" in r.stdout, r.stdout
    r = jobs("check", str(dino_train), "train.num_epochs.x=1", *base)
    assert r.returncode == 1 and r.stdout.strip().startswith("train.num_epochs.x: train.num_epochs is a value"), r.stdout
    assert "cannot be read" in one_line_error(jobs("check", str(tmp_path / "absent.yaml"), *base))
    assert "folder" in one_line_error(jobs("check", str(tmp_path), *base))
    os.chmod(big, 0o644)


def test_spec_verbs_load_no_job_verbs_and_no_jsonschema():
    code = ("import sys, runpy; sys.argv = ['tao_jobs.py', 'spec', 'keys', 'dino', 'train', 'num_epochs']; "
            "sys.path.insert(0, 'scripts')\n"
            "try:\n    runpy.run_path('scripts/tao_jobs.py', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "bad = [m for m in sys.modules if m.startswith(('jsonschema', 'taobank.core', 'taobank.platforms', 'taobank.campaign', "
            "'taobank.records', 'nvidia_tao', 'omegaconf'))]\nassert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], cwd=BANK, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def _values():
    from hypothesis import strategies as st

    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                        max_leaves=12)


def test_any_document_and_override_is_problems_or_one_line_never_a_traceback():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    keys = st.sampled_from(["train", "train.num_epochs", "train.optim", "train.optim.lr", "model.backbone", "x",
                            "dataset.train_data_sources", "evaluate.checkpoint", "train.num_epochs.x"])

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(doc=st.dictionaries(st.sampled_from(["train", "model", "dataset", "evaluate", "zz", "defaults"]), _values(),
                               max_size=4),
           words=st.lists(st.tuples(st.sampled_from(["", "+", "++", "~"]), keys, st.text(max_size=10)), max_size=4))
    def run(doc, words):
        overrides = [f"{op}{key}={value}" for op, key, value in words]
        try:
            report = tao_spec_check.check("dino", "train", doc, overrides)
        except TaoError:
            return
        assert all("\n" not in line for line in report.lines())

    run()
    first = tao_spec_check.check("dino", "train", {"train": {"a\nb": 1}}).lines()[0]
    assert first.startswith("train.a\\nb: no such key")
