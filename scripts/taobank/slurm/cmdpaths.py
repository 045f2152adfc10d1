"""Absolute paths a job's command and uploaded spec files name.

Pyxis shows the container only what is mounted, so a spec file at
``/lustre/other/train.yaml`` named after ``-e`` is invisible when only the
results base is mounted, and the job fails after its queue wait. Every path
found here is checked with ``test -e`` before sbatch and mounted (unless a
site root already covers it).

Left out, because they need not exist yet or are not cluster paths: outputs
(after ``>``, an output flag such as ``-o``/``--output_dir``, values of
output keys such as ``results_dir=`` or ``results_dir:`` in a spec file),
words with shell expansions or globs, URLs, ``{specs}/...`` (the job's own
folder) and paths the image owns (versions.yaml ``slurm.image_paths``:
``/usr``, ``/opt``...) that no mount covers. A spec file that is not YAML
(JSON is YAML) names nothing.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Iterator

from .. import pins
from ..cmdwords import OUTPUT_KEY as _OUTPUT_KEY, read_candidates, shell_words
from ..errors import TaoError
from ..paths import abs_path, is_under
from ..safeparse import yaml_value

_OUTPUT_FLAGS = frozenset({"-o", "-r"})
#: Shell expansions, globs, quotes, regex and operator characters, whitespace: such a word is no path to check.
_NOT_A_PATH = re.compile(r"[*?\[\]$`{}^|()<>;&!'\"\\#%~=\s]")


def _is_output_flag(word: str) -> bool:
    return word in _OUTPUT_FLAGS or (word.startswith("--") and bool(_OUTPUT_KEY.search(word)))


def _paths_in(text: str, what: str) -> Iterator[str]:
    """The paths of one value: ``/a`` or a ``,``/``:`` list of them; each passes the one path rule."""
    if not text.startswith("/") or "://" in text or _NOT_A_PATH.search(text):
        return
    for part in re.split(r"[,:]", text):
        if part.startswith("/") and part.strip("/"):
            yield abs_path(part, what)


def command_paths(command: str | list[str], argv: list[str]) -> list[str]:
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
    elif isinstance(node, str) and not _OUTPUT_KEY.search(key):
        yield from _paths_in(node, what)


def spec_file_paths(name: str, data: bytes) -> list[str]:
    """Paths the values of an uploaded YAML/JSON spec file name (its keys say which are outputs)."""
    try:
        doc = yaml_value(data.decode("utf-8"), f"spec file {name}")
    except (TaoError, UnicodeDecodeError):
        return []
    return list(_yaml_paths(doc, "", f"path in spec file {name}"))


def cluster_paths(paths: Iterable[str], mounted: Iterable[str]) -> list[str]:
    """``paths`` once each, less those the image owns (``slurm.image_paths``) unless under a ``mounted`` folder."""
    owned = [str(p) for p in pins.resolve("slurm.image_paths")]
    roots = list(mounted)
    return [p for p in dict.fromkeys(paths)
            if any(is_under(p, r) for r in roots) or not any(is_under(p, o) for o in owned)]
