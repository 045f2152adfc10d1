"""The Kubernetes status table of the skill (references/states.md) is documentation of status.py: every row is checked against it."""
from __future__ import annotations

import re
from pathlib import Path

from taobank.platforms.kubernetes import status as smap

SKILL = Path(__file__).resolve().parents[2] / "skills/tao-run-on-kubernetes/references/states.md"


def table() -> list[tuple[str, str, str]]:
    text = SKILL.read_text(encoding="utf-8")
    block = text[text.index("| What the cluster shows | State | Notes |"):].split("\n\n")[0]
    rows = []
    for line in block.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0], cells[1].strip("`"), cells[2]))
    return rows


def job(cond: str | None = None, *, reason: str = "", deleting: bool = False, failed: int = 0) -> dict:
    meta: dict = {"name": "j", "uid": "u"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    conds = [{"type": cond, "status": "True", "reason": reason}] if cond else []
    return {"metadata": meta, "spec": {"backoffLimit": 3}, "status": {"conditions": conds, "failed": failed}}


def pod(phase: str = "Running", *, waiting: str | None = None, sched: str | None = None, term: tuple | None = None,
        disrupted: bool = False, container: str = "main") -> dict:
    st: dict = {"phase": phase, "conditions": []}
    if waiting:
        st["containerStatuses"] = [{"name": container, "image": "img", "state": {"waiting": {"reason": waiting}}}]
    if term:
        st["containerStatuses"] = [{"name": container, "state": {"terminated": {"reason": term[0], "exitCode": term[1]}}}]
    if sched:
        st["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": sched})
    if disrupted:
        st["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"})
    return {"metadata": {"name": "p", "ownerReferences": [{"uid": "u"}]}, "spec": {"nodeName": "n"}, "status": st}


#: What each reason named in the table looks like on the cluster.
PENDING = {
    "InsufficientGPU": pod("Pending", sched="0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
    "MissingPVC": pod("Pending", sched='persistentvolumeclaim "x" not found'),
    "UnboundPVC": pod("Pending", sched="pod has unbound immediate PersistentVolumeClaims"),
    "NoMatchingNode": pod("Pending", sched="0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."),
    "ImagePullBackOff": pod("Pending", waiting="ImagePullBackOff"),
    "ErrImagePull": pod("Pending", waiting="ErrImagePull"),
    "CreateContainerConfigError": pod("Pending", waiting="CreateContainerConfigError"),
}
FAILED = {  # name in the Notes -> (pod, err_class)
    "OOMKilled": (pod("Failed", term=("OOMKilled", 137)), "ERR_INFRA"),
    "DisruptionTarget": (pod("Failed", term=("Error", 143), disrupted=True), "ERR_INFRA"),
    "PodFailurePolicy": (pod("Failed", term=("Error", 3)), "ERR_PROGRAM"),
}


def ticks(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def test_every_row_of_the_status_table_is_what_status_py_says():
    rows = table()
    assert len(rows) == 7
    for shows, state, notes in rows:
        if "Complete" in ticks(shows):
            for cond in ticks(shows):
                assert smap.observe(job(cond), []).state == state == "COMPLETE", cond
        elif "Failed" in ticks(shows):
            for cond in ticks(shows):
                assert smap.observe(job(cond), []).state == state == "ERROR", cond
            for name, (p, err) in FAILED.items():
                assert name in notes, name
                obs = smap.observe(job("Failed", reason="PodFailurePolicy" if err == "ERR_PROGRAM" else "BackoffLimitExceeded",
                                       failed=1), [p])
                assert (obs.state, obs.err_class) == ("ERROR", err), name
            assert "ERR_INFRA" in notes and "ERR_PROGRAM" in notes
        elif "DeadlineExceeded" in ticks(shows):  # cut short: the status line suggests continue (issue 37)
            late = smap.observe(job("Failed", reason="DeadlineExceeded", failed=1), [pod("Failed", term=("Error", 137))])
            assert (late.state, late.err_class, late.cut_short) == (state, "ERR_PROGRAM", "time limit")
            preempted = pod("Failed", term=("Error", 143), disrupted=True)
            preempted["status"]["conditions"][-1]["reason"] = "PreemptionByScheduler"
            taken = smap.observe(job("Failed", reason="BackoffLimitExceeded", failed=1), [preempted])
            assert (taken.state, taken.err_class, taken.cut_short) == (state, "ERR_INFRA", "preempted")
            assert "continue ID --time-hours H" in notes and "preempted: carry on with tao_jobs.py continue ID" in notes
        elif shows == "every live pod Running":
            obs = smap.observe(job(failed=1), [pod("Failed", term=("Error", 143), disrupted=True), pod("Running")])
            assert obs.state == state == "RUNNING"
            assert "pod(s) disrupted and replaced (retry limit 3)" in obs.message and "pod_attempts" in notes
        elif shows == "pods waiting":
            named = [t.split(" ")[0] for t in ticks(notes)]
            assert sorted(named) == sorted(PENDING), named  # every reason the code gives is documented
            for reason, p in PENDING.items():
                obs = smap.observe(job(), [p])
                assert (obs.state, obs.reason) == (state, reason), reason
        elif shows == "Job being deleted":
            assert smap.observe(job(deleting=True), [pod()]).state == state == "CANCELED"
        elif shows == "Job gone":
            assert smap.observe(None, []).state == state == "UNKNOWN"
        else:
            raise AssertionError(f"a row of the status table this test cannot check: {shows}")
