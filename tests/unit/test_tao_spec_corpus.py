"""A corpus of mutated specs on which TAO's own Hydra runner and ``spec check`` agree, every one.

From each network action's filled template (tests/unit/test_tao_spec_templates.py), mutations in the spec file
and as overrides: misspelt keys, values of the wrong type, null where TAO allows none, required values unset,
a key through a value, ``+`` on a key that exists, ``~`` of a key, and values TAO converts (``"7"`` for an
integer, ``yes`` for a boolean). The runner refuses a spec exactly when the check names a problem of a kind
the runner enforces; values outside TAO's ranges and options pass the runner and are refused by the check.
"""
from __future__ import annotations

import copy
import random

import pytest
import yaml

from support.tao_runner import Job, run, run_many
from taobank import tao_spec_check, tao_spec_schema
from test_tao_spec_templates import filled, required_paths

#: network, action: spread over the families of TAO's configs (Lightning, mmengine, its own trainers)
CASES = [("dino", "train"), ("dino", "evaluate"), ("classification_pyt", "train"), ("pointpillars", "train"),
         ("segformer", "inference"), ("ocrnet", "train"), ("visual_changenet", "train"), ("mae", "export")]
PER_CASE = 27
RUNNER_KINDS = tao_spec_check.RUNNER_KINDS | {"required"}


def base(network: str, action: str) -> tuple[dict, dict, list[tuple[str, dict]]]:
    s = tao_spec_schema.spec(network, action)
    doc = yaml.safe_load(tao_spec_schema.template(network, action))
    need = required_paths(doc, s.reads)
    doc = filled(doc, need, s.schema)
    leaves = [(p, n) for p, n in tao_spec_schema.walk(s.schema) if p.split(".")[0] in s.reads and p.split(".")[0] in doc
              and not tao_spec_schema.is_section(n) and _at(doc, p) is not None
              and _at(doc, p) != tao_spec_schema.MISSING]
    return doc, {"need": need, "reads": s.reads}, leaves


def _at(doc, path):
    for key in path.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def _set(doc, path, value):
    *parents, last = path.split(".")
    for key in parents:
        doc = doc[key]
    doc[last] = value


def _misspelt(rng, key):
    i = rng.randrange(len(key))
    return rng.choice([key[:i] + key[i + 1:] or key + "x", key + "s", key[:i] + "x" + key[i:]])


def _wrong(rng, node):
    kinds = [k for k in tao_spec_schema.types(node) if k != "null"]
    if kinds == ["integer"]:
        return rng.choice(["abc", 1.5, [1], {"a": 1}, "1.5"])
    if kinds == ["number"]:
        return rng.choice(["fast", [0.1], {"a": 1}, True])
    if kinds == ["boolean"]:
        return rng.choice(["maybe", 1.5, [True]])
    if kinds == ["array"]:
        return rng.choice([5, "abc", {"a": 1}])
    if kinds == ["string"]:
        return rng.choice([[1, 2], {"a": 1}])
    return None


def _converted(rng, node, value):
    kinds = [k for k in tao_spec_schema.types(node) if k != "null"]
    if kinds == ["integer"] and isinstance(value, int):
        return str(value)
    if kinds == ["number"] and isinstance(value, float) and value.is_integer():
        return int(value)
    if kinds == ["boolean"]:
        return rng.choice(["yes", "off", 1, "true"])
    if kinds == ["string"] and isinstance(value, str) and "enum" not in node:
        return rng.choice([5, 1.5, True]) if value == "" else value
    return None


def _outside(node):
    target = tao_spec_schema.deref(node.get("items")) if "array" in tao_spec_schema.types(node) else node
    if "enum" in target and "string" in tao_spec_schema.types(target) and not target.get("x-enum-type"):
        return "not_an_option_of_tao"
    if "minimum" in target and "integer" in tao_spec_schema.types(target):
        return int(target["minimum"]) - 1
    if "maximum" in target and "number" in tao_spec_schema.types(target):
        return float(target["maximum"]) + 1.0
    return None


