"""The core owns the record after launch (taobank.core.track): an adapter that only observes and stops, the core marks.

A stand-in adapter shows the rules without a cluster: what an observation does (one rule, states.next_move),
what ended is cleaned up once, an infrastructure retry is opened by the core and relaunched by the adapter,
and one cancel rule for every outcome a stop reports.
"""
from __future__ import annotations

from taobank import records
from taobank.core import track
from taobank.contract import Launch, Observation, Shown, Stop
from taobank.core.platform import JobView
from taobank.states import State


class Adapter:
    """Only reads and stops (as a real adapter): it never touches the record store."""

    name = "slurm"

    def __init__(self, seen: dict[str, Observation], stops: dict[str, Stop] | None = None, limit: int = 2):
        self.seen, self.stops, self.limit = seen, stops or {}, limit
        self.ended_calls: list[tuple[list[str], frozenset]] = []
        self.relaunched: list[str] = []

    def view(self, rec):
        return JobView.from_record(rec)

    def views(self, recs):  # Platform.views: the views of a status's batch
        return [self.view(r) for r in recs]

    def observe(self, recs, *, context):
        return [self.seen[r.id] for r in recs if r.id in self.seen]

    def ended(self, recs, context, *, carried_on=frozenset()):
        self.ended_calls.append(([r.id for r in recs], carried_on))
        return {r.id: "credentials removed" for r in recs}

    def max_retries(self):
        return self.limit

    def retry_backend(self, failed, job_id, context):
        return {"job_name": job_id}

    def relaunch(self, job_id, context):
        self.relaunched.append(job_id)
        return Launch("slurm:202", {"slurm_job_id": "202"}, "submitted as SLURM job 202")

    def stop(self, recs, context):
        return [self.stops[r.id] for r in recs]


def opened(state: str = "RUNNING") -> dict:
    rec = records.open_record("slurm", "none", "dino", "train", "A", "/lustre/results/{id}")
    if state != "PENDING":
        rec = records.mark(rec["id"], state, message="was")
    return rec


def test_an_observation_is_marked_once_and_what_ended_is_cleaned_up_in_one_call(state_dir):
    a, b = opened(), opened()
    adapter = Adapter({a["id"]: Observation(State.COMPLETE, "exit code 0", job_id=a["id"], backend={"x": 1}),
                       b["id"]: Observation(State.RUNNING, "still", job_id=b["id"], view=Shown(progress={"line": "2/9"}))})
    views = {v.id: v for v in track.refresh(adapter, [a, b])}
    assert records.load(a["id"])["state"] == "COMPLETE" and records.load(a["id"])["backend"]["x"] == 1
    assert adapter.ended_calls == [([a["id"]], frozenset())]
    assert views[a["id"]].message == "exit code 0; credentials removed"  # the note is shown, never stored
    assert records.load(a["id"])["message"] == "exit code 0"
    assert views[b["id"]].progress == {"line": "2/9"} and "progress" not in records.load(b["id"])


def test_a_record_not_asked_about_stays_as_it_is(state_dir):
    a = opened()
    adapter = Adapter({a["id"]: Observation(State.RUNNING, "", job_id=a["id"], asked=False,
                                            view=Shown(reason="QueryFailed", message="unreachable"))})
    (view,) = track.refresh(adapter, [a])
    assert records.load(a["id"]) == a and view.message == "unreachable" and view.reason == "QueryFailed"


def test_an_infrastructure_failure_is_retried_by_the_core_within_the_limit(state_dir):
    a = opened()
    adapter = Adapter({a["id"]: Observation(State.ERROR, "NODE_FAIL", err_class="ERR_INFRA", retry=True,
                                            job_id=a["id"])})
    views = track.refresh(adapter, [a])
    failed = records.load(a["id"])
    assert failed["state"] == "ERROR" and failed["message"] == "NODE_FAIL; resubmitting (attempt 2)"
    (retry,) = [r for r in records.list_records() if r.get("retry_of") == a["id"]]
    assert retry["attempt"] == 2 and retry["backend_ref"] == "slurm:202" and retry["backend"]["job_name"] == retry["id"]
    assert adapter.relaunched == [retry["id"]] and {v.id for v in views} == {a["id"], retry["id"]}
    assert adapter.ended_calls == [([a["id"]], frozenset({a["id"]}))]  # the retry carries on with its staged files
    # a second poller that read the same record resubmits nothing
    assert track.refresh(Adapter(adapter.seen), [a]) and len(records.list_records()) == 2


def test_the_retry_limit_ends_the_chain(state_dir):
    a = opened()
    adapter = Adapter({a["id"]: Observation(State.ERROR, "NODE_FAIL", err_class="ERR_INFRA", retry=True,
                                            job_id=a["id"])}, limit=0)
    track.refresh(adapter, [a])
    assert records.load(a["id"])["message"] == "NODE_FAIL; retry limit 0 reached" and adapter.relaunched == []


def test_one_cancel_rule_for_every_outcome(state_dir):
    s, g, n, e, x = (opened() for _ in range(5))
    stops = {s["id"]: Stop(s["id"], "stopped", "scancel 1", backend={"slurm_state": "CANCELLED"}),
             g["id"]: Stop(g["id"], "gone", "already gone", said="Job g already deleted", view=Shown(deleted=False)),
             n["id"]: Stop(n["id"], "never_launched", "canceled before launch"),
             e["id"]: Stop(e["id"], "ended", "exit code 3", state=State.ERROR, err_class="ERR_PROGRAM"),
             x["id"]: Stop(x["id"], error="scancel failed: timeout")}
    views, errors = track.stop(Adapter({}, stops), [s, g, n, e, x], {}, batch=True)
    got = {v.id: v for v in views}
    assert {i: records.load(i)["state"] for i in got} == {s["id"]: "CANCELED", g["id"]: "CANCELED",
                                                         n["id"]: "CANCELED", e["id"]: "ERROR"}
    assert records.load(e["id"])["err_class"] == "ERR_PROGRAM"
    assert records.load(s["id"])["backend"]["slurm_state"] == "CANCELLED"
    assert got[g["id"]].message == "Job g already deleted" and got[g["id"]].to_dict()["deleted"] is False
    assert records.load(g["id"])["message"] == "already gone"
    assert errors == [f"{x['id']}: scancel failed: timeout"] and records.load(x["id"])["state"] == "RUNNING"
