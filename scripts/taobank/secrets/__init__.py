"""Secret lint and redaction: the rules are data (:data:`rules.RULES`).

``lint_text`` finds inline credentials in rendered manifests, sbatch scripts
and shell snippets and reports the rule and ``file:line`` -- never the value,
nor any part of it. ``redact_text`` returns the text with every value that
``lint_text`` flags masked (the record store passes free text through it).
``lint_objects`` lints manifests as sent: objects, never a re-wrapped dump.
``is_credential_name`` is the one rule for "this variable name holds a secret".

What is never flagged: references (``$VAR``, ``${VAR}``, ``$(cmd)``,
``{{ tmpl }}``, ``valueFrom``/``secretRef``, another variable's name such as
``NGC_API_KEY``), placeholders (``<your-key>``, ``***``, ``...``), names that
only contain a credential word (``HF_TOKEN_PATH``, ``CRED_SECRET_FILE``,
``NUM_TOKEN=5``).

A reviewed line is allowed by a marker on that line naming the rule and a
reason, e.g. ``# lint-ok: credential-assignment fixed password of the local
test cluster``. Lint lists every allowance it honoured; a marker with an
unknown rule or no reason is itself a finding (``bad-allowance``).

Every scan is linear in the size of the text, with a small constant: a line
rule's regex only finds where a value starts (``--token ``, ``HF_TOKEN=``), and
the value is cut from the line's runs of value characters, each found once, so
no long line is rescanned from every position; the YAML structure rules walk
the lines once with a stack.

One module, :mod:`.scanner`: which names hold a secret, what a secret value looks like, the rule table, the scan
of lines, structures and texts, masking, and what of a value an error line may quote -- every line runs
through all of it, and the scan asks the name rule of every key it meets.
"""
from __future__ import annotations

from .scanner import (MASK, PROSE_WORDS, RULE_NAMES, RULES, Finding, Rule, is_credential_name,
                      is_reference, lint_objects, lint_text, looks_like_secret, redact_text, redact_texts, rules_markdown,
                      scan, secret_entries, secret_entries_each, shown, shown_keys, unknown_fields)

__all__ = ["MASK", "PROSE_WORDS", "RULES", "RULE_NAMES", "Rule", "Finding", "is_credential_name",
           "is_reference", "lint_text", "lint_objects", "looks_like_secret", "redact_text", "redact_texts",
           "rules_markdown", "scan", "secret_entries", "secret_entries_each", "shown", "shown_keys", "unknown_fields"]
