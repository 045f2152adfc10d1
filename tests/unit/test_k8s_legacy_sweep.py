"""A Kubernetes sweep made by 0.3.x (one Job per trial, those past --max-concurrent created suspended, ``held`` in
their records) still in flight after an upgrade: status releases its held trials as slots free, as 0.3.x did (ONE
``kubectl patch`` of their Jobs), never more than its --max-concurrent at once; a new sweep's trials are never
patched."""
from __future__ import annotations

from fakeproc import items, ok
from taobank.campaign import jobstatus
from taobank import records
from taobank.states import State

SWEEP = "dino-sweep-old03x"


def old_sweep(n: int, k: int) -> list[str]:
    """The records 0.3.x left: trial i bound to its own Job; those from k on held (their Job suspended)."""
    ids = []
    for i in range(n):
        jid = f"dino-train-old{i}"
        records.open_record("kubernetes", "busybox", "dino", "train", "A", f"/results/{jid}", job_id=jid,
                            backend={"namespace": "tao-jobs", "context": "", "max_concurrent": k},
                            sweep=(SWEEP, i, {"fake.i": str(i)}), check_folder=False)
        records.mark(jid, State.PENDING, backend_ref=f"tao-jobs/tao-{jid}",
                     backend={"uid": f"uid-{i}", "name": f"tao-{jid}", "held": i >= k})
        ids.append(jid)
    return ids


def job(i: int, *, done: bool = False, suspended: bool = False) -> dict:
    conds = [{"type": "Complete", "status": "True"}] if done else \
        [{"type": "Suspended", "status": "True"}] if suspended else []
    return {"kind": "Job", "metadata": {"name": f"tao-dino-train-old{i}", "uid": f"uid-{i}",
                                        "labels": {"tao-job-id": f"dino-train-old{i}"}},
            "spec": {"suspend": suspended}, "status": {"conditions": conds, "succeeded": int(done)}}


def pod(i: int, phase: str) -> dict:
    return {"kind": "Pod", "metadata": {"name": f"p{i}", "labels": {"tao-job-id": f"dino-train-old{i}"},
                                        "ownerReferences": [{"uid": f"uid-{i}"}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "main", "state": {"running": {}}}]}}


def test_status_releases_a_0_3_sweeps_held_trials_as_slots_free(fake):
    ids = old_sweep(4, 2)
    # trial 0 ended, trial 1 runs: one slot is free for the oldest held trial (2); trial 3 stays held
    fake.kubectl("get", "jobs,pods", answer=items([job(0, done=True), job(1), pod(1, "Running"),
                                                   job(2, suspended=True), job(3, suspended=True)]))
    fake.kubectl("logs", answer=ok(""))
    fake.kubectl("patch", answer=ok("job.batch/tao-dino-train-old2 patched\n"))
    views = jobstatus.status(None, ids, progress=False)
    (patch,) = fake.kubectl_calls("patch")
    assert patch.words == ["patch", "job", "tao-dino-train-old2", "--type", "merge", "-p",
                           '{"spec":{"suspend":false}}'] and patch.namespace == "tao-jobs"
    held = {r["id"]: (r.get("backend") or {}).get("held") for r in records.list_records()}
    assert held == {ids[0]: False, ids[1]: False, ids[2]: False, ids[3]: True}
    assert "released" in records.load(ids[2]).get("message", "")
    assert {v.id: v.state for v in views}[ids[0]] == State.COMPLETE


def test_no_slot_free_releases_nothing(fake):
    ids = old_sweep(3, 2)
    fake.kubectl("get", "jobs,pods", answer=items([job(0), pod(0, "Running"), job(1), pod(1, "Running"),
                                                   job(2, suspended=True)]))
    jobstatus.status(None, ids, progress=False)
    assert not fake.kubectl_calls("patch") and records.load(ids[2])["backend"]["held"] is True
