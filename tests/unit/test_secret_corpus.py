"""The secret lint against its corpus: no regression from the stored figures, and no value ever echoed.

benchmarks/secret_lint_corpus.py prints the figures; figures.json holds the floor.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, assume, given, settings, strategies as st

from taobank import redact
from taobank.secrets import scanner as scan

BANK = Path(__file__).resolve().parents[2]
CORPUS = BANK / "tests" / "fixtures" / "secret_corpus"


def _bench():
    spec = importlib.util.spec_from_file_location("secret_lint_corpus", BANK / "benchmarks" / "secret_lint_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()
SECRETS, CLEAN = BENCH.corpus()


def test_corpus_is_big_enough_and_real():
    assert len(SECRETS) >= 400 and len(CLEAN) >= 150
    assert sum(1 for e in CLEAN if e["id"].startswith("bank:")) >= 5
    assert all(e["secrets"] and all(s in e["text"] for s in e["secrets"]) for e in SECRETS)
    assert "@@" not in "".join(e["text"] for e in SECRETS + CLEAN)


def test_no_regression_from_stored_figures():
    stored = json.loads((CORPUS / "figures.json").read_text(encoding="utf-8"))
    now = BENCH.figures(redact, SECRETS, CLEAN)
    assert now["secrets"] >= stored["secrets"] and now["clean"] >= stored["clean"]
    assert now["caught"] >= stored["caught"], now["missed_ids"]
    assert now["redacted"] >= stored["redacted"], now["not_redacted_ids"]
    assert now["relint_clean"] >= stored["relint_clean"], now["relint_ids"]
    assert now["false_positives"] <= stored["false_positives"], now["false_positive_ids"]


# ---------------------------------------------------------------- the placement corpus
@functools.cache
def placed() -> dict:
    """The placement figures (~4 s): computed once, when the first test needs them, not at collection (which
    every xdist worker repeats); pytest.ini runs xdist with ``--dist loadfile``, so the tests of this file
    share one worker and one computation."""
    return BENCH.placement_figures(redact)


def test_placement_corpus_is_built_the_way_it_claims():
    """~70 distinct secrets, each in every style it fits; non-secrets in the same styles."""
    f = placed()
    assert f["distinct_secrets"] >= 70 and f["styles"] >= 15
    assert f["secrets"] >= 1200 and f["clean"] >= 600
    styles = {e.style for e in BENCH.placements.secret_entries()}
    assert {"yaml-folded", "yaml-literal", "yaml-anchor", "yaml-alias", "yaml-tag", "yaml-flow", "k8s-env",
            "k8s-secret-data", "k8s-configmap", "flag-space", "flag-equals", "shell-assign", "shell-export",
            "json", "sbatch-export"} <= styles


def test_placement_recall_and_false_positives():
    """Recall >= 99% and false positives <= 1% on secrets x placement styles (folded, anchored, tagged,
    literal blocks under any key, base64 docker configs outside a Secret, Slack app tokens...)."""
    f = placed()
    assert f["caught"] / f["secrets"] >= 0.99, f["missed_ids"]
    assert f["false_positives"] / f["clean"] <= 0.01, f["false_positive_ids"]


def test_placement_redaction_leaves_no_piece_of_a_value():
    """For every flagged text, redact leaves no 6+ character piece of the secret visible (the value itself
    is masked -- not the ``>-``/``&a``/``!!str`` in front of it)."""
    f = placed()
    assert f["leaked"] == 0, f["leaked_ids"]


def test_placement_submit_time_lint_of_objects():
    """The Kubernetes submit lints the parsed objects: every YAML/JSON placement is flagged that way too."""
    f = placed()
    assert f["objects_caught"] == f["objects"], f["not_objects_ids"]


def test_placement_no_regression_from_stored_figures():
    stored = json.loads((CORPUS / "figures.json").read_text(encoding="utf-8"))["placements"]
    now = placed()
    assert now["secrets"] >= stored["secrets"] and now["clean"] >= stored["clean"]
    assert now["caught"] >= stored["caught"], now["missed_ids"]
    assert now["leaked"] <= stored["leaked"], now["leaked_ids"]
    assert now["false_positives"] <= stored["false_positives"], now["false_positive_ids"]
    assert now["objects_caught"] >= stored["objects_caught"], now["not_objects_ids"]


def test_placement_findings_never_echo_a_value():
    for e in BENCH.placements.secret_entries()[::7]:
        out = "\n".join(str(f) + repr(f.to_dict()) for f in redact.lint_text(e.text, "f"))
        for r in redact.RULES:
            out = out.replace(r.description, "").replace(r.name, "")
        assert not BENCH.leaked_pieces(e.sensitive, out, set()), e.id


def test_schema_and_bank_files_lint_clean():
    for e in CLEAN:
        if e["id"].startswith("bank:"):
            assert redact.lint_text(e["text"], e["id"]) == [], e["id"]
    assert "bank:schemas/k8s-job-spec.schema.json" in {e["id"] for e in CLEAN}


#: what the rules publish anyway (``github_pat_``, ``PRIVATE KEY``): no part of a secret
_PUBLIC = " ".join(r.description + " " + " ".join(r.patterns) for r in redact.RULES)


def _pieces(value: str, n: int = 6) -> set[str]:
    """Every ``n``-character piece of ``value`` that is not a published token prefix."""
    return {value[i:i + n] for i in range(len(value) - n + 1)} - {p for p in _PUBLIC_PIECES if p in value}


_PUBLIC_PIECES = {_PUBLIC[i:i + 6] for i in range(len(_PUBLIC) - 5)}


def test_findings_never_echo_any_part_of_a_value():
    for e in SECRETS:
        out = "\n".join(str(f) + repr(f.to_dict()) for f in redact.lint_text(e["text"], "f"))
        for f in redact.RULES:
            out = out.replace(f.description, "").replace(f.name, "")
        for s in e["secrets"]:
            leaked = [p for p in _pieces(s) if p in out]
            assert not leaked, (e["id"], leaked)


def test_cli_lint_output_never_echoes_a_value(tmp_path):
    sample = SECRETS[::20]
    paths = []
    for n, e in enumerate(sample):
        p = tmp_path / f"t{n}.txt"
        p.write_text(e["text"], encoding="utf-8")
        paths.append(str(p))
    for extra in ([], ["--json"]):
        r = subprocess.run([sys.executable, str(BANK / "scripts" / "redact_secrets.py"), "lint", *extra, *paths],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 1
        out = r.stdout + r.stderr
        for f in redact.RULES:
            out = out.replace(f.description, "")
        for e in sample:
            for s in e["secrets"]:
                assert not [p for p in _pieces(s) if p in out], e["id"]


# ---------------------------------------------------------------- property: planted in random text
_FILLER = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=60)
_VALUE = st.text(alphabet="abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=12, max_size=40)
_SHAPES = ["export HF_TOKEN={}", "PGPASSWORD='{}' psql", "password: {}", "--password {}", "sshpass -p {} ssh h",
           "curl -u admin:{} https://x", "docker login -u u -p {} r.example.com", "aws_secret_access_key = {}",
           "machine h login u password {}", "https://:{}@host/x", "- {{name: WANDB_KEY, value: \"{}\"}}",
           '{{"db": {{"password": "{}"}}}}', "mysql -uroot -p{} db", "wandb login {0}{0}{0}"]


@settings(max_examples=300, deadline=None)
@given(before=st.lists(_FILLER, max_size=6), after=st.lists(_FILLER, max_size=6), value=_VALUE,
       shape=st.sampled_from(_SHAPES))
@example(before=[], after=[], value="aA22222222PW", shape="export HF_TOKEN={}")  # shaped like a variable named *PW
def test_redaction_never_leaks_a_value_planted_in_random_text(before, after, value, shape):
    assume(value not in "".join(before + after))
    text = "\n".join([*before, shape.format(value), *after]) + "\n"
    red = redact.redact_text(text)
    assert value not in red
    assert redact.lint_text(text, "p")


@pytest.mark.parametrize("entry", [e for e in SECRETS if e["id"].endswith(("-sbatch", "-k8s-args"))][:40],
                         ids=lambda e: e["id"])
def test_redacted_corpus_text_keeps_its_shape(entry):
    red = redact.redact_text(entry["text"])
    assert red.count("\n") == entry["text"].count("\n")
    assert redact.MASK in red


def test_pre_filter_changes_no_finding(monkeypatch):
    """The per-rule needles only save time: without them every corpus text lints the same."""
    texts = [e["text"] for e in SECRETS + CLEAN]
    with_filter = [[(f.rule, f.line) for f in redact.lint_text(t)] for t in texts]
    monkeypatch.setattr(scan, "_COMPILED", tuple((r, ("",), rxs) for r, _, rxs in scan._COMPILED))
    assert [[(f.rule, f.line) for f in redact.lint_text(t)] for t in texts] == with_filter
