"""Every network and action of the pinned TAO: its template passes its own check, and TAO's own Hydra runner
(nvidia-tao-core's, tests/support/tao_runner.py) accepts it.

A template leaves TAO's required values as ``???`` (marked REQUIRED): the check names exactly those of the
sections the action reads, and once they are filled both the check and the runner (its task reading those
sections, where a ``???`` would fail) accept it.
"""
from __future__ import annotations

import pytest
import yaml

from support.tao_runner import Job, run_many
from taobank import tao_spec_check, tao_spec_schema, tao_command


def fill_value(node: dict) -> object:
    """A value of ``node``'s type within its limits (what a user writes for a required key)."""
    kinds = [k for k in tao_spec_schema.types(node) if k != "null"]
    if "enum" in node:
        return node["enum"][0]
    if "integer" in kinds:
        return max(1, node.get("minimum", 1))
    if "number" in kinds:
        return float(max(1.0, node.get("minimum", 1.0)))
    if "boolean" in kinds:
        return True
    if "array" in kinds:
        return []
    return "/data/value"


def required_paths(doc: dict, reads: tuple[str, ...]) -> list[str]:
    out = []

    def walk(value, path):
        if value == tao_spec_schema.MISSING:
            out.append(path)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}.{k}")

    for top in reads:
        walk(doc.get(top), top)
    return out


def filled(doc: dict, paths: list[str], schema: dict) -> dict:
    nodes = dict(tao_spec_schema.walk(schema))
    for path in paths:
        *parents, last = path.split(".")
        holder = doc
        for key in parents:
            holder = holder[key]
        holder[last] = fill_value(nodes[path])
    return doc


@pytest.mark.parametrize("network", tao_command.networks())
def test_every_template_passes_its_own_check_and_taos_runner(network):
    jobs = []
    for action in tao_spec_schema.actions(network):
        s = tao_spec_schema.spec(network, action)
        text = tao_spec_schema.template(network, action)
        doc = yaml.safe_load(text)
        assert list(doc) == [k for k in s.sections if k in doc], (network, action)
        need = required_paths(doc, s.reads)
        report = tao_spec_check.check(network, action, doc)
        assert sorted(p.path for p in report.problems) == sorted(need), (network, action, report.lines())
        assert all(p.kind == "required" for p in report.problems)
        for path in need:  # each is marked in the template
            assert f"{path.rpartition('.')[2]}: ???" in text
        done = filled(doc, need, s.schema)
        assert tao_spec_check.check(network, action, done).ok, (network, action)
        jobs.append(Job(network, action, yaml.safe_dump(done, sort_keys=False), (), s.reads))
    for job, (ok, said) in zip(jobs, run_many(jobs)):  # TAO's runner, the network's actions in one batch
        assert ok, (network, job.action, said[-2000:])


def test_a_template_says_each_keys_description_and_limits():
    text = tao_spec_schema.template("dino", "train")
    assert text.startswith(f"# dino train spec: TAO {tao_command.tao_version()}")
    lines = text.splitlines()
    at = lines.index("  num_gpus: 1")
    assert lines[at - 1].startswith("  # ") and "[1..inf]" in lines[at - 1]
    assert "evaluate:" not in lines and "train:" in lines and "dataset:" in lines
    evaluate = tao_spec_schema.template("dino", "evaluate")
    assert "# REQUIRED" in evaluate and "  checkpoint: ???" in evaluate.splitlines()
