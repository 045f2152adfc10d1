"""The fake pods' contract: pod annotations that steer kwok's fake pods (test infrastructure).

Fake pods follow the Stages in ``testclusters/kubernetes/kwok/stages.yaml``;
these annotations in a Job's pod template choose how long a pod waits and
runs, how it fails, or that it never finishes. Tests and the skill's
local-cluster reference code against them.
"""
from __future__ import annotations

from taobank import BANK_ROOT
from .k8s_objects import FAKE_PREFIX

#: Go duration ("3s") a fake pod waits before Running (default 1s).
START_DELAY_ANNOTATION = FAKE_PREFIX + "start-delay"
#: Go duration a fake Job pod stays Running before it ends (default 6s).
RUN_DURATION_ANNOTATION = FAKE_PREFIX + "run-duration"
#: Non-zero exit code ("3"): the container terminates with it and the pod is Failed.
FAIL_EXIT_CODE_ANNOTATION = FAKE_PREFIX + "exit-code"
#: Terminated reason ("OOMKilled", "Error", ...): the pod is Failed with it.
FAIL_REASON_ANNOTATION = FAKE_PREFIX + "fail-reason"
#: "true": a Job pod never finishes (cancel/delete tests).
KEEP_RUNNING_ANNOTATION = FAKE_PREFIX + "keep-running"
#: Waiting reason ("ImagePullBackOff", "CreateContainerConfigError", ...): the pod stays Pending with it.
WAITING_REASON_ANNOTATION = FAKE_PREFIX + "waiting-reason"
#: Message of that waiting state (optional).
WAITING_MESSAGE_ANNOTATION = FAKE_PREFIX + "waiting-message"
OOM_REASON = "OOMKilled"
OOM_EXIT_CODE = 137
DEFAULT_START_DELAY_S = 1
DEFAULT_RUN_DURATION_S = 6
STAGES_FILE = BANK_ROOT / "testclusters" / "kubernetes" / "kwok" / "stages.yaml"
