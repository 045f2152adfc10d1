"""Inputs checked before GPUs are spent: the paths a job names on its volumes must exist.

The agent's machine cannot see a PVC, so a short GPU-less Job mounting the
same volumes runs ``test -e`` on each path (as SLURM's submit does over SSH)
and submit refuses with the list of the missing ones. The paths are the
spec's ``inputs`` plus every absolute path the command names (``-e
/workspace/specs/train.yaml``, ``dataset.root=/data/coco``) that lies under a
mount, except outputs: paths in the job's results folder and values of keys
that name an output (``results_dir=``, ``output_dir=``).
"""
from __future__ import annotations

import re
import shlex

from ..errors import TaoError
from ..paths import is_under

_OUTPUT_KEY = re.compile(r"(result|output)", re.IGNORECASE)
_NOT_A_PATH = re.compile(r"[*?\[\]$`{}]")  # globs and shell expansions: the check cannot name them
#: One line per path: "ok PATH" or "missing PATH".
CHECK_SCRIPT = 'for p in "$@"; do if [ -e "$p" ]; then echo "ok $p"; else echo "missing $p"; fi; done'


def _tokens(spec: dict) -> list[str]:
    if spec.get("args"):
        return list(spec["args"])
    lex = shlex.shlex(spec.get("command") or "", posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        words = list(lex)
    except ValueError:  # unbalanced quotes: the shell will say so; nothing to check here
        return []
    # shell operators are not paths, and what follows a redirection (> file) is an output
    return [w for i, w in enumerate(words) if not set(w) <= set(";&|<>()")
            and not (i and words[i - 1] in (">", ">>", "&>", ">|"))]


def paths(spec: dict, results_folder: str | None) -> list[str]:
    """The input paths of ``spec`` to check, in order, each once."""
    roots = [m["mount_path"] for m in spec.get("mounts") or []]
    for p in spec.get("inputs") or []:
        if not any(is_under(p, r) for r in roots):
            raise TaoError(f"input {p} is on no mounted volume (mounted: {', '.join(roots) or 'none'}): mount it "
                           "(--pvc-mount CLAIM:PATH) or fix the path")
    out = list(spec.get("inputs") or [])
    for tok in _tokens(spec):
        key, sep, value = tok.partition("=")
        cand = value if sep and not key.startswith("/") else tok
        if sep and _OUTPUT_KEY.search(key):
            continue
        if not cand.startswith("/") or _NOT_A_PATH.search(cand):
            continue
        if results_folder and is_under(cand, results_folder):
            continue
        if any(is_under(cand, r) for r in roots):
            out.append(cand)
    return list(dict.fromkeys(out))


def verdict(wanted: list[str], output: str) -> tuple[list[str], list[str]]:
    """(missing, unchecked) from the check Job's output."""
    seen: dict[str, str] = {}
    for line in output.splitlines():
        word, _, path = line.partition(" ")
        if word in ("ok", "missing"):
            seen[path] = word
    return [p for p in wanted if seen.get(p) == "missing"], [p for p in wanted if p not in seen]


def check(kube, spec: dict, results_folder: str | None) -> str:
    """Refuse when a named input is missing; the line for the gate report otherwise."""
    from . import volume_job

    wanted = paths(spec, results_folder)
    if not wanted:
        return "inputs: none named on a mounted volume"
    code, output = volume_job.run(kube, spec, ["/bin/sh", "-c", CHECK_SCRIPT, "tao-inputs", *wanted],
                                  purpose="checking the inputs on the volumes")
    missing, unchecked = verdict(wanted, output)
    if missing:
        raise TaoError(f"input path(s) missing on the job's volumes: {', '.join(missing)} (checked by a GPU-less "
                       "pod mounting the same volumes): fix the paths or put the data there, then submit again")
    if unchecked:
        return (f"inputs: {len(unchecked)} of {len(wanted)} path(s) not checked (the check pod printed nothing, "
                f"exit {code}: a node that runs no containers?)")
    return f"inputs: {len(wanted)} path(s) found on the volumes"
