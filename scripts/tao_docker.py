#!/usr/bin/env python3
"""Run TAO jobs on this machine's Docker (or Podman) engine: submit, status, logs, cancel, preflight.

  tao_docker.py preflight [--no-gpus] [--json]
  tao_docker.py login [--registry nvcr.io] [--key-env NGC_KEY | --key-file FILE]   (key on stdin, never argv)
  tao_docker.py pull IMAGE   (with the engine's progress)
  tao_docker.py submit --spec job.yaml [flags] [--ngc-pull-secret] [--name TEXT] [--dry-run] [--quiet|--json] [-- command args...]
                      [--parent ID [--parent-kpi NAME [--parent-mode min|max]] [--allow-incomplete-parent]]
                      [--sweep KEY=V1,V2 ... | --sweep-file FILE] [--max-concurrent K]
  tao_docker.py continue ID [--from CHECKPOINT]   (a NEW job carrying on a failed/canceled/timed-out one)
  tao_docker.py status --sweep ID [--watch] [--json]     tao_docker.py cancel --sweep ID
  tao_docker.py status [ID... | --last] [--watch] [--json]
  tao_docker.py logs ID | --last [--tail N] [-f/--follow] [--json]
  tao_docker.py cancel ID... | --last | --all [--json]
  tao_docker.py metrics ID | --last [--json | --csv | --plot]
  tao_docker.py artifacts ID | --last [--kpi NAME [--mode min|max]] [--json]
  tao_docker.py fetch ID [PATH...] --to DIR [--force] [--json]
  tao_docker.py prune ID... [--yes] [--json]

Every verb takes --engine docker|podman (default $TAO_DOCKER_ENGINE, else docker); the engine's
address is DOCKER_HOST (podman: CONTAINER_HOST) and is recorded with each job. A job is a detached
container named after its job id; it runs on when this helper exits. A command after "--" is the
container's argv, never read as options; a string command in a spec runs under sh -c.
Exit codes: 0 ok, 1 failed (or a watched job ended in ERROR), 2 usage, 130 interrupted.
See skills/tao-run-on-docker/SKILL.md.
"""
from __future__ import annotations

import argparse

from taobank.cli import entry, verbcli
from taobank.cli.entry import print_gate_notes, print_json, run_main, spec_arguments, spec_from_args
from taobank.errors import UsageError

PLATFORM = "docker"


def _adapter(args: argparse.Namespace):
    from taobank.core import platform
    from taobank.platforms.docker import engine as eng

    adapter = platform.get(PLATFORM)
    adapter.engine = eng.engine_name(getattr(args, "engine", None))
    return adapter


def cmd_submit(args: argparse.Namespace) -> int:
    from taobank.contract import SubmitOptions
    trials = verbcli.trials_of(args)  # a bad sweep is refused before anything else is read
    spec = spec_from_args(args, PLATFORM)
    adapter = _adapter(args)
    # one set of options for the submit and its dry run: the dry run checks what the submit is given
    options = SubmitOptions(job_id=args.job_id, description=args.description, ngc_pull_secret=args.ngc_pull_secret)
    if trials is not None:
        if args.parent:
            raise UsageError("--parent names one job's results: submit the sweep's trials without it, or one by one")
        return verbcli.sweep_submit(PLATFORM, spec, options, trials, args)
    if args.dry_run:
        text = verbcli.submit_lineage(PLATFORM, spec, options, args, dry_run=True)
        print_json({"job_id": args.job_id or "preview-job", "command": text.strip()}) if args.json else print(text, end="")
        return 0
    view = verbcli.submit_lineage(PLATFORM, spec, options, args)
    print_gate_notes(view.id, view.extra.get("gate_notes") or [])
    verbcli.print_submitted(view, args, [f"container: {view.extra.get('container', view.id)} "
                                         f"({adapter.engine} ps --filter label=org.tao-skill-bank.job-id={view.id})",
                                         f"results: {view.results_dir}", f"gate: {view.extra.get('gate', '')}"])
    return 0


