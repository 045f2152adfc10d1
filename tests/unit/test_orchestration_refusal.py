"""Every verb of each platform helper refuses the other platform's record: exit 1, one line naming the
right helper, the record untouched, no process run."""
from __future__ import annotations

import re

import pytest

from fakeproc import k8s_record, slurm_record
from taobank import records

K8S_VERBS = [["status"], ["status", "--watch"], ["status", "--json"], ["logs"], ["logs", "-f"], ["cancel"],
             ["submit", "--image", "img", "--command", "echo hi", "--job-id"]]
SLURM_VERBS = [["status"], ["status", "--watch", "--no-retry"], ["status", "--json"], ["logs"], ["logs", "--follow"],
               ["cancel"], ["resume"]]


def _argv(verb: list[str], job_id: str) -> list[str]:
    # the id goes where the verb takes it: after --job-id, else as the first positional
    if verb[-1] == "--job-id":
        return verb + [job_id]
    return [verb[0], job_id] + verb[1:]


def _check_refused(out, job_id: str, other_platform: str, right_helper: str, before: dict, fake) -> None:
    assert out.rc == 1, out
    assert len(out.err_lines) == 1 and out.out == "", out
    assert f"{job_id} is a {other_platform} job" in out.err and re.search(rf"(run|with) {right_helper} ", out.err), out
    assert records.load(job_id) == before
    assert fake.calls == []


@pytest.mark.parametrize("verb", K8S_VERBS, ids=" ".join)
def test_tao_k8s_refuses_a_slurm_record(slurm, cli, verb):
    rec = slurm_record()
    before = records.load(rec["id"])
    out = cli("tao_k8s.py", *_argv(verb, rec["id"]))
    _check_refused(out, rec["id"], "slurm", "tao_slurm.py", before, slurm)


@pytest.mark.parametrize("verb", SLURM_VERBS, ids=" ".join)
def test_tao_slurm_refuses_a_kubernetes_record(slurm, cli, verb):
    rec = k8s_record()
    before = records.load(rec["id"])
    out = cli("tao_slurm.py", *_argv(verb, rec["id"]))
    _check_refused(out, rec["id"], "kubernetes", "tao_k8s.py", before, slurm)


@pytest.mark.parametrize("verb", [["status"], ["resume"]], ids=" ".join)
def test_tao_slurm_refuses_an_interrupted_kubernetes_submit(slurm, cli, verb):
    rec = k8s_record(launched=False)  # no backend_ref: nothing platform-specific to trip on first
    before = records.load(rec["id"])
    out = cli("tao_slurm.py", *_argv(verb, rec["id"]))
    _check_refused(out, rec["id"], "kubernetes", "tao_k8s.py", before, slurm)


@pytest.mark.parametrize("helper,own,foreign,right", [
    ("tao_k8s.py", k8s_record, slurm_record, "tao_slurm.py"),
    ("tao_slurm.py", slurm_record, k8s_record, "tao_k8s.py"),
])
def test_cancel_of_several_ids_with_a_foreign_one_does_nothing_at_all(slurm, cli, helper, own, foreign, right):
    mine, theirs = own(), foreign()
    before = [records.load(mine["id"]), records.load(theirs["id"])]
    out = cli(helper, "cancel", mine["id"], theirs["id"])
    assert out.rc == 1 and len(out.err_lines) == 1 and right in out.err, out
    assert [records.load(mine["id"]), records.load(theirs["id"])] == before
    assert slurm.calls == []


@pytest.mark.parametrize("helper,foreign", [("tao_k8s.py", slurm_record), ("tao_slurm.py", k8s_record)])
def test_sweeps_and_cancel_all_never_touch_the_other_platform(slurm, cli, helper, foreign):
    rec = foreign()
    before = records.load(rec["id"])
    for argv in (["status"], ["status", "--json"], ["cancel", "--all"]):
        out = cli(helper, *argv)
        assert out.rc == 0, (argv, out)
    assert records.load(rec["id"]) == before and slurm.calls == []
