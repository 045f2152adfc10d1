"""The bank's argparse parser: every helper builds its parser from :class:`BankParser` (its subcommands inherit it).

It differs from argparse in two ways, each a rule of the bank, on this class only (argparse itself is never
patched, so other parsers in the same process, the MCP server's included, are left as Python made them):
a usage error is ONE line (exit 2) like every other failure, and ``--flag=--`` is the value ``--``.
"""
from __future__ import annotations

import argparse
from typing import Any, NoReturn

from ..text import error_line


class BankParser(argparse.ArgumentParser):
    """An ArgumentParser with one-line usage errors; ``add_subparsers`` makes its subparsers of this class too."""

    def error(self, message: str) -> NoReturn:
        """argparse's usage error as ONE line (exit 2); the full usage is one ``--help`` away."""
        self.exit(2, error_line(f"{self.prog}: {message} (see --help)") + "\n")

    # A private argparse method, on purpose and only here. Python 3.11's argparse removes "--" from an option's
    # value words before the action sees them, so ``--env=--`` reached the action as [] (a list where a string
    # was due: a crash or a wrong value later) instead of the string "--" (Python 3.13 keeps it). No public hook
    # sees an option's words between the split of "--flag=value" and that removal. Only an option's one value
    # that is exactly "--" is taken here; everything else is argparse's own. tests/unit/test_bankparser.py
    # fails if argparse stops calling this method or handles "--flag=--" in some third way.
    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        """``--flag=--`` is the value ``--``, converted and checked (type, choices) as any other value."""
        if action.option_strings and action.nargs in (None, argparse.OPTIONAL) and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)
