"""Entry-point glue: every helper's parser (:class:`BankParser`), every script's main() run through
:func:`run_main`; ``--json`` printing, ``KEY=VALUE`` flags; argv -> job spec (:func:`spec_arguments`,
:func:`spec_from_args`: the grammar built from each adapter's flag declarations).

The parser differs from argparse in two ways, each a rule of the bank, on its class only (argparse itself is
never patched, so other parsers in the same process, the MCP server's included, are left as Python made
them): a usage error is ONE line (exit 2) like every other failure, and ``--flag=--`` is the value ``--``.

The core never prints; scripts do, through these helpers, so that text and
``--json`` output carry the same data.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
from typing import Any, Callable, Iterable, NoReturn

from ..errors import EXIT_INTERRUPTED, TaoError, UsageError
from ..text import error_line, one_line
from .. import registry
from ..jobspec import Declarations, Flag


#: The flags of every submit, by value name; a platform adds spellings and help (:class:`taobank.jobspec.Shared`).
SHARED: tuple[Flag, ...] = (
    Flag(("--spec",), help="job spec file (YAML or JSON); flags override its values"),
    Flag(("--image",)),
    Flag(("--network-arch",), help="TAO network, e.g. dino (default: the one a TAO command names, "
                                    "`dino train ...`; else custom, a generic command)"),
    Flag(("--action",), help="TAO action, e.g. train (default: the one a TAO command names; else run)"),
    Flag(("--nodes",), type=int, help="nodes (pods on Kubernetes)"),
    Flag(("--gpus-per-node", "--gpus"), dest="gpus_per_node", type=int,
         help="GPUs on each node (--gpus is a synonym)"),
    Flag(("--cpus",)),
    Flag(("--memory",)),
    Flag(("--env",), kind="pairs", metavar="KEY=VALUE", help="non-secret env (repeatable)"),
    Flag(("--nccl-env",), kind="pairs", metavar="NCCL_X=VALUE", help="per-cluster NCCL env (repeatable)"),
)


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
    """The gate's ``queued:``, ``note:`` and ``warning:`` lines (:meth:`Gate.notes`) on stderr, seen even under
    --quiet/--json; ``name`` is the job or sweep they are about."""
    for line in notes:
        word, _, rest = line.partition(": ")
        print(one_line(f"{'note' if word in ('queued', 'note') else 'warning'}: {name} {rest}"), file=sys.stderr)


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


#: old flag -> the flag that replaces it; the old one is accepted for one release
DEPRECATED = {"--lines": "--tail", "--secret": "--secret-env"}


def deprecated(old: str) -> None:
    print(f"warning: {old} is deprecated and will be removed in the next release: use {DEPRECATED[old]}",
          file=sys.stderr)


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


def parser(prog: str, doc: str) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The top-level parser of a helper: description from ``doc``'s first line, the rest as epilog."""
    lines = doc.strip("\n").splitlines()
    p = BankParser(prog=prog, description=lines[0], epilog="\n".join(lines[2:]),
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(p)
    sub = p.add_subparsers(dest="verb", required=True)
    return p, sub


# ------------------------------------------------------------ argv -> job spec
# Argv -> job spec for every platform: the flags every submit shares (one vocabulary: ``--nodes``,
# ``--gpus-per-node``, ``--cpus``, ``--memory`` ...) and the grammar built from the adapter's flag declarations.
#
# Each adapter's ``flags`` module declares its submit flags as data (``SHARED``, ``FLAGS``) and says where
# each value goes (``spec_from_flags``); here they become argparse flags, and the parsed values plain
# Python (``KEY=VALUE`` pairs a dict, the argv after ``--`` a list) the adapter places in its spec.
@functools.cache
def declaration(platform: str) -> Declarations:
    """The platform's flag declarations (its adapter's ``flags``), looked up once per process (as :func:`flags_of`)."""
    return registry.adapter(platform).flags


def add_arguments(parser: argparse.ArgumentParser, flags: Iterable[Flag]) -> None:
    """Each declared flag on ``parser``, in order; flags naming one ``exclusive`` group share it."""
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for flag in flags:
        target: argparse._ActionsContainer = parser
        if flag.exclusive:
            if flag.exclusive not in groups:
                groups[flag.exclusive] = parser.add_mutually_exclusive_group()
            target = groups[flag.exclusive]
        kwargs: dict = {"dest": flag.dest, "help": argparse.SUPPRESS if flag.hidden else flag.help}
        if flag.kind in ("value", "list", "pairs"):
            if flag.type is not str:
                kwargs["type"] = flag.type
            if flag.choices is not None:
                kwargs["choices"] = list(flag.choices)
            if flag.metavar is not None:
                kwargs["metavar"] = flag.metavar
            if flag.kind != "value":
                kwargs["action"] = "append"
        else:
            kwargs["action"] = "store_true" if flag.kind == "on" else "store_false"
        kwargs["default"] = flag.default
        target.add_argument(*flag.names, **kwargs)


@functools.cache
def flags_of(platform: str) -> tuple[Flag, ...]:
    """Every submit flag of ``platform``: the shared ones as it spells them, then its own."""
    decl = declaration(platform)
    return decl.SHARED.spell(SHARED) + tuple(decl.FLAGS)


def spec_arguments(parser: argparse.ArgumentParser, platform: str) -> None:
    """The job spec flags of ``platform``'s submit (and of render_k8s_job.py for Kubernetes)."""
    add_arguments(parser, flags_of(platform))


def values_of(args: argparse.Namespace, platform: str) -> dict[str, Any]:
    """The declared flags' values from ``args``, as the adapter takes them."""
    values: dict[str, Any] = {}
    for flag in flags_of(platform):
        value = getattr(args, flag.dest, None)
        values[flag.dest] = parse_kv(value, flag.names[0]) if flag.kind == "pairs" else value
    if values.get("secret"):
        deprecated("--secret")
        values["secret_env"] = list(values.get("secret_env") or []) + list(values.pop("secret"))
    command = getattr(args, "command", None)
    if isinstance(command, list):  # the argv after ``--`` (SLURM, Docker)
        values["command"] = (command[1:] if command and command[0] == "--" else command) or None
    return values


def spec_from_args(args: argparse.Namespace, platform: str) -> dict:
    """``--spec`` merged with the flags (flags win), validated by the platform; the network and action a TAO
    command names (``dino train ...``) fill the ones neither gives (:func:`taobank.tao_command.identified`)."""
    from .. import tao_command

    values = values_of(args, platform)
    return tao_command.identified(declaration(platform).spec_from_flags(args.spec, values))