def cmd_continue(args: argparse.Namespace) -> int:
    """The core's continue, on the engine the job ran on unless --engine names another."""
    from taobank.core import platform

    platform.get(PLATFORM).engine = args.engine
    return verbcli.cmd_continue(args, PLATFORM)


def cmd_preflight(args: argparse.Namespace) -> int:
    from taobank.platforms.docker import preflight

    import os

    no_gpus = args.no_gpus or os.environ.get("TAO_DOCKER_NO_GPUS") == "1"
    report = preflight.run_preflight(args.engine, no_gpus=no_gpus)
    if args.json:
        print_json(report)
    else:
        print("\n".join(report["lines"]))
    return 0 if report["ok"] else 1


def cmd_login(args: argparse.Namespace) -> int:
    from taobank.platforms.docker import engine, registry

    from taobank.platforms.docker.spec import check_image, refuse_secret

    check_image(args.registry, "--registry")  # before the key is read: a key pasted here is refused unshown
    refuse_secret(args.username, "--username")
    key = registry.read_key(args.key_env, args.key_file)
    line = registry.login(engine.Engine(args.engine), args.registry, key, args.username)
    print_json({"registry": args.registry, "user": args.username, "ok": True}) if args.json else print(line)
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    import sys

    from taobank.platforms.docker import engine, registry

    from taobank.redact import redact_text
    from taobank.text import terminal_text

    registry.pull(engine.Engine(args.engine), args.image,
                  lambda t: (sys.stderr.write(terminal_text(redact_text(t))), sys.stderr.flush()))
    print(f"pulled {redact_text(args.image)}")
    return 0


def _engine_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["docker", "podman"], help="the engine's CLI (default $TAO_DOCKER_ENGINE or docker)")


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


def build_parser() -> argparse.ArgumentParser:
    """Every verb's grammar (what main parses with, and what the MCP tools read their schemas from)."""
    parser, sub = entry.parser("tao_docker.py", __doc__)

    p = sub.add_parser("submit", help="check, then start one job as a detached container")
    spec_arguments(p, PLATFORM)
    p.add_argument("--job-id", help="finish a record opened earlier (an existing container is adopted), or the "
                   "id a --dry-run preview uses")
    p.add_argument("--ngc-pull-secret", action="store_true", help="before a pull, log the engine in to the image's "
                   "registry as $oauthtoken with $NGC_KEY (on stdin, never argv), as Kubernetes makes its pull Secret")
    verbcli.add_parent(p)
    verbcli.add_submit_outputs(p)

    verbcli.add_submit_flags(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- command args (overrides the spec's command)")
    p.set_defaults(func=cmd_submit)

    verbcli.add_common(sub, PLATFORM)
    verbcli.add_results(sub, PLATFORM)
    p = verbcli.add_continue(sub, PLATFORM)
    p.set_defaults(func=cmd_continue)

    p = sub.add_parser("preflight", help="engine, NVIDIA runtime/CDI, GPUs, driver, compute capability")
    p.add_argument("--no-gpus", action="store_true", help="a CPU-only host: report the GPU checks as not run "
                   "(also TAO_DOCKER_NO_GPUS=1)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_preflight)

    p = sub.add_parser("login", help="log the engine in to a registry (NGC) with the key on stdin")
    p.add_argument("--registry", default="nvcr.io")
    p.add_argument("--username", default="$oauthtoken", help="NGC keys use $oauthtoken (the default)")
    p.add_argument("--key-env", default="NGC_KEY", help="environment variable holding the key")
    p.add_argument("--key-file", help="a mode-600 file holding the key (instead of --key-env)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_login)

    p = sub.add_parser("pull", help="pull an image, showing the engine's progress")
    p.add_argument("image")
    p.set_defaults(func=cmd_pull)

    for p in sub.choices.values():
        _engine_flag(p)
    return parser


if __name__ == "__main__":
    run_main(main)
