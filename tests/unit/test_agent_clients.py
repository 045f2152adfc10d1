"""The pinned agent CLIs: exact pins parsed from versions.yaml, one cache folder per
package@version, and a cache entry counts only when its install finished."""
from __future__ import annotations

import pytest

from devtools import agent_clients
from taobank.errors import TaoError


@pytest.mark.parametrize("spec, want", [
    ("@anthropic-ai/claude-code@2.1.332", ("@anthropic-ai/claude-code", "2.1.332")),
    ("@openai/codex@0.171.0", ("@openai/codex", "0.171.0")),
    ("plain@1.0.0", ("plain", "1.0.0")),
])
def test_split_spec(spec, want):
    assert agent_clients.split_spec(spec) == want


@pytest.mark.parametrize("spec", ["@openai/codex", "@openai/codex@latest", "@openai/codex@^0.171.0", "codex@0.171.0-beta", "@1.0.0"])
def test_a_pin_that_is_not_exact_is_refused(spec):
    with pytest.raises(TaoError, match=r"is not <package>@<major.minor.patch>: fix versions.yaml agent_clients"):
        agent_clients.split_spec(spec)


def test_every_client_is_pinned_in_versions_yaml(monkeypatch, tmp_path):
    monkeypatch.setenv("TAO_CACHE_DIR", str(tmp_path))
    by_key = {c.key: c for c in agent_clients.clients()}
    assert set(by_key) == {"claude_code", "codex", "mcp_inspector"}
    assert by_key["claude_code"].package == "@anthropic-ai/claude-code" and by_key["codex"].package == "@openai/codex"
    c = by_key["codex"]
    assert c.prefix == tmp_path / "npm" / "@openai" / f"codex@{c.version}"
    assert c.binary == c.prefix / "node_modules" / ".bin" / "codex"


def test_only_a_finished_install_of_the_same_spec_counts(monkeypatch, tmp_path):
    monkeypatch.setenv("TAO_CACHE_DIR", str(tmp_path))
    c = agent_clients.client("codex")
    assert not c.installed()
    c.binary.parent.mkdir(parents=True)
    c.binary.write_text("#!/bin/sh\n")
    assert not c.installed(), "binary without marker: a half-finished install"
    (c.prefix / agent_clients.MARKER).write_text("@openai/codex@0.0.1\n")
    assert not c.installed()
    (c.prefix / agent_clients.MARKER).write_text(c.spec + "\n")
    assert c.installed()
    assert agent_clients.ensure(c) == c.binary  # cached: no npm call


def test_unknown_client_key():
    with pytest.raises(TaoError, match="unknown agent client 'cursor': one of claude_code, codex"):
        agent_clients.client("cursor")
