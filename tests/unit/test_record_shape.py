"""The record's shape, written once (schemas/job-record.schema.json) and checked by taobank.records.shape:
the checker refuses a keyword it cannot check (the file can never say more than is checked), and a damaged
record is one line naming the field, never its value."""
from __future__ import annotations

import pytest

from taobank.records import shape

NVAPI = "nvapi-" + "A1b2" * 16


def test_every_keyword_of_the_record_schema_is_checked():
    def keywords(node):
        if isinstance(node, dict):
            for k, v in node.items():
                yield k
                if k in ("properties", "$defs", "dependentRequired"):
                    for sub in v.values():
                        yield from keywords(sub)
                elif k not in ("enum", "const", "required", "description"):
                    yield from keywords(v)
        elif isinstance(node, list):
            for v in node:
                yield from keywords(v)

    used = set(keywords(shape.schema()))
    assert used <= shape.KEYWORDS | shape.ANNOTATIONS, used - shape.KEYWORDS


@pytest.mark.parametrize("schema", [{"format": "uri"}, {"properties": {"a": {"uniqueItems": True}}},
                                    {"$ref": "https://example.com/other.json"}])
def test_a_keyword_the_checker_cannot_check_is_refused_at_compile_time(schema):
    with pytest.raises(ValueError, match="not checked|only refs inside"):
        shape.compile_schema(schema)


def _record() -> dict:
    now = "2026-01-02T03:04:05.000001Z"
    return {"record_version": 1, "id": "dino-train-abc12", "platform": "docker", "image": "img:1",
            "network_arch": "dino", "action": "train", "storage_tier": "A", "results_dir": "/r/dino-train-abc12",
            "backend_ref": None, "backend": {"engine": "docker"}, "state": "PENDING", "err_class": None,
            "message": None, "transitions": [{"time": now, "state": "PENDING", "source": "agent", "message": None}],
            "retry_of": None, "attempt": 1, "created_at": now, "updated_at": now}


@pytest.mark.parametrize("change, words", [
    ({"state": "DONE"}, "unknown state"), ({"platform": NVAPI}, "unknown platform"),
    ({"image": 5}, "image is not text"), ({"attempt": "1"}, "attempt is not a whole number"),
    ({"backend": {"x": [NVAPI]}}, "backend x is not text, a whole number or true/false"),
    ({"backend": {"engine": 5}}, "backend engine is not text"),
    ({"backend": {"container": "--privileged"}}, "backend container is not a container name"),
    ({"backend": {NVAPI: "1"}}, "backend has a key that is not a field name"),
    ({"backend": {"AKIA" + "ABCDEFGHIJ234567": [1]}}, "backend (a key not shown) is not text"),
    ({NVAPI: "1"}, "(value not shown: it looks like it carries a credential) is not a field of a record"),
    ({"message": NVAPI * 100}, "message breaks the schema's maxLength"),
    ({"trial": 0}, "sweep fields"), ({"sweep": "UPPER", "trial": 0, "overrides": {}}, "sweep fields"),
    ({"state": "RUNNING", "err_class": "ERR_INFRA"}, "err_class only on an ERROR record"),
    ({"id": "other-id"}, "its id does not match the file name"),
    ({"state": "RUNNING"}, "its transitions run PENDING .. PENDING, not PENDING .. RUNNING"),
])
def test_a_damaged_record_is_one_line_naming_the_field_never_its_value(change, words):
    rec = {**_record(), **change}
    said = shape.damage(rec, "dino-train-abc12")
    assert said is not None and words in said and "\n" not in said and NVAPI not in said
    assert shape.damage(_record(), "dino-train-abc12") is None


def test_a_non_object_is_not_a_record():
    assert shape.damage([], "x") == "not a JSON object"


def test_a_str_subclass_is_text():
    """A record built in code may hold taobank.states.State members (StrEnum): they are their names."""
    from taobank.states import State

    rec = {**_record(), "state": State.PENDING,
           "transitions": [{**_record()["transitions"][0], "state": State.PENDING}]}
    assert shape.damage(rec, "dino-train-abc12") is None
    assert shape.damage({**rec, "state": State.RUNNING}, "dino-train-abc12").startswith("its transitions run")
