"""Secret lint and redaction, as callers import it (``from taobank.redact import redact_text``); the parts live
in :mod:`taobank.secrets`, one idea each."""
from __future__ import annotations

from .secrets import (MASK, PROSE_WORDS, RULE_NAMES, RULES, Finding, Rule, is_credential_name,
                      is_reference, lint_objects, lint_text, looks_like_secret, redact_text, redact_texts, rules_markdown,
                      scan, secret_entries, secret_entries_each, shown, shown_keys, unknown_fields)

__all__ = ["MASK", "PROSE_WORDS", "RULES", "RULE_NAMES", "Rule", "Finding", "is_credential_name",
           "is_reference", "lint_text", "lint_objects", "looks_like_secret", "redact_text", "redact_texts",
           "rules_markdown", "scan", "secret_entries", "secret_entries_each", "shown", "shown_keys", "unknown_fields"]
