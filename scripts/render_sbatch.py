#!/usr/bin/env python3
"""Render the sbatch script of a SLURM job spec (no cluster contact, no secrets read).

  render_sbatch.py --spec job.yaml [--job-id ID] [--lint] [--directives] [--json]

Every value is shell-quoted by construction; a value that could add a
directive or a command (newline) is refused with one line.
"""
from __future__ import annotations

import argparse

from taobank.cli.entry import BankParser
from taobank.cli.entry import print_json, run_main


def build_parser() -> argparse.ArgumentParser:
    """The command line's grammar (what main parses with)."""
    parser = BankParser(prog="render_sbatch.py", description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="job spec (YAML/JSON)")
    parser.add_argument("--job-id", default="preview-job", help="job id / SLURM job name to render with")
    parser.add_argument("--lint", action="store_true", help="also run bash -n, shellcheck and the secret lint")
    parser.add_argument("--directives", action="store_true", help="print only the #SBATCH lines")
    parser.add_argument("--json", action="store_true")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from taobank.platforms.slurm import render, spec as specmod
    from taobank.platforms.slurm import submit as slurm_submit

    text = slurm_submit.preview(specmod.load_file(args.spec), args.job_id)
    if args.lint:
        render.lint(text, f"job_{args.job_id}.sbatch")
    if args.json:
        print_json({"script": text, "directives": render.parse_directives(text)})
    elif args.directives:
        for d in render.parse_directives(text):
            print(f"#SBATCH {d}")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    run_main(main)
