"""A Job whose pods all ended before the controller wrote its condition reads RUNNING.

Seen on the real local cluster: the pod Succeeded, the Job had no Complete
condition yet, and status flapped RUNNING -> PENDING ("no pod yet") -> COMPLETE.
"""
from taobank.platforms.kubernetes.status import observe


def _pod(phase: str) -> dict:
    return {"kind": "Pod", "metadata": {"name": "j-0-abc", "labels": {}}, "status": {"phase": phase}}


def test_all_pods_ended_without_job_condition_is_running_not_pending():
    job = {"kind": "Job", "metadata": {"name": "j"}, "status": {"active": 0, "succeeded": 1}}
    for phase in ("Succeeded", "Failed"):
        obs = observe(job, [_pod(phase)])
        assert obs.state == "RUNNING"
        assert obs.reason == "Finishing"


def test_job_without_pods_is_still_pending():
    job = {"kind": "Job", "metadata": {"name": "j"}, "status": {}}
    obs = observe(job, [])
    assert obs.state == "PENDING"
    assert obs.reason == "NoPods"
