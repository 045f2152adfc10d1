"""The docs cite the core's data; these tests keep them from drifting."""
from __future__ import annotations

import re
from pathlib import Path

from taobank import redact, registry, states

BANK = Path(__file__).resolve().parents[2]


def _block(doc: str, begin: str, end: str) -> str:
    text = (BANK / doc).read_text(encoding="utf-8")
    start = text.index("\n", text.index(begin)) + 1
    return text[start:text.index(end)]


def test_transition_table_in_docs_matches_states():
    assert _block("docs/job-record.md", "<!-- BEGIN transitions", "<!-- END transitions") == states.markdown_table()


def test_rule_table_in_docs_matches_redact():
    assert _block("docs/secret-lint.md", "<!-- BEGIN rules", "<!-- END rules") == redact.rules_markdown()


def test_docs_pass_the_secret_lint():
    for doc in ("docs/job-record.md", "docs/secret-lint.md"):
        assert redact.lint_text((BANK / doc).read_text(encoding="utf-8"), doc) == []


def test_schema_enums_match_states():
    import json

    schema = json.loads((BANK / "schemas" / "job-record.schema.json").read_text())
    assert tuple(schema["$defs"]["state"]["enum"]) == states.STATES
    assert all(re.fullmatch(schema["properties"]["platform"]["pattern"], name) for name in registry.names())
    assert schema["properties"]["err_class"]["enum"] == [*states.ERR_CLASSES, None]
    assert schema["properties"]["transitions"]["items"]["properties"]["source"]["enum"] == list(states.SOURCES)
