#!/usr/bin/env python3
"""Run TAO jobs on Kubernetes: submit | status | logs | cancel (plain kubectl underneath).

  tao_k8s.py submit --spec job.yaml [--job-id ID] [--secret-env NAME ...] [--secrets-file F] [--ngc-pull-secret]
  tao_k8s.py status [JOB_ID ...] [--watch] [--json]   (no id: every active kubernetes record, one list call)
  tao_k8s.py logs JOB_ID [--tail N] [--follow]
  tao_k8s.py cancel JOB_ID [--json]
  tao_k8s.py nccl-probe [--nodes 2] [--gpus-per-node N] [--image IMAGE] [--timeout S] [--force] [--json]

Namespace/context: TAO_K8S_NAMESPACE (default "default") and TAO_K8S_CONTEXT,
or --namespace/--context; status/logs/cancel use what the record stored.
Secret values are read from this process's environment (--secret-env NAME) or
a mode-600 env-file, and reach the cluster on stdin only.
"""
from __future__ import annotations

import argparse
import sys
import time

from taobank.cli import print_json, run_main
from taobank.errors import UsageError


def _submit(args: argparse.Namespace) -> int:
    from taobank.kubernetes import action_request, verbs
    from taobank.kubernetes.kubectl import Kubectl
    from taobank.kubernetes.specargs import spec_from_args

    config = None
    if args.request:
        spec, config = action_request.to_job_spec(args.request, config_file=args.config_file,
                                                  config_sha256=args.config_sha256)
    else:
        if not args.spec and not args.image:
            raise UsageError("give --spec FILE, --request FILE, or --image with --command/--args-json")
        spec = spec_from_args(args)
    out = verbs.submit(spec, kube=Kubectl(args.namespace, args.context), job_id=args.job_id,
                       secret_env=args.secret_env or [], secrets_file=args.secrets_file,
                       ngc_pull_secret=args.ngc_pull_secret, config=config)
    if args.json:
        print_json(out)
    elif args.quiet:
        print(out["id"])
    else:
        how = "reconciled with existing Job" if out["reconciled"] else "submitted"
        print(f"{out['id']} {how}: {out['backend_ref']} uid={out['uid']} state={out['state']}")
        print(f"gate: {out['gate']}")
    return 0


def _line(r: dict) -> str:
    extra = f" ({r['err_class']})" if r.get("err_class") else ""
    obs = f" observed={r['observed']}" if r.get("observed") and r["observed"] != r["state"] else ""
    return f"{r['id']} {r['state']}{extra}{obs}: {r.get('message') or ''}"


def _status(args: argparse.Namespace) -> int:
    from taobank import states
    from taobank.kubernetes import verbs

    tty = sys.stdout.isatty()
    last = None
    while True:
        results = verbs.status(args.job_ids or None)
        done = all(r["state"] in states.TERMINAL for r in results)
        if not args.watch:
            break
        line = " | ".join(_line(r) for r in results) or "no active kubernetes jobs"
        if not args.json and line != last:
            # one progress line: rewritten in place on a terminal, a new line only on change otherwise
            sys.stdout.write("\r\033[K" + line[:200] if tty else line + "\n")
            sys.stdout.flush()
            last = line
        if done or not results:
            if tty and not args.json:
                sys.stdout.write("\n")
            break
        time.sleep(args.interval)
    if args.json:
        print_json(results if not args.job_ids or len(args.job_ids) > 1 else results[0])
    elif not args.watch:
        for r in results:
            print(_line(r))
        if not results:
            print("no active kubernetes jobs")
    return 0


def _logs(args: argparse.Namespace) -> int:
    from taobank.kubernetes import verbs

    text, rc = verbs.logs(args.job_id, tail=args.tail, follow=args.follow)
    sys.stdout.write(text)
    return rc or 0


def _cancel(args: argparse.Namespace) -> int:
    from taobank.kubernetes import verbs

    out = verbs.cancel(args.job_id)
    print_json(out) if args.json else print(f"{out['id']} {out['state']}: {out['message']}")
    return 0


