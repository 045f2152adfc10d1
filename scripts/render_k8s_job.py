#!/usr/bin/env python3
"""Render the Kubernetes manifests (YAML) for a TAO job spec, without applying them.

  render_k8s_job.py --spec job.yaml [--job-id ID] [--namespace NS]
  render_k8s_job.py --image IMG --command 'dino train -e /s.yaml' --gpus 1 [--nodes 2] ...

The spec file is YAML/JSON validated by schemas/k8s-job-spec.schema.json;
flags given next to --spec override its fields. The per-job Secret is
referenced only with --cred-secret (submit passes it when credentials exist).
"""
from __future__ import annotations

import argparse
import os
import sys

from taobank.cli.entry import BankParser, run_main, spec_arguments, spec_from_args
from taobank.errors import UsageError


def _request(args: argparse.Namespace) -> int:
    import json

    from taobank.platforms.kubernetes import action_request
    from taobank.platforms.kubernetes.render import render_manifests, sha256_text
    from taobank.render import dump_yaml

    req = action_request.load(args.request)
    if args.materialize_config:
        text = action_request.materialize(req)
        from taobank import fsio

        fsio.write_private(args.materialize_config, text)  # mode 600: a config may carry paths and names
        print(sha256_text(text))
        return 0
    if args.staging_map:
        print(json.dumps(action_request.staging_map(req), indent=2))
        return 0
    spec, config = action_request.to_job_spec(args.request, config_file=args.config_file,
                                              config_sha256=args.config_sha256)
    text = dump_yaml(render_manifests(spec, job_id=args.job_id, namespace=args.namespace,
                                      cred_secret=args.cred_secret, config=config))
    sys.stdout.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    parser = BankParser(prog="render_k8s_job.py", description=__doc__.splitlines()[0])
    spec_arguments(parser, "kubernetes")
    parser.add_argument("--job-id", default="tao-render-preview", help="record id the labels carry")
    parser.add_argument("--namespace", default=os.environ.get("TAO_K8S_NAMESPACE") or "default")
    parser.add_argument("--cred-secret", help="name of the per-job credential Secret to reference")
    parser.add_argument("--request", help="producer action request (schemas/action-request.schema.json)")
    parser.add_argument("--materialize-config", metavar="OUT",
                        help="with --request (mode=config): write the config file to OUT and print its sha256")
    parser.add_argument("--staging-map", action="store_true", help="with --request: print the pod path -> source map")
    parser.add_argument("--config-file", help="with --request (mode=config): the materialised config")
    parser.add_argument("--config-sha256")
    parser.add_argument("-o", "--output", help="write the YAML here instead of stdout")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.request:
        return _request(args)
    if not args.spec and not args.image:
        raise UsageError("give --spec FILE or at least --image and --command/--args-json")

    from taobank.platforms.kubernetes.render import render_manifests
    from taobank.render import dump_yaml

    spec = spec_from_args(args, "kubernetes")
    text = dump_yaml(render_manifests(spec, job_id=args.job_id, namespace=args.namespace, cred_secret=args.cred_secret))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    run_main(main)
