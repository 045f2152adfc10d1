#!/usr/bin/env python3
"""Run TAO jobs on a SLURM cluster over SSH: submit, status, logs, cancel, preflight.

  tao_slurm.py preflight [--private-registry [--registry nvcr.io]] [--json]
  tao_slurm.py submit --spec job.yaml [flags] [--parent ID] [--max-attempts N --max-total-time D] [--name TEXT]
                      [--dry-run] [--quiet|--json] [-- command args...]
  tao_slurm.py status [ID...] [--watch] [--no-retry] [--json]
  tao_slurm.py logs ID [--tail N] [-f/--follow] [--json]
  tao_slurm.py cancel ID... | --all [--json]
  tao_slurm.py metrics ID [--json | --csv | --plot] [--kpi NAME...] [--png FILE]
  tao_slurm.py artifacts ID | --last [--kpi NAME [--mode min|max]] [--json]   (the job's results; best checkpoint)
  tao_slurm.py fetch ID [PATH...] --to DIR [--force] [--json]   (download: a digest per block checked; a rerun resumes)
  tao_slurm.py prune ID... [--yes] [--json]   (delete finished jobs' own results folders; asks first)
  tao_slurm.py resume ID              (finish a submit whose sbatch answer was lost)
  tao_slurm.py continue ID [--from CHECKPOINT]   (a NEW job carrying on a failed/canceled/timed-out one)
  tao_slurm.py stage FILE|DIR... --dest lustre:///abs/dir [--force]   (small inputs to the cluster)
  tao_slurm.py nccl-probe [--nodes 2] [--gpus-per-node N] [--backend nccl|gloo-cpu] [--timeout S] [--force] [--json]
  tao_slurm.py enroot-credentials [--registry nvcr.io] [--dry-run] [--json]   (reads NGC_KEY from the environment)

A command after "--" is the container's argv, never read as options; a string
command in a spec file runs under /bin/sh -c. Exit codes: 0 ok, 1 failed (or a
watched job ended in ERROR), 2 usage, 130 interrupted.

Connection: SLURM_USER, SLURM_HOSTNAME (comma list), SSH_KEY_PATH or SSH_AUTH_SOCK,
optional TAO_SSH_CONFIG / TAO_SSH_KNOWN_HOSTS. See skills/tao-run-on-slurm/SKILL.md.
"""
from __future__ import annotations

import argparse
import os

from taobank.cli import entry, verbcli
from taobank.cli.entry import parse_kv, print_json, run_main, spec_arguments, spec_from_args
from taobank.errors import UsageError


def _details(view) -> list[str]:
    b = view.backend
    return [f"SLURM job {b.get('slurm_job_id')} on {b.get('login_host')}",
            f"job_dir: {b.get('job_dir')}",
            f"logs: {b.get('log_dir')}/main.out main.err",
            f"results: {view.results_dir} ($RESULTS_DIR in the job; a TAO command gets results_dir= it)"]