def _nccl_probe(args: argparse.Namespace) -> int:
    from taobank.kubernetes import nccl_probe
    from taobank.kubernetes.kubectl import Kubectl

    out = nccl_probe.probe(kube=Kubectl(args.namespace, args.context), nodes=args.nodes, gpus=args.gpus_per_node,
                           image=args.image, timeout=args.timeout, force=args.force, interval=args.interval,
                           pod_annotations=args.pod_annotation, node_selector=args.node_selector,
                           max_wait=args.max_wait)
    ok = out["verdict"] == "ok"
    if args.json:
        print_json(out)
    elif ok:
        how = f"cached from {out['checked_at']} (job {out['job_id']}; --force re-probes)" if out["cached"] \
            else f"job {out['job_id']}"
        print(f"nccl-probe ok on {out['cluster']}: {how}")
    if not ok:
        print(f"error: NCCL probe {out['verdict']} on {out['cluster']} (job {out['job_id']}, exit code "
              f"{out['exit_code']}): {out['advice']}", file=sys.stderr)
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    from taobank.kubernetes.specargs import spec_arguments

    parser = argparse.ArgumentParser(prog="tao_k8s.py", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("submit", help="gate, open record, render, lint, dry-run, apply, mark")
    spec_arguments(p)
    p.add_argument("--request", help="producer action request (schemas/action-request.schema.json)")
    p.add_argument("--config-file", help="mode=config: the materialised config file to stage")
    p.add_argument("--config-sha256", help="mode=config: expected sha256 of --config-file")
    p.add_argument("--job-id", help="record opened earlier (tao_job_record.py open); resumes/reconciles")
    p.add_argument("--secret-env", action="append", metavar="NAME", help="env var NAME whose value goes into the per-job Secret")
    p.add_argument("--secrets-file", help="KEY=VALUE env-file (mode 600) for the per-job Secret")
    p.add_argument("--ngc-pull-secret", action="store_true", help="create a per-job nvcr.io pull secret from $NGC_KEY")
    p.add_argument("--namespace", help="default: $TAO_K8S_NAMESPACE or 'default'")
    p.add_argument("--context", help="default: $TAO_K8S_CONTEXT")
    p.add_argument("--json", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the job id")
    p.set_defaults(func=_submit)
    p = sub.add_parser("status", help="state of jobs (no id: every active kubernetes record)")
    p.add_argument("job_ids", nargs="*")
    p.add_argument("--watch", action="store_true", help="poll until every job is terminal")
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_status)
    p = sub.add_parser("logs", help="logs of every pod (rank-prefixed for multi-node)")
    p.add_argument("job_id")
    p.add_argument("--tail", type=int, help="lines per pod (default: versions.yaml kubernetes.logs_tail)")
    p.add_argument("-f", "--follow", action="store_true")
    p.set_defaults(func=_logs)
    p = sub.add_parser("cancel", help="delete the recorded Job (UID-checked) and its Secret/Service")
    p.add_argument("job_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cancel)
    p = sub.add_parser("nccl-probe", help="2-node NCCL all-reduce under timeout; verdict cached per cluster")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--gpus-per-node", type=int, default=1)
    p.add_argument("--image", help="default: versions.yaml images.nccl_probe")
    p.add_argument("--timeout", type=int, default=300, help="seconds the all-reduce may take (coreutils timeout)")
    p.add_argument("--force", action="store_true", help="probe again even if an ok verdict is cached")
    p.add_argument("--interval", type=float, default=5.0, help="status poll interval")
    p.add_argument("--max-wait", type=float, help="seconds to wait for the Job before canceling it (default: --timeout + 600)")
    p.add_argument("--node-selector", action="append", metavar="KEY=VALUE")
    p.add_argument("--pod-annotation", action="append", metavar="KEY=VALUE")
    p.add_argument("--namespace", help="default: $TAO_K8S_NAMESPACE or 'default'")
    p.add_argument("--context", help="default: $TAO_K8S_CONTEXT")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_nccl_probe)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    run_main(main)
