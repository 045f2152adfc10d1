"""Text fit for one output line or a terminal: the cleaning every layer that prints or stores free text shares.

A leaf (it imports only :mod:`taobank.redact`), so the core and the campaign features clean text
without importing the command line.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

_SURROGATE = re.compile("[\ud800-\udfff]")


def _masked(text: str) -> str:
    """An error line with any credential the lint can see masked: a token pasted into the wrong flag is
    quoted back by argparse and by many checks, and must never reach the terminal."""
    from .redact import redact_text

    return redact_text(text)


def one_line(value: object, keep: str = "") -> str:
    """Text for one output line: newlines and other control characters shown escaped, so a stored
    message can neither split a line nor forge another one, and an escape sequence from a cluster or a
    job (``ESC [2J``, a title change) reaches no terminal. ``keep``: characters left as they are (a tab).

    The one place that cleans text a helper prints from cluster, engine or job output (or from a record a
    hand edited): a credential the lint can see is masked too."""
    return escaped(_masked(str(value)), keep)


def one_lines(values: Iterable[object], keep: str = "") -> list[str]:
    """:func:`one_line` of each value (the cells of a table row, or of a whole table), masked in one call of the
    scanner rather than one per value."""
    from .redact import redact_texts

    return [escaped(t, keep) for t in redact_texts([str(v) for v in values])]


def escaped(text: str, keep: str = "") -> str:
    """``text`` with every character that is not printable shown escaped (``\x1b``, ``\n``, ``\u2028``): the
    cleaning of :func:`one_line` without its masking. Printable text comes back unchanged."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else _escaped(c) for c in text)


def cleaned(data: Any) -> Any:
    """JSON-like data from outside the bank (a cluster's objects) with every string, keys included, through
    :func:`escaped`: a node's, a queue's or a claim's text reaches no terminal raw, and a name that is a name
    stays the same (it may go back to the cluster in a command)."""
    if isinstance(data, str):
        return escaped(data)
    if isinstance(data, dict):
        return {cleaned(k): cleaned(v) for k, v in data.items()}
    if isinstance(data, list):
        return [cleaned(v) for v in data]
    return data


def _escaped(c: str) -> str:
    """A character no terminal gets as it is: a byte that was not UTF-8 as that byte (``\\xe9``), others as repr."""
    return f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else repr(c)[1:-1]


def terminal_text(text: str) -> str:
    """Many lines of cluster, engine or job output (logs, pull progress) fit for a terminal: every line
    through :func:`one_line` (tabs kept), each line end kept as a newline."""
    return "".join(one_line(line, keep="\t") + "\n" for line in text.splitlines()) if text else ""


def valid_text(text: str) -> str:
    """``text`` with every lone surrogate (a byte of a child's output that was not UTF-8, see
    :func:`taobank.run.decode_output`) replaced by U+FFFD: text fit to parse, store in a record or encode."""
    return _SURROGATE.sub("\ufffd", text)


def stored_texts(texts: Iterable[str]) -> list[str]:
    """Free texts as a record stores them: each through :func:`valid_text`, then credentials masked, in one call
    of the scanner for the whole batch (a record's fields)."""
    from .redact import redact_texts

    return redact_texts([valid_text(t) for t in texts])

def error_line(message: object) -> str:
    """``error: MESSAGE`` as printed: credentials masked, control characters escaped (an exception's text may
    quote a cluster's answer or a file name a job wrote)."""
    return f"error: {one_line(message)}"
