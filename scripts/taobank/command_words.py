"""The words of a job's command, as every platform's path checks read them (one tokenizer, one output rule),
and the absolute paths a command and its spec files name."""
from __future__ import annotations

import re
import shlex
from typing import Any, Iterator

from .errors import TaoError
from .paths import abs_path
from .fsio import yaml_value

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


_OUTPUT_FLAGS = frozenset({"-o", "-r"})
#: Shell expansions, globs, quotes, regex and operator characters, whitespace: such a word is no path to check.
_NOT_A_PATH = re.compile(r"[*?\[\]$`{}^|()<>;&!'\"\\#%~=\s]")


def _is_output_flag(word: str) -> bool:
    return word in _OUTPUT_FLAGS or (word.startswith("--") and bool(OUTPUT_KEY.search(word)))


def _paths_in(text: str, what: str) -> Iterator[str]:
    """The paths of one value: ``/a`` or a ``,``/``:`` list of them; each passes the one path rule."""
    if not text.startswith("/") or "://" in text or _NOT_A_PATH.search(text):
        return
    for part in re.split(r"[,:]", text):
        if part.startswith("/") and part.strip("/"):
            yield abs_path(part, what)


def command_paths(command: str | list[str] | None, argv: list[str]) -> list[str]:
    """Paths the command reads: ``argv`` word by word, or the shell words of a string ``command``."""
    words = shell_words(command) if isinstance(command, str) else list(argv)
    out: list[str] = []
    for before, cand, _key in read_candidates(words):
        if not _is_output_flag(before):
            out += _paths_in(cand, "path in the command")
    return out


def _yaml_paths(node: Any, key: str, what: str) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _yaml_paths(v, str(k), what)
    elif isinstance(node, list):
        for v in node:
            yield from _yaml_paths(v, key, what)
    elif isinstance(node, str) and not OUTPUT_KEY.search(key):
        yield from _paths_in(node, what)


def spec_file_paths(name: str, data: bytes) -> list[str]:
    """Paths the values of an uploaded YAML/JSON spec file name (its keys say which are outputs)."""
    try:
        doc = yaml_value(data.decode("utf-8"), f"spec file {name}")
    except (TaoError, UnicodeDecodeError):
        return []
    return list(_yaml_paths(doc, "", f"path in spec file {name}"))
