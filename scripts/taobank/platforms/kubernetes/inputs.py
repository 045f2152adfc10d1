"""Inputs checked before GPUs are spent: the paths a job reads from its volumes must exist.

The agent's machine cannot see a PVC, so a short GPU-less Job mounting the
same volumes runs ``test -e`` on each path (as SLURM's submit does over SSH).
A command names outputs as readily as inputs (``-r /workspace/results``,
``mkdir -p /workspace/out``), so only paths that are plainly inputs refuse
the submit: the spec's ``inputs``, the word after an input flag (``-e``,
``--spec``, ``--config``, ``--data-dir``...) and values of input keys
(``dataset.root=``, ``spec_file=``). Other absolute paths under a mount are
checked too, but a missing one is only reported: it may be an output.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...tao_command import read_candidates, shell_words
from ...errors import TaoError
from .spec import KubernetesSpec
from ...paths import is_under

_INPUT_KEY = re.compile(r"(spec|config|dataset|data_?(root|dir|path|file)|annotation|label|image_dir|pretrain|"
                        r"resume|inputs?$)", re.IGNORECASE)
_INPUT_FLAGS = frozenset({"-e", "--experiment_spec", "--experiment_spec_file", "--experiment-spec", "--spec",
                          "--spec-file", "--spec_file", "--config", "--config-file", "--config_file", "--data",
                          "--dataset", "--data-dir", "--data_dir", "--data-root", "--data_root", "--inputs"})
_NOT_A_PATH = re.compile(r"[*?\[\]$`{}]")  # globs and shell expansions: the check cannot name them
#: One line per path: "ok PATH" or "missing PATH".
CHECK_SCRIPT = 'for p in "$@"; do if [ -e "$p" ]; then echo "ok $p"; else echo "missing $p"; fi; done'


@dataclass
class Inputs:
    """``required``: a missing one refuses the submit; ``possible``: a missing one is reported only."""

    required: list[str]
    possible: list[str]

    @property
    def all(self) -> list[str]:
        return self.required + self.possible


def _words(spec: KubernetesSpec) -> list[str]:
    if spec.args:
        return list(spec.args)
    return shell_words(str(spec.command or ""))


def paths(spec: KubernetesSpec, results_folder: str | None) -> Inputs:
    """The paths of ``spec`` to check, each once, split into required and possible inputs."""
    roots = [m["mount_path"] for m in spec.mounts or []]
    for p in spec.inputs or []:
        if not any(is_under(p, r) for r in roots):
            raise TaoError(f"input {p} is on no mounted volume (mounted: {', '.join(roots) or 'none'}): mount it "
                           "(--pvc-mount CLAIM:PATH) or fix the path")
    required = list(spec.inputs or [])
    possible: list[str] = []
    words = _words(spec)
    for before, cand, key in read_candidates(words):
        if not cand.startswith("/") or _NOT_A_PATH.search(cand) or not any(is_under(cand, r) for r in roots):
            continue
        if results_folder and is_under(cand, results_folder):
            continue
        input_key = bool(key) and bool(_INPUT_KEY.search(key))
        (required if before in _INPUT_FLAGS or input_key else possible).append(cand)
    required = list(dict.fromkeys(required))
    return Inputs(required, [p for p in dict.fromkeys(possible) if p not in required])


def verdict(wanted: list[str], output: str) -> tuple[list[str], list[str]]:
    """(missing, unchecked) from the check Job's output."""
    seen: dict[str, str] = {}
    for line in output.splitlines():
        word, _, path = line.partition(" ")
        if word in ("ok", "missing"):
            seen[path] = word
    return [p for p in wanted if seen.get(p) == "missing"], [p for p in wanted if p not in seen]


def check(kube, spec: KubernetesSpec, results_folder: str | None) -> str:
    """Refuse when a required input is missing; the line for the gate report otherwise (``warning: ...``,
    free of ``; `` so the helper can show it on its own, when the check could not run or a path that may be
    an output was not found)."""
    from . import volume_job

    found = paths(spec, results_folder)
    wanted = found.all
    if not wanted:
        return "inputs: none named on a mounted volume"
    try:
        code, output = volume_job.run(kube, spec, ["/bin/sh", "-c", CHECK_SCRIPT, "tao-inputs", *wanted],
                                      purpose="checking the inputs on the volumes")
    except TaoError as exc:  # a helper pod that cannot run must not block every submit
        return (f"warning: inputs not checked ({exc}), submit with --no-input-check to skip the check, "
                "or fix what kept the helper pod from running")
    missing, unchecked = verdict(wanted, output)
    refused = [p for p in missing if p in found.required]
    if refused:
        raise TaoError(f"input path(s) missing on the job's volumes: {', '.join(refused)} (checked by a GPU-less "
                       "pod mounting the same volumes): fix the paths or put the data there, then submit again "
                       "(--no-input-check skips the check)")
    if unchecked:
        return (f"inputs: {len(unchecked)} of {len(wanted)} path(s) not checked (the check pod printed nothing, "
                f"exit {code}: a node that runs no containers?)")
    if missing:
        return (f"warning: not found on the volumes: {', '.join(missing)} (the command names them, fine if the job "
                f"creates them), {len(wanted) - len(missing)} other path(s) found")
    return f"inputs: {len(wanted)} path(s) found on the volumes"
