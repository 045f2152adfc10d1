"""podFailurePolicy in status: a disrupted pod replaced by the Job controller is reported, never an ERROR."""
from __future__ import annotations

from taobank.platforms.kubernetes import status as smap


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
    assert obs.pod_attempts == 1 and "disrupted" not in obs.message


def _aged(pod: dict, created: str) -> dict:
    pod["metadata"]["creationTimestamp"] = created
    return pod


def test_the_newer_pod_that_exited_1_is_blamed_not_the_evicted_one_before_it():
    pods = [_aged(_pod("a", "Failed", disrupted=True, code=143), "2026-01-01T00:00:00Z"),
            _aged(_pod("b", "Failed", code=1), "2026-01-01T01:00:00Z")]
    job = _job(failed=2, active=0)
    job["status"]["conditions"] = [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
                                    "message": "Container main for pod ns/b failed with exit code 1 matching FailJob rule at index 1"}]
    for order in (pods, pods[::-1]):
        obs = smap.observe(job, order)
        assert (obs.err_class, obs.failed_pod, obs.exit_code) == ("ERR_PROGRAM", "b", 1)
    job["status"]["conditions"][0]["message"] = "Job failed"  # no pod named: newest first
    assert smap.observe(job, pods).failed_pod == "b"


def test_pod_failure_policy_without_pods_is_the_program_unless_it_names_a_disruption():
    job = _job(failed=1, active=0)
    job["status"]["conditions"] = [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
                                    "message": "Container main for pod ns/b failed with exit code 2"}]
    assert smap.observe(job, []).err_class == "ERR_PROGRAM"
    job["status"]["conditions"][0]["message"] = "Pod ns/b has condition DisruptionTarget matching FailJob rule at index 0"
    assert smap.observe(job, []).err_class == "ERR_INFRA"


def test_a_running_first_pod_is_one_attempt():
    assert smap.observe(_job(failed=0, active=1), [_pod("b", "Running")]).pod_attempts == 1
    assert smap.observe(_job(failed=0, active=0, succeeded=2, cond="Complete"), []).pod_attempts == 2


def test_a_deadline_is_blamed_on_the_deadline_not_on_the_killed_pod():
    job = _job(failed=1, active=0)
    job["status"]["conditions"] = [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                                    "message": "Job was active longer than specified deadline"}]
    obs = smap.observe(job, [_pod("a", "Failed", code=137)])
    assert (obs.state, obs.err_class, obs.reason) == ("ERROR", "ERR_PROGRAM", "DeadlineExceeded")
