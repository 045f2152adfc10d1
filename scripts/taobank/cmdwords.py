"""The words of a job's command, as both platforms' path checks read them (one tokenizer, one output rule)."""
from __future__ import annotations

import re
import shlex
from typing import Iterator

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


def read_candidates(words: list[str]) -> Iterator[tuple[str, str, str]]:
    """``(word before, candidate, key)`` for each word that may name something the job reads: the value
    of a ``key=value`` word (``key`` set), else the word itself (``key`` ""). Operators, redirection
    targets and values of output keys are left out; each platform classifies what remains."""
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        if skipped(word, before):
            continue
        key, sep, value = word.partition("=")
        if sep and OUTPUT_KEY.search(key):
            continue
        keyed = bool(sep) and not key.startswith("/")
        yield before, (value if keyed else word), (key if keyed else "")
