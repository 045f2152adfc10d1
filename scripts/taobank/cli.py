"""Entry-point glue: every script's main() runs through :func:`run_main`.

The core never prints; scripts do, through these helpers, so that text and
``--json`` output carry the same data.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from .errors import TaoError, UsageError


def _one_line_usage_error(parser: argparse.ArgumentParser, message: str) -> None:
    """argparse's usage error as ONE line (exit 2); the full usage is one ``--help`` away."""
    parser.exit(2, f"error: {parser.prog}: {message} (see --help)\n")


def run_main(main: Callable[[list[str]], int | None], argv: list[str] | None = None) -> None:
    """Call ``main`` and turn a TaoError (or an argparse usage error) into one line on stderr."""
    # Every helper's parsers (subcommands included) are built inside main(): make their
    # usage errors one line like every other failure, without touching each script.
    argparse.ArgumentParser.error = _one_line_usage_error  # type: ignore[method-assign]
    try:
        rc = main(sys.argv[1:] if argv is None else argv)
    except TaoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(rc or 0)


def print_json(data: Any) -> None:
    """Print ``data`` as stable, indented JSON (what ``--json`` emits)."""
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def parse_kv(items: list[str] | None, flag: str) -> dict[str, str]:
    """``["K=V", ...]`` from a repeatable ``flag`` into a dict; one-line error otherwise."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} {item!r} must look like KEY=VALUE")
        out[key] = value
    return out
