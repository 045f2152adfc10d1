"""The batch forms of the core's cleaning (issue 46): each gives what its one-value form gives, value by value,
and a record the store wrote is trusted on a read only when it was whole as a read sees it."""
from __future__ import annotations

import json

import pytest

from taobank import fsio, records
from taobank.errors import TaoError
from taobank.records import store
from taobank.redact import is_credential_name, redact_text, redact_texts, secret_entries
from taobank.text import one_line, one_lines, stored_texts, valid_text

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
VALUES = ["plain", f"token={TOKEN}", "two\nlines", "esc \x1b[2J", "bad byte \udce9", 42, None, "", f"--token {TOKEN}\t"]


def test_one_lines_is_one_line_of_each_value():
    assert one_lines(VALUES) == [one_line(v) for v in VALUES]
    assert one_lines(VALUES, keep="\t") == [one_line(v, keep="\t") for v in VALUES]
    assert TOKEN not in "".join(one_lines(VALUES))


def test_stored_texts_and_redact_texts_are_their_one_value_forms():
    texts = [str(v) for v in VALUES]
    assert redact_texts(texts) == [redact_text(t) for t in texts]
    assert stored_texts(texts) == [redact_text(valid_text(t)) for t in texts]


def test_secret_entries_names_the_rule_a_key_breaks_first():
    pairs = [("namespace", "ns"), ("hf_token", "x"), ("note", f"token={TOKEN}"), ("api_key", f"token={TOKEN}")]
    got = secret_entries(pairs)
    assert got == {"hf_token": "name", "note": "value", "api_key": "name"}
    assert all((k in got) == (is_credential_name(k) or redact_text(v) != v) for k, v in pairs)


def test_clean_backend_refuses_in_key_order(state_dir):
    from taobank.records.writes import clean_backend

    with pytest.raises(TaoError, match="named like a credential"):
        clean_backend({"hf_token": "x", "bad key!": "v"})
    with pytest.raises(TaoError, match="key 'bad key!' is invalid"):
        clean_backend({"bad key!": "v", "hf_token": "x"})
    assert clean_backend({"staged_secrets": True, "namespace": "ns"}) == {"staged_secrets": True, "namespace": "ns"}


def test_read_json_returns_a_parse_error_and_raises_a_read_error(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"a": 1}')
    bad.write_text("{not json")
    assert fsio.read_json(good, "doc", "doc good") == (b'{"a": 1}', {"a": 1}, None)
    raw, value, err = fsio.read_json(bad, "doc", "doc bad")
    assert raw == b"{not json" and value is None and "doc bad is not valid JSON" in str(err)
    assert fsio.read_json(tmp_path / "none.json", "doc", "doc none", missing_ok=True) == (None, None, None)
    with pytest.raises(TaoError, match="is a directory"):
        fsio.read_json(tmp_path, "doc", "doc dir")
    each = dict(fsio.read_json_each([good, tmp_path], "doc"))
    assert each[good][1] == {"a": 1} and isinstance(each[tmp_path], TaoError)


def _rec() -> dict:
    return records.open_record(platform="docker", image="busybox:1.37.0", network_arch="dino", action="train",
                               storage_tier="A", results_dir="/tmp/tao-results/{id}")


def test_a_record_written_whole_is_read_back_without_a_second_check(state_dir, monkeypatch):
    rec = _rec()
    calls = []
    real = store.shape.damage
    monkeypatch.setattr(store.shape, "damage", lambda r, i: calls.append(i) or real(r, i))
    assert records.load(rec["id"]) == rec and calls == []  # the bytes the store wrote, checked when written
    path = store.record_path(rec["id"])
    edited = {**json.loads(path.read_text()), "message": "edited by hand"}
    path.write_text(json.dumps(edited))
    assert records.load(rec["id"])["message"] == "edited by hand" and calls == [rec["id"]]  # new bytes: checked


def test_a_record_written_with_a_folder_problem_is_still_damaged_when_read(state_dir):
    rec = _rec()
    bad = {**rec, "backend": {"results_dir": "/elsewhere/not-its-own"}}
    with store.locked(rec["id"]):
        store.replace(rec["id"], bad)  # the write's own checks pass; the read's verdict does not
    with pytest.raises(TaoError, match="damaged"):
        records.load(rec["id"])