def cmd_submit(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from taobank.contract import SubmitOptions

    if args.job_id and not args.dry_run:
        raise UsageError(f"--job-id only names a --dry-run preview here: to finish an interrupted SLURM submit run "
                         f"tao_slurm.py resume {args.job_id}")

    trials = verbcli.trials_of(args)
    spec = spec_from_args(args, "slurm")
    # one set of options for the submit and its dry run: the dry run checks what the submit is given
    options = SubmitOptions(description=args.description, skip_nccl_probe=args.skip_nccl_probe)
    if trials is not None:
        return verbcli.sweep_submit("slurm", spec, options, trials, args)
    if args.dry_run:
        job_id = args.job_id or "preview-job"
        script = verbcli.submit_lineage("slurm", spec, replace(options, job_id=job_id), args, dry_run=True)
        if args.json:
            print_json({"job_id": job_id, "script": script})
        else:
            print(script, end="")
        return 0
    view = verbcli.submit_lineage("slurm", spec, options, args)
    verbcli.print_submitted(view, args, _details(view))
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from taobank.core import platform

    view = platform.get("slurm").resume(args.id)
    print_json(view.to_dict()) if args.json else print(view.line())
    return 0


def cmd_nccl_probe(args: argparse.Namespace) -> int:
    from taobank.platforms.slurm import nccl_probe

    out = nccl_probe.probe(nodes=args.nodes, gpus=args.gpus_per_node, image=args.image, timeout=args.timeout,
                           force=args.force, interval=args.interval, max_wait=args.max_wait,
                           partition=args.partition, account=args.account, cpus=args.cpus_per_task,
                           nccl_env=parse_kv(args.nccl_env or [], "--nccl-env"), runtime=args.runtime,
                           cluster_name=args.cluster_name, backend=args.backend)
    return verbcli.nccl_report(out, as_json=args.json)


def cmd_stage(args: argparse.Namespace) -> int:
    from taobank.platforms.slurm import stage as slurm_stage

    out = slurm_stage.stage_inputs(args.files, args.dest, force=args.force)
    if args.json:
        print_json(out)
    else:
        for f in out["files"]:
            print(f"staged {f['path']} ({f['bytes']} bytes, sha256 {f['sha256'][:12]}... checked on {out['login_host']})")
    return 0


def cmd_preflight(args: argparse.Namespace) -> int:
    from taobank.platforms.slurm import preflight

    report = preflight.run_preflight(partition=args.partition, private_registry=args.private_registry,
                                     registry=args.registry)
    if args.json:
        print_json(report)
    else:
        for line in report["lines"]:
            print(line)
    return 0 if report["ok"] else 1


def cmd_enroot(args: argparse.Namespace) -> int:
    from taobank.platforms.slurm import preflight

    key = os.environ.get(args.key_env, "")
    if args.dry_run:
        shown = preflight.preview_enroot_credentials(args.registry, key, key_env=args.key_env)
        if args.json:
            print_json({"dry_run": True, **shown})
            return 0
        hosts = ", ".join(shown["login_hosts"])
        print(f"enroot-credentials preview: nothing was contacted or written; the key ({args.key_env}) is shown as "
              f"{preflight.KEY_MASK}")
        print(f"would replace the {', '.join(shown['machines'])} machine lines of {shown['file']} (mode 600) on the "
              f"first login host that answers of {hosts}, the key sent on stdin, with:")
        for line in shown["lines"]:
            print(f"  {line}")
        return 0
    host = preflight.install_enroot_credentials(args.registry, key, key_env=args.key_env)
    machines = preflight.credential_machines(args.registry)
    if args.json:
        print_json({"registry": args.registry, "machines": list(machines), "login_host": host,
                    "file": "~/.config/enroot/.credentials", "mode": "600"})
    else:
        print(f"enroot credentials for {', '.join(machines)} installed in ~/.config/enroot/.credentials on {host} "
              "(mode 600)")
    return 0


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


def build_parser() -> argparse.ArgumentParser:
    """Every verb's grammar (what main parses with, and what the MCP tools read their schemas from)."""
    parser, sub = entry.parser("tao_slurm.py", __doc__)

    p = sub.add_parser("submit", help="stage, render and sbatch one job")
    spec_arguments(p, "slurm")
    p.add_argument("--skip-nccl-probe", action="store_true",
                   help="submit a multi-node job without an ok NCCL probe for this cluster (recorded as skipped)")
    p.add_argument("--job-id", help="with --dry-run: the id the preview uses")
    verbcli.add_parent(p)
    verbcli.add_submit_outputs(p)

    verbcli.add_submit_flags(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- command args (overrides the spec's command)")
    p.set_defaults(func=cmd_submit)

    verbcli.add_common(sub, "slurm")
    verbcli.add_results(sub, "slurm")
    verbcli.add_continue(sub, "slurm")

    p = sub.add_parser("resume", help="reconcile a submit whose sbatch answer was lost")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_resume)

    p = verbcli.add_nccl_probe(sub, "multi-node NCCL all-reduce under timeout; verdict cached per cluster")
    p.add_argument("--cpus-per-task", type=int, default=2)
    p.add_argument("--partition")
    p.add_argument("--account")
    p.add_argument("--runtime", choices=["pyxis", "none"])
    p.add_argument("--cluster-name")
    p.add_argument("--nccl-env", action="append", metavar="KEY=VALUE")
    p.set_defaults(func=cmd_nccl_probe)

    p = sub.add_parser("stage", help="copy small local files or folders to a cluster folder (lustre:///abs/dir) "
                       "over SSH, sha256 checked there (a folder also gets a <folder>.sha256 manifest)")
    p.add_argument("files", nargs="+", metavar="FILE|DIR")
    p.add_argument("--dest", required=True, metavar="lustre:///ABS/DIR")
    p.add_argument("--force", action="store_true", help="replace files that exist there")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stage)

    p = sub.add_parser("preflight", help="SSH, SLURM commands, partition, results dir, enroot credentials")
    p.add_argument("--partition")
    p.add_argument("--private-registry", action="store_true",
                   help="also require the registry's machine lines in ~/.config/enroot/.credentials (nvcr.io: "
                        "nvcr.io and authn.nvidia.com)")
    p.add_argument("--registry", default="nvcr.io", metavar="HOST", help="the registry --private-registry checks")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_preflight)

    p = sub.add_parser("enroot-credentials", help="install registry credentials for Pyxis (secret via stdin)",
                       description="Write the registry's machine lines (nvcr.io: nvcr.io and authn.nvidia.com) "
                       "into ~/.config/enroot/.credentials (mode 600) on the SLURM login host, replacing older "
                       "ones: Pyxis reads them to pull a private image. The key is read from the environment "
                       "variable NGC_KEY (or --key-env NAME) and sent over SSH on stdin, never on a command line; "
                       "it is never printed. Once per cluster and user; check with preflight --private-registry.")
    p.add_argument("--registry", default="nvcr.io", metavar="HOST", help="the registry host to write lines for "
                   "(default nvcr.io; another registry's login is ENROOT_REGISTRY_USER, default $oauthtoken)")
    p.add_argument("--key-env", default="NGC_KEY", metavar="NAME",
                   help="environment variable holding the key (default NGC_KEY)")
    p.add_argument("--dry-run", action="store_true", help="print what would be written, the key masked; contact "
                   "nothing, write nothing")
    p.add_argument("--json", action="store_true", help="the registry, machine lines, login host and file as JSON")
    p.set_defaults(func=cmd_enroot)

    return parser


if __name__ == "__main__":
    run_main(main)
