"""taobank.spec.validate: the one-line error names the field and never echoes a value that may be secret."""
from __future__ import annotations

import pytest

from taobank import spec
from taobank.errors import TaoError

TOKEN = "hf_" + "q" * 30


def message(obj: dict, schema: str = "k8s-job-spec.schema.json") -> str:
    with pytest.raises(TaoError) as exc:
        spec.validate(obj, schema, "job spec")
    return str(exc.value)


def test_missing_command_names_the_alternatives_not_the_spec():
    msg = message({"image": "i", "env": {"HF_TOKEN": TOKEN}})
    assert TOKEN not in msg and "command" in msg and "args" in msg and "\n" not in msg


def test_both_command_and_args_is_refused_without_echo():
    msg = message({"image": "i", "command": "c", "args": ["a"], "env": {"HF_TOKEN": TOKEN}})
    assert TOKEN not in msg and "command" in msg and "args" in msg


def test_bad_env_value_is_not_echoed():
    msg = message({"image": "i", "command": "c", "env": {"HF_TOKEN": 12345678901234}})
    assert "12345678901234" not in msg and "env.HF_TOKEN" in msg


def test_ordinary_field_errors_keep_their_detail():
    assert "'two' is not of type 'integer'" in message({"image": "i", "command": "c", "gpus": "two"})
