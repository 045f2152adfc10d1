"""podFailurePolicy in status: a disrupted pod replaced by the Job controller is reported, never an ERROR."""
from __future__ import annotations

from taobank.kubernetes import status as smap


def _job(failed: int, active: int, succeeded: int = 0, cond: str | None = None) -> dict:
    conds = [{"type": cond, "status": "True", "reason": "BackoffLimitExceeded"}] if cond else []
    return {"kind": "Job", "metadata": {"name": "j", "uid": "u"}, "spec": {"backoffLimit": 3},
            "status": {"failed": failed, "active": active, "succeeded": succeeded, "conditions": conds}}


def _pod(name: str, phase: str, *, disrupted: bool = False, code: int | None = None) -> dict:
    st: dict = {"phase": phase, "conditions": []}
    if disrupted:
        st["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                                 "message": "Eviction API: evicting"})
    if code is not None:
        st["containerStatuses"] = [{"name": "main", "state": {"terminated": {"exitCode": code, "reason": "Error"}}}]
    return {"metadata": {"name": name, "ownerReferences": [{"uid": "u"}]}, "spec": {"nodeName": "n"}, "status": st}


def test_a_replaced_pod_keeps_the_job_running_and_says_so():
    obs = smap.observe(_job(failed=1, active=1), [_pod("a", "Failed", disrupted=True, code=143), _pod("b", "Running")])
    assert obs.state == "RUNNING" and obs.pod_attempts == 2
    assert "1 pod(s) disrupted and replaced (retry limit 3)" in obs.message


def test_complete_after_a_disruption_counts_the_attempts():
    obs = smap.observe(_job(failed=1, active=0, succeeded=1, cond="Complete"),
                       [_pod("a", "Failed", disrupted=True, code=143), _pod("b", "Succeeded")])
    assert obs.state == "COMPLETE" and obs.pod_attempts == 2 and "disrupted and replaced" in obs.message


def test_disruptions_past_the_limit_are_err_infra():
    pods = [_pod(str(i), "Failed", disrupted=True, code=143) for i in range(4)]
    obs = smap.observe(_job(failed=4, active=0, cond="Failed"), pods)
    assert (obs.state, obs.err_class) == ("ERROR", "ERR_INFRA") and obs.pod_attempts == 4


def test_no_disruption_no_attempt_figure():
    obs = smap.observe(_job(failed=0, active=1), [_pod("b", "Running")])
    assert obs.pod_attempts == 0 and "disrupted" not in obs.message
