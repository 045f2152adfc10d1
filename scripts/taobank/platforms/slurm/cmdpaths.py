"""Which of the paths a job's command and uploaded spec files name (:func:`taobank.tao_command.command_paths`,
:func:`taobank.tao_command.spec_file_paths`) SLURM checks and mounts.

Pyxis shows the container only what is mounted, so a spec file at
``/lustre/other/train.yaml`` named after ``-e`` is invisible when only the
results base is mounted, and the job fails after its queue wait. Every path
found here is checked with ``test -e`` before sbatch and mounted (unless a
site root already covers it).

Left out, because they need not exist yet or are not cluster paths: outputs
(after ``>``, an output flag such as ``-o``/``--output_dir``, values of
output keys such as ``results_dir=`` or ``results_dir:`` in a spec file),
words with shell expansions or globs, URLs, ``{specs}/...`` (the job's own
folder) and paths the image owns (versions.yaml ``slurm.image_paths``:
``/usr``, ``/opt``...) that no mount covers. A spec file that is not YAML
(JSON is YAML) names nothing.
"""
from __future__ import annotations

from typing import Iterable

from ... import pins
from ...paths import is_under


def cluster_paths(paths: Iterable[str], mounted: Iterable[str]) -> list[str]:
    """``paths`` once each, less those the image owns (``slurm.image_paths``) unless under a ``mounted`` folder."""
    owned = [str(p) for p in pins.resolve("slurm.image_paths")]
    roots = list(mounted)
    return [p for p in dict.fromkeys(paths)
            if any(is_under(p, r) for r in roots) or not any(is_under(p, o) for o in owned)]
