#!/usr/bin/env python3
"""The job record: open a job (mint its id), mark its state, show and list records.

  open --platform P --image I --network-arch A --action X --storage-tier T --results-dir R
       [--retry-of ID] [--meta KEY=VALUE]... [--name TEXT]   prints only the new id
  mark ID --state S [--backend-ref REF] [--source agent|poller|backend-hook]
       [--message M] [--err-class ERR_INFRA|ERR_PROGRAM] [--meta KEY=VALUE]...
  show ID [--json] [--lineage]   (--lineage: the job and the jobs it builds on, oldest first)
  list [--platform P] [--state S] [--active] [--no-headers] [--json]   (the tao_jobs.py table)
  dir ID                                             prints the job's artifact folder

Records live in $TAO_STATE_DIR (default ${XDG_STATE_HOME:-~/.local/state}/tao-skill-bank/jobs).
States: PENDING RUNNING COMPLETE ERROR CANCELED UNKNOWN PRUNED; see docs/job-record.md for the
transition table. An illegal mark exits 1 naming the allowed transitions.
"""
from __future__ import annotations

import argparse
import sys

from taobank.cli.entry import BankParser
from taobank.cli.entry import add_version, parse_kv, print_json, run_main
from taobank.registry import names as platform_names


def _one_line(value: object) -> str:
    from taobank.text import one_line

    return one_line("" if value is None else value)


def _show_text(rec: dict) -> None:
    for key in ("id", "state", "err_class", "platform", "image", "network_arch", "action", "description",
                "storage_tier", "results_dir", "backend_ref", "retry_of", "parent", "continues", "attempt", "message",
                "created_at",
                "updated_at"):
        print(f"{key}: {_one_line(rec.get(key))}")
    for k, v in sorted(rec.get("backend", {}).items()):
        print(f"backend.{_one_line(k)}: {_one_line(v)}")
    print("transitions:")
    for t in rec["transitions"]:
        note = f" {_one_line(t['message'])}" if t.get("message") else ""
        print(f"  {_one_line(t.get('time'))} {t['state']} ({_one_line(t.get('source'))}){note}")


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    ap = BankParser(prog="tao_job_record.py", description=__doc__.split("\n\n")[0],
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    epilog=__doc__.split("\n\n", 1)[1])
    add_version(ap)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("open", help="mint an id and store a PENDING record; prints the id")
    p.add_argument("--platform", required=True, help=f"{', '.join(platform_names())} (k8s for kubernetes)")
    p.add_argument("--image", required=True)
    p.add_argument("--network-arch", required=True)
    p.add_argument("--action", required=True)
    p.add_argument("--storage-tier", required=True, help="A (mounted volume) or C (S3 staging)")
    p.add_argument("--results-dir", required=True, help="absolute path or URI (s3://, lustre://, pvc://...)")
    p.add_argument("--retry-of", metavar="ID", help="the finished job this one retries")
    p.add_argument("--meta", action="append", metavar="KEY=VALUE", help="backend metadata (repeatable)")
    p.add_argument("--name", dest="description", metavar="TEXT", help="free text that tells jobs apart")
    p.add_argument("--json", action="store_true", help="print the whole record instead of the id")

    p = sub.add_parser("mark", help="move a record to a new state")
    p.add_argument("id")
    p.add_argument("--state", required=True)
    p.add_argument("--backend-ref", help="e.g. <namespace>/<job-name> or the SLURM job id")
    p.add_argument("--source", default="agent", help="agent (default), poller or backend-hook")
    p.add_argument("--message", help="free text; secrets in it are redacted before storage")
    p.add_argument("--err-class", help="ERR_INFRA or ERR_PROGRAM (only with --state ERROR)")
    p.add_argument("--meta", action="append", metavar="KEY=VALUE", help="backend metadata (repeatable)")
    p.add_argument("--json", action="store_true", help="print the stored record")

    p = sub.add_parser("show", help="print one record")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.add_argument("--lineage", action="store_true",
                   help="the chain: the job and the jobs it continues, uses (--parent) or retries, oldest first")

    p = sub.add_parser("list", help="list records, oldest first")
    p.add_argument("--platform")
    p.add_argument("--state")
    p.add_argument("--active", action="store_true", help="only PENDING, RUNNING, UNKNOWN")
    p.add_argument("--no-headers", action="store_true")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("dir", help="print (and create) the job's mode-700 artifact folder")
    p.add_argument("id")
    return ap


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from taobank import records

    if args.cmd == "open":
        rec = records.open_record(args.platform, args.image, args.network_arch, args.action, args.storage_tier,
                                  args.results_dir, retry_of=args.retry_of, backend=parse_kv(args.meta, "--meta"),
                                  description=args.description)
        if args.json:
            print_json(rec)
        else:
            print(rec["id"])
    elif args.cmd == "mark":
        rec = records.mark(args.id, args.state, backend_ref=args.backend_ref, source=args.source,
                           message=args.message, err_class=args.err_class, backend=parse_kv(args.meta, "--meta"))
        if args.json:
            print_json(rec)
        else:
            print(f"{rec['id']} {rec['state']}")
    elif args.cmd == "show" and args.lineage:
        from taobank.campaign import lineage

        chain = lineage.chain(args.id)
        if args.json:
            print_json(chain)
        for rec in [] if args.json else chain:
            link = next((f"{word} {rec[k]}" for k, word in (("continues", "continues"), ("parent", "parent"),
                                                             ("retry_of", "retry of")) if rec.get(k)), "")
            print(_one_line(f"{rec['id']}  {rec['state']}  {rec.get('network_arch', '?')}/{rec.get('action', '?')}"
                            f"  {link}".rstrip()))
    elif args.cmd == "show":
        rec = records.load(args.id)
        if args.json:
            print_json(rec)
        else:
            _show_text(rec)
    elif args.cmd == "list":
        problems: list[str] = []
        recs = records.list_records(args.platform, args.state, args.active, problems=problems)
        for line in problems:
            print(f"warning: skipped {line}", file=sys.stderr)
        if args.json:
            print_json(recs)
        else:
            from taobank.campaign import jobtable

            sys.stdout.write(jobtable.render(recs, headers=not args.no_headers))
    elif args.cmd == "dir":
        print(records.artifact_dir(args.id))
    return 0


if __name__ == "__main__":
    run_main(main)
