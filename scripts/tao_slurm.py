#!/usr/bin/env python3
"""Run TAO jobs on a SLURM cluster over SSH: submit, status, logs, cancel, preflight.

  tao_slurm.py preflight [--private-registry] [--json]
  tao_slurm.py submit --spec job.yaml [flags] [--json] [-- command args...]
  tao_slurm.py status [JOB_ID...] [--watch] [--json]
  tao_slurm.py logs JOB_ID [--lines N] [--follow] [--json]
  tao_slurm.py cancel JOB_ID... [--json]
  tao_slurm.py resume JOB_ID          (finish a submit whose sbatch answer was lost)
  tao_slurm.py enroot-credentials [--registry nvcr.io]   (reads NGC_KEY from the environment)

Connection: SLURM_USER, SLURM_HOSTNAME (comma list), SSH_KEY_PATH or SSH_AUTH_SOCK,
optional TAO_SSH_CONFIG / TAO_SSH_KNOWN_HOSTS. See skills/platform/tao-run-on-slurm/SKILL.md.
"""
from __future__ import annotations

import argparse
import os
import sys

from taobank.cli import parse_kv, print_json, run_main


def _spec_from_args(args: argparse.Namespace) -> dict:
    from taobank.slurm import spec as specmod

    spec = specmod.load_file(args.spec) if args.spec else {}
    flags = {
        "network_arch": args.network_arch, "action": args.action, "image": args.image,
        "num_nodes": args.num_nodes, "num_gpus": args.num_gpus, "max_num_gpus_per_node": args.max_gpus_per_node,
        "cpus_per_task": args.cpus_per_task, "mem": args.mem, "time_hours": args.time_hours,
        "timeout_hours": args.timeout_hours, "partition": args.partition, "account": args.account,
        "container_runtime": args.runtime, "results_base": args.results_base, "cluster_name": args.cluster_name,
    }
    spec.update({k: v for k, v in flags.items() if v is not None})
    if args.no_requeue:
        spec["use_requeue"] = False
    if args.dataset_root or args.require:
        ds = dict(spec.get("dataset") or {})
        if args.dataset_root:
            ds["root"] = args.dataset_root
        if args.require:
            ds["required"] = list(ds.get("required") or []) + args.require
        spec["dataset"] = ds
    if args.env:
        spec["env"] = {**(spec.get("env") or {}), **parse_kv(args.env, "--env")}
    if args.secret:
        spec["secrets"] = list(dict.fromkeys(list(spec.get("secrets") or []) + args.secret))
    if args.command:
        cmd = args.command[1:] if args.command[0] == "--" else args.command
        if cmd:
            spec["command"] = cmd
    return spec


def _print_record(rec: dict, as_json: bool) -> None:
    if as_json:
        print_json(rec)
        return
    b = rec.get("backend") or {}
    where = f"results={b['results_dir']} " if rec["state"] == "COMPLETE" and b.get("results_dir") else ""
    print(f"{rec['id']} {rec['state']} slurm_job_id={b.get('slurm_job_id', '-')} {where}"
          f"{('err_class=' + rec['err_class'] + ' ') if rec.get('err_class') else ''}{rec.get('message') or ''}".rstrip())


def cmd_submit(args: argparse.Namespace) -> int:
    from taobank.slurm import verbs

    spec = _spec_from_args(args)
    if args.dry_run:
        job_id = args.job_id or "preview-job"
        script = verbs.preview(spec, job_id)
        if args.json:
            print_json({"job_id": job_id, "script": script})
        else:
            print(script, end="")
        return 0
    rec = verbs.submit(spec)
    if args.json:
        print_json(rec)
    else:
        b = rec["backend"]
        print(f"submitted {rec['id']} as SLURM job {b['slurm_job_id']} on {b['login_host']}")
        print(f"job_dir: {b['job_dir']}")
        print(f"logs: {b['log_dir']}/main.out main.err")
        print(f"results: {b['results_dir']}")
        print(f"TAO_API_RESULTS_DIR={rec['results_dir']} (the record's results_dir: the parent; the container appends the job id)")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from taobank.slurm import verbs

    if args.watch:
        out = sys.stderr if args.json else sys.stdout  # keep stdout one JSON document
        recs = verbs.watch(args.ids or None, on_line=lambda line: print(line, file=out, flush=True))
    else:
        recs = verbs.status(args.ids or None, retry=not args.no_retry)
    if args.json:
        print_json(recs)
    elif not args.watch:
        if not recs:
            print("no active SLURM jobs")
        for rec in recs:
            _print_record(rec, False)
    bad = [r for r in recs if r["state"] in ("ERROR",) and not any(x.get("retry_of") == r["id"] for x in recs)]
    return 1 if args.watch and bad else 0


