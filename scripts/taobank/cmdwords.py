"""The words of a job's command, as both platforms' path checks read them (one tokenizer, one output rule)."""
from __future__ import annotations

import re
import shlex

#: A ``key=`` (or spec-file key) whose value the job writes: an output, never an input to check.
OUTPUT_KEY = re.compile(r"(result|output|log|save|checkpoint_dir|ckpt_dir)", re.IGNORECASE)
#: What follows one of these is written by the shell, not read.
REDIRECTS = frozenset({">", ">>", "&>", ">|"})
#: Characters of shell operators: a word made of them only is no path.
OPERATORS = frozenset(";&|<>()")


def shell_words(text: str) -> list[str]:
    """``text`` split as the shell would (operators as their own words); [] when its quotes do not balance."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        return list(lex)
    except ValueError:  # unbalanced quotes: the shell will say so; nothing to check here
        return []


def skipped(word: str, before: str) -> bool:
    """A shell operator, or the target of a redirection: no path the job reads."""
    return set(word) <= OPERATORS or before in REDIRECTS
