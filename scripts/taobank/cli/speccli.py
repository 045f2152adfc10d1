"""``tao_jobs.py spec``: the experiment specs of the pinned TAO, before anything is submitted.

  spec list [--json]                                   the networks and their actions
  spec template NETWORK ACTION [--json]                the default spec (YAML; --json: its JSON Schema)
  spec keys NETWORK ACTION [PATTERN] [--json]          keys with type, default, range or options, description
  spec check FILE [KEY=VALUE ...] --network N --action A [--json]
                                                       the spec and Hydra overrides merged and checked: one
                                                       line per problem, exit 1 on any

Reads only the bank's generated data (schemas/tao_specs/): no cluster, no TAO package.
"""
from __future__ import annotations

import argparse
import sys

from .entry import BankParser
from .entry import print_json


def cmd_list(args: argparse.Namespace) -> int:
    from .. import tao_spec_schema

    found = tao_spec_schema.listing()
    if args.json:
        print_json({"tao_version": tao_spec_schema.tao_version(), "networks": found})
        return 0
    width = max(map(len, found)) if found else 0
    print(f"TAO {tao_spec_schema.tao_version()}: {len(found)} networks")
    for network, actions in found.items():
        print(f"{network:<{width}}  {' '.join(actions)}")
    return 0


def cmd_template(args: argparse.Namespace) -> int:
    from .. import tao_spec_schema

    if args.json:
        print_json(tao_spec_schema.schema_document(args.network, args.action))
    else:
        sys.stdout.write(tao_spec_schema.template(args.network, args.action))
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    from .. import tao_spec_schema
    from ..text import one_line

    rows = tao_spec_schema.keys(args.network, args.action, args.pattern)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"no key of {args.network} {args.action} holds {args.pattern!r}: see tao_jobs.py spec keys "
              f"{args.network} {args.action}", file=sys.stderr)
        return 1
    for row in rows:
        default = "" if row["type"].startswith("section") else f" = {row['default']!r}"
        rule = f" [{row['rule']}]" if row["rule"] else ""
        text = f"  {row['description']}" if row["description"] else ""
        print(one_line(f"{row['key']} ({row['type']}){default}{rule}{text}"))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .. import tao_spec_check, tao_spec_schema
    from ..text import one_line

    tao_spec_schema.check_known(args.network, args.action)
    doc = tao_spec_check.read_spec(args.file)
    report = tao_spec_check.check(args.network, args.action, doc, args.overrides)
    if args.json:
        for line in report.lines():  # said on stderr too: an MCP client lists them as the call's errors
            print(one_line(f"error: {line}"), file=sys.stderr)
        print_json({"ok": report.ok, "network": args.network, "action": args.action,
                    "tao_version": tao_spec_schema.tao_version(), "notes": report.notes,
                    "problems": [{"path": p.path, "kind": p.kind, "message": p.text} for p in report.problems]})
        return 0 if report.ok else 1
    for note in report.notes:
        print(one_line(f"note: {note}"), file=sys.stderr)
    for line in report.lines():
        print(one_line(line))
    if report.ok:
        extra = f" with {len(args.overrides)} overrides" if args.overrides else ""
        print(f"ok: {args.file}{extra} is a valid {args.network} {args.action} spec "
              f"for TAO {tao_spec_schema.tao_version()}")
        return 0
    return 1


def add_spec_verb(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``spec`` and its verbs, on a helper's parser."""
    lines = (__doc__ or "").strip("\n").splitlines()
    p = sub.add_parser("spec", help="TAO experiment specs: list, template, keys, check (before any submit)",
                       description=lines[0], epilog="\n".join(lines[2:]),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="spec_verb", required=True)
    v = verbs.add_parser("list", help="the networks of the pinned TAO and their actions")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_list)
    v = verbs.add_parser("template", help="an action's default spec (YAML, descriptions as comments)")
    v.add_argument("network")
    v.add_argument("action")
    v.add_argument("--json", action="store_true", help="the JSON Schema instead")
    v.set_defaults(func=cmd_template)
    v = verbs.add_parser("keys", help="the keys (matching PATTERN) with type, default, range, description")
    v.add_argument("network")
    v.add_argument("action")
    v.add_argument("pattern", nargs="?")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_keys)
    v = verbs.add_parser("check", help="a spec file and its KEY=VALUE overrides against the pinned TAO's schema")
    v.add_argument("file", metavar="FILE")
    v.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="Hydra overrides: key=v, +key=v, ++key=v, ~key")
    v.add_argument("--network", required=True)
    v.add_argument("--action", required=True)
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_check)
    return p


def main(argv: list[str], prog: str = "tao_jobs.py") -> int:
    """``spec`` alone (what ``tao_jobs.py spec ...`` runs without loading the job verbs)."""
    p = BankParser(prog=prog)
    sub = p.add_subparsers(dest="verb", required=True)
    add_spec_verb(sub)
    args, extra = p.parse_known_args(["spec", *argv])
    if extra and getattr(args, "spec_verb", None) == "check" and not any(w.startswith("-") for w in extra):
        args.overrides = [*args.overrides, *extra]  # KEY=VALUE words given after --network/--action
    elif extra:
        p.parse_args(["spec", *argv])  # the usage error, one line
    result: int = args.func(args)
    return result
