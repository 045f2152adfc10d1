"""Property tests of the pure parsers: status mapping and capacity figures."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from taobank.errors import TaoError
from taobank.platforms.kubernetes import gates
from taobank.platforms.kubernetes.status import observe

COND_TYPES = ["Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended"]
conds = st.lists(st.tuples(st.sampled_from(COND_TYPES), st.sampled_from(["True", "False", "Unknown"])),
                 max_size=6, unique_by=lambda c: c[0])


def job(cs):
    return {"kind": "Job", "metadata": {"name": "j", "uid": "u"},
            "status": {"conditions": [{"type": t, "status": s} for t, s in cs]}}


@settings(max_examples=300, deadline=None)
@given(cs=conds, data=st.data())
def test_state_depends_on_condition_types_not_their_order(cs, data):
    shuffled = data.draw(st.permutations(cs))
    a, b = observe(job(cs), []), observe(job(shuffled), [])
    assert (a.state, a.reason) == (b.state, b.reason)
    true = {t for t, s in cs if s == "True"}
    if true & {"Complete", "SuccessCriteriaMet"}:
        assert a.state == "COMPLETE"
    elif true & {"Failed", "FailureTarget"}:
        assert a.state == "ERROR" and a.err_class in ("ERR_INFRA", "ERR_PROGRAM")
    else:
        assert a.state == "PENDING"  # no pods yet


node_st = st.builds(
    lambda name, alloc, cordoned, ready: {
        "metadata": {"name": name}, "spec": {"unschedulable": True} if cordoned else {},
        "status": {"allocatable": {"nvidia.com/gpu": str(alloc)},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}},
    st.sampled_from(["n0", "n1", "n2", "n3"]), st.integers(0, 8), st.booleans(), st.booleans())
pod_st = st.builds(
    lambda node, gpus, phase: {"spec": {"nodeName": node, "containers": [
        {"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}, "status": {"phase": phase}},
    st.sampled_from(["n0", "n1", "n2", "n3"]), st.integers(0, 8), st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]))


@settings(max_examples=300, deadline=None)
@given(nodes=st.lists(node_st, max_size=4, unique_by=lambda n: n["metadata"]["name"]),
       pods=st.lists(pod_st, max_size=8), gpus=st.integers(1, 8), count=st.integers(1, 4))
def test_capacity_gate_is_sound(nodes, pods, gpus, count):
    figs = gates.node_gpus(nodes, pods)
    for f, n in zip(figs, nodes):
        assert 0 <= f.free <= f.allocatable
        if n["spec"].get("unschedulable") or n["status"]["conditions"][0]["status"] != "True":
            assert not f.usable
    fits = len([f for f in figs if f.usable and f.allocatable >= gpus]) >= count
    free = len([f for f in figs if f.usable and f.free >= gpus]) >= count
    try:
        line = gates.check_capacity(figs, gpus, count)
    except TaoError:
        assert not fits  # refused only what can never fit
    else:  # admitted: `count` distinct usable nodes are big enough; it queues unless they are free now
        assert fits and line.startswith("ok:" if free else "queued:")
    try:
        gates.check_capacity(figs, gpus, count, require_free=True)
    except TaoError:
        assert not free
    else:
        assert free
