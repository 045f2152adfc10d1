"""The status vocabulary and transition table as data."""
from __future__ import annotations

import json

import pytest

from taobank import registry, states
from taobank.errors import TaoError


def test_vocabulary():
    assert states.STATES == ("PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN", "PRUNED")
    assert states.TERMINAL | states.ACTIVE == set(states.STATES)
    assert not states.TERMINAL & states.ACTIVE
    assert set(states.TRANSITIONS) == set(states.STATES)
    assert states.ERR_CLASSES == ("ERR_INFRA", "ERR_PROGRAM")


def test_table_shape():
    for src, dsts in states.TRANSITIONS.items():
        assert src not in dsts
        assert set(dsts) <= set(states.STATES)
        if src in states.TERMINAL:
            assert dsts == ()
    # the pitfalls: no PENDING/UNKNOWN loop
    assert not states.is_allowed("UNKNOWN", "PENDING")
    assert states.is_allowed("RUNNING", "PENDING")  # SLURM requeue


@pytest.mark.parametrize("alias", ["k8s", "K8S", "kube", "Kubernetes", " kubernetes "])
def test_platform_aliases(alias):
    assert registry.canonical(alias) == "kubernetes"


def test_platform_slurm_and_unknown():
    assert registry.canonical("SLURM") == "slurm"
    with pytest.raises(TaoError, match="unknown platform"):
        registry.canonical("lsf")


def test_canonical_state_and_classes():
    assert states.canonical_state("running") == "RUNNING"
    assert states.canonical_state("CANCELLED") == "CANCELED"
    with pytest.raises(TaoError, match="PENDING RUNNING"):
        states.canonical_state("DONE")
    assert states.canonical_err_class("err_infra") == "ERR_INFRA"
    with pytest.raises(TaoError):
        states.canonical_err_class("ERR_OTHER")
    with pytest.raises(TaoError):
        states.canonical_source("user")


def test_allowed_text():
    assert "terminal" in states.allowed_text("ERROR")
    assert states.allowed_text("UNKNOWN") == "allowed from UNKNOWN: RUNNING, COMPLETE, ERROR, CANCELED, PRUNED"


def test_markdown_table_matches_data():
    table = states.markdown_table()
    for src in states.STATES:
        row = next(l for l in table.splitlines() if l.startswith(f"| **{src}**"))
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        for dst, cell in zip(states.STATES, cells):
            if dst == src:
                assert cell in ("update", "no-op")
            else:
                assert (cell == "yes") == states.is_allowed(src, dst)


def test_the_state_enum_is_the_vocabulary_and_knows_its_ends():
    from taobank.states import State

    assert [s.value for s in State] == list(states.STATES) == ["PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN", "PRUNED"]
    assert {s for s in State if s.is_terminal} == set(states.TERMINAL) == {State.COMPLETE, State.ERROR, State.CANCELED, State.PRUNED}
    assert {s for s in State if s.is_active} == set(states.ACTIVE)
    assert states.canonical_state("cancelled") is State.CANCELED
    assert State.ERROR == "ERROR" and json.dumps({"state": State.ERROR}) == '{"state": "ERROR"}'  # records stay plain


def test_one_observation_type_carries_both_platforms_exit_codes():
    from taobank.contract import Observation
    from taobank.platforms.kubernetes import status as kstatus
    from taobank.platforms.slurm import status as sstatus

    v = sstatus.verdict("ERROR", "killed", "FAILED", exit_code="0:9")
    assert isinstance(v, Observation) and (v.exit_code, v.signal, v.exit_status, v.observed) == (0, 9, "0:9", "FAILED")
    assert sstatus.verdict("ERROR", "x", exit_code="garbage").exit_status is None
    gone = kstatus.observe(None, [])
    assert isinstance(gone, Observation) and gone.state == "UNKNOWN" and gone.exit_status is None


def test_states_import_on_the_minimum_python_without_strenum():
    """versions.yaml's tools.python_min (3.10) has no enum.StrEnum: the states (and so every helper) still import,
    and a State prints, formats and serialises as its plain name there too (checked in a fresh interpreter that
    reports 3.10 and lacks StrEnum)."""
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    bank = Path(__file__).resolve().parents[2]
    assert yaml.safe_load((bank / "versions.yaml").read_text())["tools"]["python_min"] == "3.10"
    code = (
        "import enum, json, sys\n"
        "vars(enum).pop('StrEnum', None)\n"
        "sys.version_info = (3, 10, 13, 'final', 0)\n"
        f"sys.path.insert(0, {str(bank / 'scripts')!r})\n"
        "from taobank.states import State, TERMINAL\n"
        "print(str(State.PENDING), f'{State.RUNNING}', f'{State.ERROR:>6}|', json.dumps([State.COMPLETE]),\n"
        "      State('CANCELED') == 'CANCELED', 'ERROR' in TERMINAL, State.UNKNOWN.value)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == 'PENDING RUNNING  ERROR| ["COMPLETE"] True True UNKNOWN'
