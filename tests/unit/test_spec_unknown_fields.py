"""An unknown-field error names a key only when it is a short field-like name that is no credential: a spec path
pointing at another file (/etc/shadow read as YAML) never has its lines quoted back, through the helper or MCP."""
from __future__ import annotations

import pytest

from taobank import spec
from taobank.errors import TaoError
from taobank.mcp import tools
from taobank.redact import shown_keys

HASH = "$6$rounds=5000$PLANTEDsalt$Wm2Xv9Lr4Tn6Yb1Hc5Jd7Fg0Qa8Se3Rd"
SHADOW = f"root:{HASH}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\nbob:!:19000::::::\n"


def test_another_files_lines_are_counted_never_quoted(tmp_path, state_dir):
    shadow = tmp_path / "shadow"
    shadow.write_text(SHADOW)
    done = tools.run(tools.by_name("submit_docker"), {"spec": str(shadow), "dry_run": True})
    said = "\n".join(done.errors)
    assert done.exit_code != 0 and "3 unknown fields, not shown (not field names: is it the right file?)" in said
    for word in ("root", "daemon", "bob", "PLANTED", "19000"):
        assert word not in said, said


def test_a_short_field_like_key_is_named_with_its_near_miss_and_a_token_is_not(tmp_path):
    token = "hf_" + "Zk3q8Wm2Xv9Lr4Tn6Yb1Hc5Jd7Fg0Qa8Se3R"
    with pytest.raises(TaoError) as got:
        spec.validate({"image": "busybox", "imagee": 1, token: 1, "x" * 41: 1, "a b": 1, 7: 1},
                      "docker-job-spec.schema.json", "Docker job spec")
    text = str(got.value)
    assert "unknown field 'imagee' (did you mean 'image'?) and 4 more, not shown" in text
    assert token not in text and "x" * 41 not in text and "a b" not in text


def test_the_typed_spec_names_the_same_keys():
    from taobank.platforms.docker.spec import DockerSpec

    with pytest.raises(TaoError) as got:
        DockerSpec.from_dict({"image": "busybox", "nope": 1, f"root:{HASH}:1": None})
    assert "unknown field 'nope' and 1 more, not shown" in str(got.value) and HASH not in str(got.value)


@pytest.mark.parametrize("key,named", [
    ("image", True), ("my_field-2.x", True), ("x" * 40, True), ("x" * 41, False), ("", False), ("1abc", False),
    ("root:$6$x", False), ("a\x1b[2J", False), ("nvapi-" + "A1b2C3d4" * 8, False), (5, False), (None, False),
])
def test_shown_keys(key, named):
    assert shown_keys([key]) == (([key], 0) if named else ([], 1))