def cmd_logs(args: argparse.Namespace) -> int:
    from taobank.slurm import verbs

    if args.follow:
        def emit(stream: str, text: str) -> None:
            (sys.stderr if stream == "main.err" else sys.stdout).write(text)
            (sys.stderr if stream == "main.err" else sys.stdout).flush()

        verbs.follow(args.id, on_chunk=emit)
        return 0
    out = verbs.logs(args.id, lines=args.lines)
    if args.json:
        print_json(out)
    else:
        print(f"==> {out['log_dir']}/main.out <==")
        print(out["main.out"], end="" if out["main.out"].endswith("\n") or not out["main.out"] else "\n")
        print(f"==> {out['log_dir']}/main.err <==")
        print(out["main.err"], end="" if out["main.err"].endswith("\n") or not out["main.err"] else "\n")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from taobank.slurm import verbs
    from taobank.slurm.ssh import Connection

    conn = Connection()
    recs = [verbs.cancel(i, conn=conn) for i in args.ids]
    if args.json:
        print_json(recs)
    else:
        for rec in recs:
            _print_record(rec, False)
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from taobank.slurm import verbs
    from taobank.slurm.ssh import Connection

    rec = verbs.sbatch_record(Connection(), args.id)
    _print_record(rec, args.json)
    return 0


def cmd_preflight(args: argparse.Namespace) -> int:
    from taobank.slurm import preflight

    report = preflight.run_preflight(partition=args.partition, private_registry=args.private_registry)
    if args.json:
        print_json(report)
    else:
        for line in report["lines"]:
            print(line)
    return 0 if report["ok"] else 1


def cmd_enroot(args: argparse.Namespace) -> int:
    from taobank.slurm import preflight

    host = preflight.install_enroot_credentials(args.registry, os.environ.get(args.key_env, ""), key_env=args.key_env)
    if args.json:
        print_json({"registry": args.registry, "login_host": host, "file": "~/.config/enroot/.credentials", "mode": "600"})
    else:
        print(f"enroot credentials for {args.registry} installed in ~/.config/enroot/.credentials on {host} (mode 600)")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tao_slurm.py", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog="\n".join(__doc__.splitlines()[2:]))
    sub = parser.add_subparsers(dest="verb", required=True)

    p = sub.add_parser("submit", help="stage, render and sbatch one job")
    p.add_argument("--spec", help="job spec file (YAML or JSON; schemas/slurm-job-spec.schema.json)")
    p.add_argument("--network-arch")
    p.add_argument("--action")
    p.add_argument("--image")
    p.add_argument("--num-nodes", type=int)
    p.add_argument("--num-gpus", type=int)
    p.add_argument("--max-gpus-per-node", type=int)
    p.add_argument("--cpus-per-task", type=int)
    p.add_argument("--mem")
    p.add_argument("--time-hours", type=float)
    p.add_argument("--timeout-hours", type=float)
    p.add_argument("--partition")
    p.add_argument("--account")
    p.add_argument("--runtime", choices=["pyxis", "none"])
    p.add_argument("--results-base")
    p.add_argument("--cluster-name")
    p.add_argument("--dataset-root", help="lustre:///abs/path (root mode)")
    p.add_argument("--require", action="append", help="file under the dataset root that must exist (repeat)")
    p.add_argument("--env", action="append", help="KEY=VALUE for the job (not secrets)")
    p.add_argument("--secret", action="append", help="NAME of a secret env var to pass (value read from your env)")
    p.add_argument("--no-requeue", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="print the sbatch script, contact nothing")
    p.add_argument("--job-id", help="id used by --dry-run")
    p.add_argument("--json", action="store_true")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- command args (overrides the spec's command)")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("status", help="refresh records from one squeue + one sacct")
    p.add_argument("ids", nargs="*")
    p.add_argument("--watch", action="store_true", help="poll with backoff until terminal (no time cap)")
    p.add_argument("--no-retry", action="store_true", help="do not resubmit infrastructure failures")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("logs", help="main.out and main.err of a job")
    p.add_argument("id")
    p.add_argument("--lines", type=int, default=200)
    p.add_argument("--follow", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("cancel", help="scancel and mark CANCELED")
    p.add_argument("ids", nargs="+")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("resume", help="reconcile a submit whose sbatch answer was lost")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("preflight", help="SSH, SLURM commands, partition, results dir, enroot credentials")
    p.add_argument("--partition")
    p.add_argument("--private-registry", action="store_true", help="also require ~/.config/enroot/.credentials")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_preflight)

    p = sub.add_parser("enroot-credentials", help="install registry credentials for Pyxis (secret via stdin)")
    p.add_argument("--registry", default="nvcr.io")
    p.add_argument("--key-env", default="NGC_KEY", help="environment variable holding the key")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_enroot)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    run_main(main)
