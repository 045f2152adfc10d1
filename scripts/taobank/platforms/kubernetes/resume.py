"""A replaced pod resumes: after an eviction, a preemption or a lost node (``DisruptionTarget``), the Job
controller starts the same pod again (podFailurePolicy ``Count``, bounded by ``backoffLimit``); this
prologue makes that pod carry on from the newest checkpoint on the job's volume, not epoch 0.

The prologue looks in the job's results folder (``$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID`` and its action's
sub-folder) with the one table (:mod:`taobank.checkpoints`) and appends TAO's resume override to the
argv (replacing an earlier one); a first pod finds nothing and runs the argv as given. Only a
single-pod train job with an argv command (``args``) and results on a volume (tier A) gets it: shell
text cannot take an argument safely, a multi-node Job is failed on a disruption, and a tier C pod's
folder is an emptyDir that dies with it.
"""
from __future__ import annotations

import re

from ... import checkpoints
from .spec import KubernetesSpec
from ...jobspec import given

_ACTION = re.compile(r"[A-Za-z0-9_.-]+\Z")


def applies(spec: KubernetesSpec, pod_folder: str | None) -> bool:
    return (bool(pod_folder) and isinstance(spec.args, list) and int(given(spec.nodes, 1)) == 1
            and given(spec.storage_tier, "A") == "A" and checkpoints.resumes(spec.action))


def prologue(spec: KubernetesSpec) -> str:
    """sh text that rewrites ``"$@"`` to resume from the newest checkpoint in the job's folder."""
    action = str(spec.action or "")
    action = action if _ACTION.match(action) and action not in (".", "..") else "-"
    network = spec.network_arch
    return (checkpoints.shell_finder(network)
            + f'tao_ckpt=$(tao_latest_checkpoint "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" {action} || true)\n'
            + checkpoints.resume_set(network=network))


__all__ = ["applies", "prologue"]
