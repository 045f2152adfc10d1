#!/usr/bin/env python3
"""Every TAO job of this machine, whatever its platform: its state, logs, metrics, results and what comes next.

  tao_jobs.py list [--platform P] [--state S] [--active] [--sweep SWEEP] [--no-headers] [--json]   (records only)
  tao_jobs.py status [ID... | --last | --sweep SWEEP [--kpi NAME [--mode min|max]]] [--watch] [--no-headers] [--json]
  tao_jobs.py logs ID | --last [--tail N] [-f/--follow] [--json]
  tao_jobs.py cancel ID... | --last | --all | --sweep SWEEP [--json]
  tao_jobs.py sweep best SWEEP --kpi NAME [--mode min|max] [--json]   (the winning trial and its checkpoint)
  tao_jobs.py metrics ID | --last [--json | --csv | --plot] [--kpi NAME...] [--png FILE]
  tao_jobs.py artifacts ID | --last [--kpi NAME [--mode min|max]] [--json]   (the results folder; best checkpoint)
  tao_jobs.py fetch ID [PATH... | --best --kpi NAME [--mode min|max]] | --last [PATH...] --to DIR [--force] [--json]
      (a digest per block checked; a rerun resumes)
  tao_jobs.py prune ID... [--keep best|last|N [--kpi NAME --mode min|max]] [--yes] [--json]   (deletes finished
      jobs' own results folders, or with --keep their other checkpoints; asks first)
  tao_jobs.py continue ID [--from CHECKPOINT] [--time-hours H | --time-minutes M] [--dry-run] [--json | -q]
      (a NEW job carrying on a failed/canceled/timed-out one)
  tao_jobs.py spec list | template NETWORK ACTION [--json] | keys NETWORK ACTION [PATTERN] [--json]
  tao_jobs.py spec check FILE [KEY=VALUE...] --network N --action A [--json]   (TAO's schema; exit 1 on a problem)

Each verb dispatches on the record's platform (kubernetes, slurm or docker), exactly
as tao_k8s.py / tao_slurm.py / tao_docker.py would. Records are per machine: they live in
$TAO_STATE_DIR (default ${XDG_STATE_HOME:-~/.local/state}/tao-skill-bank/jobs).
Exit codes: 0 ok, 1 failed (or a watched job ended in ERROR), 2 usage, 130 interrupted.
"""
from __future__ import annotations

import argparse
import sys

from taobank.cli.entry import print_json, run_main
from taobank.text import one_line


def cmd_list(args: argparse.Namespace) -> int:
    from taobank.campaign import jobtable
    from taobank import records
    from taobank.core.platform import JobView

    from taobank import registry, states
    from taobank.errors import TaoError, UsageError

    try:  # a wrong filter is a usage error (exit 2), found before the store is read
        platform = registry.canonical(args.platform) if args.platform else None
        state = states.canonical_state(args.state) if args.state else None
    except TaoError as exc:
        raise UsageError(str(exc)) from None
    problems: list[str] = []
    recs = records.list_records(platform, state, args.active, problems=problems, sweep=args.sweep)
    for line in problems:
        print(one_line(f"warning: skipped {line}"), file=sys.stderr)
    if args.json:
        print_json([JobView.from_record(r).to_dict() for r in recs])
    elif recs:
        sys.stdout.write(jobtable.render(recs, headers=not args.no_headers))
    else:
        filtered = " matching the filters" if (platform or state or args.active or args.sweep) else ""
        print(f"no job records{filtered} in {records.state_dir()}", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["spec"]:  # reads only the spec data: none of the job verbs' modules load
        from taobank.cli import speccli

        return speccli.main(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


def build_parser() -> argparse.ArgumentParser:
    """Every verb's grammar (what main parses with, and what the MCP tools read their schemas from)."""
    from taobank.cli import entry, speccli, verbcli

    parser, sub = entry.parser("tao_jobs.py", __doc__)
    p = sub.add_parser("list", help="the job table from the records (no cluster contact)")
    p.add_argument("--platform", help="kubernetes (k8s), slurm or docker")
    p.add_argument("--state", help="PENDING RUNNING COMPLETE ERROR CANCELED UNKNOWN PRUNED")
    p.add_argument("--active", action="store_true", help="only PENDING, RUNNING, UNKNOWN")
    p.add_argument("--sweep", metavar="SWEEP", help="only the trials of this sweep")
    p.add_argument("--no-headers", action="store_true")
    p.add_argument("--json", action="store_true", help="a JSON list of job views")
    p.set_defaults(func=cmd_list)
    p = verbcli.add_status(sub, None)
    p.add_argument("--no-headers", action="store_true")
    p.set_defaults(table=True)
    verbcli.add_logs(sub, None)
    verbcli.add_cancel(sub, None)
    verbcli.add_metrics(sub, None)
    verbcli.add_results(sub, None)
    verbcli.add_continue(sub, None)

    verbcli.add_sweep_verb(sub)
    speccli.add_spec_verb(sub)
    return parser


if __name__ == "__main__":
    run_main(main)
