"""Property: whatever a stored record holds (any state history, any text, odd timestamps), the job
table and ``tao_jobs.py list`` print one row per job and never crash."""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taobank.campaign import jobtable
from taobank import records, registry, states
from taobank.core.platform import JobView

# what the record writer accepts on one-line fields: no control characters
one_line = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=80)
any_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=120)
# what the schema's time pattern allows, real dates or not (month 99, no fraction, 9 fraction digits)
odd_times = st.builds("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}{}Z".format, st.integers(0, 9999),
                      st.integers(0, 99), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99),
                      st.integers(0, 99), st.sampled_from(["", ".5", ".123456", ".123456789"]))
times = st.one_of(odd_times,
                  st.datetimes(min_value=datetime(1000, 1, 1)).map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")))
job_ids = st.builds(lambda a, n: f"{a}-{n:x}", st.sampled_from(["dino-train", "j", "custom-run", "x9"]),
                    st.integers(0, 2**32))


@st.composite
def histories(draw) -> list[str]:
    """A state history the transition table allows, from PENDING."""
    path = [states.INITIAL]
    for _ in range(draw(st.integers(0, 4))):
        nxt = states.TRANSITIONS[path[-1]]
        if not nxt:
            break
        path.append(draw(st.sampled_from(nxt)))
    return path


#: what the schema alone allows (a record written by hand or by another version): newlines, tabs, anything
loose_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80)


@st.composite
def stored_records(draw, job_id: str, loose: bool = False) -> dict:
    one_line_ = loose_text if loose else one_line
    path = draw(histories())
    state = path[-1]
    retry_of = draw(st.one_of(st.none(), job_ids))
    backend = draw(st.dictionaries(st.sampled_from(["uid", "name", "slurm_job_id", "_x", "a.b-c", "staged_secrets"]),
                                   st.one_of(st.none(), st.booleans(), st.integers(), one_line), max_size=4))
    rec = {
        "record_version": 1, "id": job_id, "platform": draw(st.sampled_from(registry.names())),
        "image": draw(one_line_), "network_arch": draw(one_line_), "action": draw(one_line_),
        "description": draw(st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",) if loose else
                                                                       ("Cc", "Cs")), max_size=200))),
        "storage_tier": draw(st.sampled_from(["A", "C"])),
        "results_dir": "/" + draw(st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40)),
        "backend_ref": draw(st.one_of(st.none(), one_line_)), "backend": backend, "state": state,
        "err_class": draw(st.sampled_from([None, *states.ERR_CLASSES])) if state == "ERROR" else None,
        "message": draw(st.one_of(st.none(), any_text)),
        "transitions": [{"time": draw(times), "state": s, "source": draw(st.sampled_from(states.SOURCES)),
                         "message": draw(st.one_of(st.none(), any_text))} for s in path],
        "retry_of": retry_of, "attempt": draw(st.integers(2, 99)) if retry_of else 1,
        "created_at": draw(times), "updated_at": draw(times),
    }
    records.validate(rec)  # the strategy only makes records the store itself would accept
    return rec


@st.composite
def record_sets(draw, loose: bool = False) -> list[dict]:
    ids = draw(st.lists(job_ids, max_size=5, unique=True))
    return [draw(stored_records(i, loose)) for i in ids]


@contextmanager
def store(recs: list[dict]):
    """A fresh TAO_STATE_DIR holding ``recs`` as they would lie on disk."""
    saved = os.environ.get(records.STATE_DIR_ENV)
    with tempfile.TemporaryDirectory() as d:
        os.environ[records.STATE_DIR_ENV] = d
        try:
            for rec in recs:
                (Path(d) / f"{rec['id']}.json").write_text(json.dumps(rec, ensure_ascii=False), encoding="utf-8")
            yield d
        finally:
            if saved is None:
                os.environ.pop(records.STATE_DIR_ENV, None)
            else:
                os.environ[records.STATE_DIR_ENV] = saved


def _ids_by_row(text: str) -> list[str]:
    return [line.split()[0] for line in text.split("\n") if line]


@settings(max_examples=30, deadline=None)
@given(record_sets())
def test_job_table_has_one_row_per_record(recs):
    for headers in (True, False):
        text = jobtable.render(recs, headers=headers)
        want = (["ID"] if headers else []) + [r["id"] for r in recs]
        assert _ids_by_row(text) == want
    views = [JobView.from_record(r) for r in recs]
    assert _ids_by_row(jobtable.render(views, headers=False)) == [r["id"] for r in recs]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(recs=record_sets(), state=st.one_of(st.none(), st.sampled_from(states.STATES)), active=st.booleans())
def test_tao_jobs_list_never_crashes(cli, recs, state, active):
    with store(recs):
        flags = (["--state", state] if state else []) + (["--active"] if active else [])
        wanted = sorted(r["id"] for r in recs if (state is None or r["state"] == state)
                        and (not active or r["state"] in states.ACTIVE))
        table = cli("tao_jobs.py", "list", "--no-headers", *flags)
        assert table.rc == 0, table
        assert sorted(_ids_by_row(table.out)) == wanted
        listed = cli("tao_jobs.py", "list", "--json", *flags)
        assert listed.rc == 0 and sorted(v["id"] for v in json.loads(listed.out)) == wanted
        headed = cli("tao_jobs.py", "list", *flags)
        assert headed.rc == 0 and (headed.out.split()[:1] == ["ID"] if wanted else headed.out == "")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(recs=record_sets(loose=True))
def test_tao_jobs_list_never_crashes_on_anything_the_schema_allows(cli, recs):
    with store(recs):
        for flags in ([], ["--no-headers"], ["--active"]):
            assert cli("tao_jobs.py", "list", *flags).rc == 0
        listed = cli("tao_jobs.py", "list", "--json")
        assert listed.rc == 0 and sorted(v["id"] for v in json.loads(listed.out)) == sorted(r["id"] for r in recs)
        for r in recs:
            jobtable.row(r)


@pytest.mark.parametrize("field", ["description", "network_arch", "action", "backend_ref"])
def test_a_newline_in_a_field_never_splits_a_table_row(field):
    rec = {"id": "dino-train-1a2b3c4d", "platform": "slurm", "state": "RUNNING", "network_arch": "dino",
           "action": "train", "image": "i", "results_dir": "/r", "backend": {}, "transitions": [], "attempt": 1,
           "created_at": "", "updated_at": "", field: "two\nlines"}
    assert len(jobtable.render([rec], headers=False).splitlines()) == 1
