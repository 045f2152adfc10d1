#!/usr/bin/env python3
"""Run TAO jobs on Kubernetes: submit | status | logs | cancel (plain kubectl underneath).

  tao_k8s.py submit --spec job.yaml [--job-id ID] [--secret-env NAME ...] [--secrets-file F] [--ngc-pull-secret]
                    [--parent ID [--allow-incomplete-parent]] [--name TEXT] [--dry-run] [--quiet|--json]
  tao_k8s.py continue ID [--from CHECKPOINT]   (a NEW job carrying on a failed/canceled/timed-out one)
  tao_k8s.py status [ID ... | --last] [--watch] [--json]   (no id: every active kubernetes record, one list call)
  tao_k8s.py logs ID | --last [--tail N] [-f/--follow] [--json]
  tao_k8s.py cancel ID... | --last | --all [--json]
  tao_k8s.py metrics ID | --last [--json | --csv | --plot] [--kpi NAME...] [--png FILE]
  tao_k8s.py artifacts ID | --last [--kpi NAME [--mode min|max]] [--json]   (the job's results; best checkpoint)
  tao_k8s.py fetch ID [PATH...] --to DIR [--force] [--json]   (download: a digest per block checked; a rerun resumes)
  tao_k8s.py prune ID... [--yes] [--json]   (delete finished jobs' own results folders; asks first)
  tao_k8s.py nccl-probe [--nodes 2] [--gpus-per-node N] [--backend nccl|gloo-cpu] [--image IMAGE] [--timeout S] [--force] [--json]
                        [--ngc-pull-secret | --image-pull-secret NAME]

Namespace/context: TAO_K8S_NAMESPACE (default "default") and TAO_K8S_CONTEXT,
or --namespace/--context; status/logs/cancel use what the record stored.
Secret values are read from this process's environment (--secret-env NAME) or
a mode-600 env-file, and reach the cluster on stdin only. A --command string
runs under /bin/sh -c; --args-json is the container's argv. Exit codes: 0 ok,
1 failed (or a watched job ended in ERROR), 2 usage, 130 interrupted.
"""
from __future__ import annotations

import argparse
import sys

from taobank.cli import entry, verbcli
from taobank.cli.entry import deprecated, parse_kv, print_gate_notes, print_json, run_main, spec_arguments, spec_from_args
from taobank.errors import UsageError


def _submit(args: argparse.Namespace) -> int:
    from taobank.contract import SubmitOptions
    from taobank.platforms.kubernetes import action_request
    from taobank.platforms.kubernetes.adapter import PREVIEW_ID

    trials = verbcli.trials_of(args)  # a bad sweep is refused before anything else is read
    secret_env = list(args.secret_env or [])
    if args.secret:
        deprecated("--secret")
        secret_env += args.secret

    config = None
    if args.request:
        spec, config = action_request.to_job_spec(args.request, config_file=args.config_file,
                                                  config_sha256=args.config_sha256)
    else:
        if not args.spec and not args.image:
            raise UsageError("give --spec FILE, --request FILE, or --image with --command/--args-json")
        spec = spec_from_args(args, "kubernetes")
    options = SubmitOptions(namespace=args.namespace, context=args.context, job_id=args.job_id,
                            secret_env=tuple(secret_env), secrets_file=args.secrets_file,
                            ngc_pull_secret=args.ngc_pull_secret, config=config, description=args.description,
                            require_free=args.require_free, skip_nccl_probe=args.skip_nccl_probe)
    if trials is not None:
        return verbcli.sweep_submit("kubernetes", spec, options, trials, args)
    if args.dry_run:
        text = verbcli.submit_lineage("kubernetes", spec, options, args, dry_run=True)
        print_json({"job_id": args.job_id or PREVIEW_ID, "manifest": text}) if args.json \
            else sys.stdout.write(text)
        return 0
    view = verbcli.submit_lineage("kubernetes", spec, options, args)
    how = "reconciled with the existing Job" if view.extra.get("reconciled") else "Job created"
    gate = str(view.extra.get("gate") or "")
    print_gate_notes(view.id, view.extra.get("gate_notes") or [])
    verbcli.print_submitted(view, args, [f"{how}: uid={view.extra.get('uid')}", f"gate: {gate}"])
    return 0


def _nccl_probe(args: argparse.Namespace) -> int:
    from taobank.platforms.kubernetes import nccl_probe
    from taobank.platforms.kubernetes.kubectl import Kubectl

    out = nccl_probe.probe(kube=Kubectl(args.namespace, args.context), nodes=args.nodes, gpus=args.gpus_per_node,
                           image=args.image, timeout=args.timeout, force=args.force, interval=args.interval,
                           pod_annotations=parse_kv(args.pod_annotation, "--pod-annotation"),
                           node_selector=parse_kv(args.node_selector, "--node-selector"),
                           max_wait=args.max_wait, ngc_pull_secret=args.ngc_pull_secret,
                           image_pull_secret=args.image_pull_secret, backend=args.backend)
    return verbcli.nccl_report(out, as_json=args.json)