def mutations(network: str, action: str, n: int) -> list[tuple[str, dict, list[str], bool | None]]:
    """(what, spec, overrides, runner_ok_expected_or_None) of ``n`` mutations, deterministic."""
    rng = random.Random(f"{network}:{action}")
    doc, info, leaves = base(network, action)
    out: list[tuple[str, dict, list[str], bool | None]] = []
    for i in range(n * 4):
        if len(out) >= n:
            break
        path, node = rng.choice(leaves)
        value = _at(doc, path)
        d = copy.deepcopy(doc)
        kind = i % 12
        *parents, leaf = path.split(".")
        if kind == 0:
            bad = ".".join([*parents, _misspelt(rng, leaf)])
            known = dict(tao_spec_schema.walk(tao_spec_schema.spec(network, action).schema))
            if _at(doc, bad) is None and bad not in known:
                out.append((f"override {bad}", d, [f"{bad}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"
                                                   if not isinstance(value, str) else f"{bad}=x"], None))
        elif kind == 1:
            bad = _misspelt(rng, leaf)
            holder = _at(d, ".".join(parents)) if parents else d
            if isinstance(holder, dict) and bad not in holder and bad not in (
                    tao_spec_schema.deref(dict(tao_spec_schema.walk(tao_spec_schema.spec(network, action).schema))
                                    .get(".".join(parents), {}))
                    .get("properties") or {}):
                holder[bad] = value
                out.append((f"file {'.'.join([*parents, bad])}", d, [], None))
        elif kind in (2, 3):
            wrong = _wrong(rng, node)
            if wrong is not None:
                if kind == 2:
                    _set(d, path, wrong)
                    out.append((f"file {path}={wrong!r}", d, [], None))
                elif not isinstance(wrong, dict):
                    text = yaml.safe_dump(wrong, default_flow_style=True).strip().removesuffix("...").strip()
                    out.append((f"override {path}={text}", d, [f"{path}={text}"], None))
        elif kind == 4:
            conv = _converted(rng, node, value)
            if conv is not None:
                _set(d, path, conv)
                out.append((f"file {path}={conv!r} (TAO converts it)", d, [], True))
        elif kind == 5:
            if "null" not in tao_spec_schema.types(node) and tao_spec_schema.types(node):
                out.append((f"override {path}=null", d, [f"{path}=null"], None))
        elif kind == 6:
            if info["need"]:
                gone = rng.choice(info["need"])
                _set(d, gone, "???")
                out.append((f"file {gone}=??? (required)", d, [], False))
            else:
                out.append((f"override {path}=???", d, [f"{path}=???"], False))
        elif kind == 7:
            out.append((f"override {path}.deeper=1", d, [f"{path}.deeper=1"], False))
        elif kind == 8:
            out.append((f"override +{path} (there already)", d, [f"+{path}=1"], False))
        elif kind == 9:
            out.append((f"override +{'.'.join(parents + ['a_new_key'])} (added)", d,
                        [f"+{'.'.join(parents + ['a_new_key'])}=1"], True))
        elif kind == 10:
            out.append((f"override ~{path}", d, [f"~{path}"], None))
        elif kind == 11:
            top = path.split(".")[0]
            tops = tao_spec_schema.spec(network, action).schema["properties"]
            if tao_spec_schema.is_section(tao_spec_schema.deref(tops[top])):
                out.append((f"override {top}=5 (a section)", d, [f"{top}=5"], False))
    assert len(out) == n, (network, action, len(out))
    return out


@pytest.mark.parametrize("network,action", CASES)
def test_the_runner_and_spec_check_agree_on_every_mutated_spec(network, action):
    reads = tao_spec_schema.spec(network, action).reads
    corpus = mutations(network, action, PER_CASE)
    texts = [yaml.safe_dump(doc, sort_keys=False) for _, doc, _, _ in corpus]
    verdicts = run_many([Job(network, action, text, tuple(overrides), reads)  # TAO's runner, the case in one batch
                         for text, (_, _, overrides, _) in zip(texts, corpus)])
    disagree = []
    for text, (what, doc, overrides, expected), (ok, said) in zip(texts, corpus, verdicts):
        report = tao_spec_check.check(network, action, tao_spec_check.spec_mapping(text, "spec"), overrides)
        refused = [p for p in report.problems if p.kind in RUNNER_KINDS]
        if ok == bool(refused) or (expected is not None and ok != expected):
            disagree.append(f"{what}: runner {'accepts' if ok else 'refuses'}, check says {report.lines()} "
                            f"({said.strip().splitlines()[-1:] if said.strip() else ''})")
    assert not disagree, "\n".join(disagree)


def test_the_corpus_has_at_least_200_specs():
    assert len(CASES) * PER_CASE >= 200


@pytest.mark.parametrize("network,action", CASES[:4])
def test_values_outside_taos_ranges_and_options_pass_the_runner_and_not_the_check(network, action, tmp_path):
    from devtools import tao_specs

    doc, info, leaves = base(network, action)
    exp = tao_specs.experiment_class(network, action)
    spec_file = tmp_path / f"{action}.yaml"
    spec_file.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    tried = 0
    for path, node in leaves:
        bad = _outside(node)
        if bad is None or isinstance(_at(doc, path), list):
            continue
        word = f"{path}={bad}"
        ok, said = run(exp, spec_file, [word], info["reads"])
        report = tao_spec_check.check(network, action, doc, [word])
        assert ok, (word, said[-500:])
        assert [p.kind for p in report.problems] in (["range"], ["options"]), (word, report.lines())
        tried += 1
        if tried == 3:
            break
    assert tried == 3


def test_the_oracles_shortcuts_change_no_verdict(monkeypatch):
    """tests/support/tao_runner.py skips Hydra's get_mode compose and a repeated ConfigStore.store: on specs the
    runner accepts and refuses, TAO's runner as it is says the same."""
    from support import tao_runner

    reads = tao_spec_schema.spec("dino", "train").reads
    jobs = [Job("dino", "train", yaml.safe_dump(doc, sort_keys=False), tuple(overrides), reads)
            for _, doc, overrides, _ in mutations("dino", "train", 12)]
    quick = [tao_runner._one(job) for job in jobs]
    monkeypatch.setenv("TAO_RUNNER_PLAIN", "1")
    plain = [tao_runner._one(job) for job in jobs]
    assert [ok for ok, _ in quick] == [ok for ok, _ in plain]
    assert {ok for ok, _ in quick} == {True, False}
