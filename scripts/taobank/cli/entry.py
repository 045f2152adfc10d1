"""Entry-point glue: every helper's parser (:class:`BankParser`), every script's main() run through
:func:`run_main`; ``--json`` printing, ``KEY=VALUE`` flags.

The parser differs from argparse in two ways, each a rule of the bank, on its class only (argparse itself is
never patched, so other parsers in the same process, the MCP server's included, are left as Python made
them): a usage error is ONE line (exit 2) like every other failure, and ``--flag=--`` is the value ``--``.

The core never prints; scripts do, through these helpers, so that text and
``--json`` output carry the same data.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, NoReturn

from ..errors import EXIT_INTERRUPTED, TaoError, UsageError
from ..text import error_line, one_line


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


def run_main(main: Callable[[list[str]], int | None], argv: list[str] | None = None) -> None:
    """Call ``main`` and turn a TaoError into one line on stderr (a usage error is one line already: the helpers'
    parsers are :class:`BankParser`)."""
    try:
        rc = main(sys.argv[1:] if argv is None else argv)
    except TaoError as exc:
        print(error_line(exc), file=sys.stderr)
        for line in getattr(exc, "details", ()):  # more problems of one refusal (the spec check), one line each
            print(error_line(line), file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:  # disk full, read-only or immutable file, permissions: one line, no traceback
        print(error_line(os_error_line(exc)), file=sys.stderr)
        sys.exit(1)
    except RecursionError:  # a safety net: every parser of the bank caps nesting itself
        print("error: an input is nested too deeply to read: simplify it", file=sys.stderr)
        sys.exit(1)
    except UnicodeError:
        print("error: an input is not valid UTF-8 text (or holds a lone surrogate): save it as UTF-8", file=sys.stderr)
        sys.exit(1)
    sys.exit(rc or 0)


def os_error_line(exc: OSError) -> str:
    """What failed and what to do, for an OSError that reached the entry point."""
    import errno

    where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
    advice = {
        errno.ENOSPC: "free some space and run it again",
        errno.EDQUOT: "free some space (quota) and run it again",
        errno.EROFS: "the filesystem is read-only: point TAO_STATE_DIR (or the path) at a writable folder",
        errno.EACCES: "check the permissions, or use a folder you own",
        errno.EPERM: "the file is protected (immutable or owned by another user): check chattr/ownership",
    }.get(exc.errno or 0, "check the path and run it again")
    return f"cannot write or read{where}: {exc.strerror or exc}: {advice}"


def print_gate_notes(name: str, notes: list[str]) -> None:
    """The gate's ``queued:`` and ``warning:`` lines (:meth:`Gate.notes`) on stderr, seen even under
    --quiet/--json; ``name`` is the job or sweep they are about."""
    for line in notes:
        word, _, rest = line.partition(": ")
        print(one_line(f"{'note' if word == 'queued' else 'warning'}: {name} {rest}"), file=sys.stderr)


def print_direction_note(kpi: str | None, mode: str | None, flag: str) -> None:
    """On stderr, the direction a KPI was ranked in where no output line shows it, when it was taken from the KPI's
    name (``flag`` left out): :func:`taobank.kpirank.inferred_note`."""
    from ..kpirank import inferred_note

    note = inferred_note(kpi, mode, flag)
    if note:
        print(one_line(f"note: {note}"), file=sys.stderr)


def print_json(data: Any) -> None:
    """Print ``data`` as stable, indented JSON (what ``--json`` emits)."""
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def parse_kv(items: list[str] | None, flag: str) -> dict[str, str]:
    """``["K=V", ...]`` from a repeatable ``flag`` into a dict; one-line error otherwise."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:  # the item is not shown: it may be a value
            raise UsageError(f"each {flag} must look like KEY=VALUE (one does not; it is not shown)")
        out[key] = value
    return out


# --version lives here, not in verbcli: tao_job_record.py offers it without importing the platform layer.
def version() -> str:
    from .. import pins

    return f"{pins.resolve('bank.name')} {pins.resolve('bank.version')}"


class _Version(argparse.Action):
    """--version without loading versions.yaml unless asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} ({version()})")
        parser.exit(0)


def add_version(p: argparse.ArgumentParser) -> None:
    p.add_argument("--version", action=_Version, help="print the bank version and exit")