def _preflight(args: argparse.Namespace) -> int:
    from taobank import spec as specmod
    from taobank.platforms.kubernetes import preflight
    from taobank.platforms.kubernetes.kubectl import Kubectl

    pvcs = list(args.pvc or [])
    spec = specmod.load_file(args.spec) if args.spec else {}
    pvcs += [m["pvc"] for m in spec.get("mounts") or [] if m.get("pvc")]
    findings = preflight.run(Kubectl(args.namespace, args.context), pvcs, placement=spec, queue=args.queue)
    if args.json:
        print_json(preflight.as_dicts(findings))
    else:
        for f in findings:
            print("\n".join(f.lines()))
    missing = [f.check for f in findings if f.level == "MISSING"]
    if missing:
        print(f"error: preflight: fix what is MISSING ({', '.join(missing)}) before submitting", file=sys.stderr)
    return 1 if missing else 0


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


def build_parser() -> argparse.ArgumentParser:
    """Every verb's grammar (what main parses with, and what the MCP tools read their schemas from)."""
    parser, sub = entry.parser("tao_k8s.py", __doc__)
    p = sub.add_parser("submit", help="gate, open record, render, lint, dry-run, apply, mark")
    spec_arguments(p, "kubernetes")
    p.add_argument("--request", help="producer action request (schemas/action-request.schema.json)")
    p.add_argument("--config-file", help="mode=config: the materialised config file to stage")
    p.add_argument("--config-sha256", help="mode=config: expected sha256 of --config-file")
    p.add_argument("--job-id", help="record opened earlier (tao_job_record.py open): resumes/reconciles; "
                   "with --dry-run: the id the preview uses")
    p.add_argument("--secret-env", action="append", metavar="NAME",
                   help="env var NAME whose value goes into the per-job Secret")
    p.add_argument("--secret", action="append", help=argparse.SUPPRESS)  # spelling shared with SLURM's old flag
    p.add_argument("--secrets-file", help="KEY=VALUE env-file (mode 600) for the per-job Secret")
    p.add_argument("--ngc-pull-secret", action="store_true", help="create a per-job nvcr.io pull secret from $NGC_KEY")
    p.add_argument("--require-free", action="store_true",
                   help="refuse unless the GPUs are free now (default: a job that fits but finds them busy queues)")
    p.add_argument("--skip-nccl-probe", action="store_true",
                   help="multi-node without an ok NCCL probe verdict for this cluster (recorded in the record)")
    p.add_argument("--namespace", help="default: $TAO_K8S_NAMESPACE or 'default'")
    p.add_argument("--context", help="default: $TAO_K8S_CONTEXT")
    verbcli.add_parent(p)
    verbcli.add_submit_outputs(p)

    verbcli.add_submit_flags(p)
    p.set_defaults(func=_submit)
    verbcli.add_common(sub, "kubernetes")
    verbcli.add_results(sub, "kubernetes")
    verbcli.add_continue(sub, "kubernetes").add_argument(
        "--queue", help="Kueue LocalQueue of the new job (default: the job's own queue)")
    p = sub.add_parser("preflight", help="cluster reachable, version skew, namespace, can-i create jobs, "
                       "schedulable GPUs, which GPU nodes can run the job, Kueue queues, PVCs Bound (exit 1 if something "
                   "is MISSING)")
    p.add_argument("--pvc", action="append", metavar="CLAIM", help="a PVC the job mounts: must be Bound (repeatable)")
    p.add_argument("--spec", help="job spec file: check the PVCs its mounts name, count GPUs as its "
                   "node_selector/tolerations allow")
    p.add_argument("--queue", help="the Kueue LocalQueue you would submit to: must exist in the namespace")
    p.add_argument("--namespace", help="default: $TAO_K8S_NAMESPACE or 'default'")
    p.add_argument("--context", help="default: $TAO_K8S_CONTEXT")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_preflight)
    p = verbcli.add_nccl_probe(sub, "2-node NCCL all-reduce under timeout; verdict cached per cluster")
    p.add_argument("--node-selector", action="append", metavar="KEY=VALUE")
    p.add_argument("--pod-annotation", action="append", metavar="KEY=VALUE")
    p.add_argument("--ngc-pull-secret", action="store_true", help="create a per-job nvcr.io pull secret from $NGC_KEY")
    p.add_argument("--image-pull-secret", metavar="NAME", help="name of a pull secret already in the namespace")
    p.add_argument("--namespace", help="default: $TAO_K8S_NAMESPACE or 'default'")
    p.add_argument("--context", help="default: $TAO_K8S_CONTEXT")
    p.set_defaults(func=_nccl_probe)
    return parser


if __name__ == "__main__":
    run_main(main)
