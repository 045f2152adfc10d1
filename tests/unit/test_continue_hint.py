"""Issue 37: a job cut short (its time limit, a preemption) says on its status line how to carry on: ``continue``
(with ``--time-hours`` for a time limit), on every platform from one rule (``states.continue_hint``, applied by
the core when it marks the record); a job that failed by itself gets no such hint."""
from __future__ import annotations

import pytest

from fakeproc import items, job, k8s_record, pod, sacct_row, slurm_record, sweep_answer
from taobank import records, states


def test_the_hint_names_the_job_and_more_time_only_for_a_time_limit():
    assert states.continue_hint("j1", "time limit").endswith("tao_jobs.py continue j1 --time-hours H (or --time-minutes M)")
    assert states.continue_hint("j1", "preempted").endswith("tao_jobs.py continue j1")
    with pytest.raises(ValueError):
        states.continue_hint("j1", "tired")


@pytest.mark.parametrize("end,cut,hinted", [("TIMEOUT", "ERROR", "--time-hours H"), ("PREEMPTED", "CANCELED", ""),
                                            ("FAILED", "ERROR", None)])
def test_slurm_status_line_of_a_job_cut_short_suggests_continue(slurm, cli, end, cut, hinted):
    rec = slurm_record()
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], end, "1:0")]))
    slurm.ssh("TAIL_FILES", "")  # a FAILED job's log tail is read to classify it
    out = cli("tao_slurm.py", "status", rec["id"])
    saved = records.load(rec["id"])
    assert saved["state"] == cut, out
    hint = f"tao_jobs.py continue {rec['id']}"
    if hinted is None:
        assert hint not in out.out and "continue" not in saved["message"]
    else:
        assert f"{hint}{' ' + hinted if hinted else ''}" in out.out and hint in saved["message"]  # kept: every status shows it
        again = cli("tao_slurm.py", "status", rec["id"])  # terminal now: from the record, no new observation
        assert hint in again.out
        table = cli("tao_jobs.py", "status", rec["id"])  # a table cuts long messages: the hint comes first
        assert f"{cut} " in table.out and ("time limit: carry on with" if hinted else "preempted: carry on") in table.out


def test_slurm_timeout_hours_marker_suggests_continue_with_more_time(slurm, cli):
    rec = slurm_record()
    marker = '{"exit_code":124,"slurm_job_id":"101","restart_count":0,"timed_out":true,"time":1}'
    slurm.ssh("SWEEP", lambda call: sweep_answer(sacct=[sacct_row("101", rec["id"], "FAILED", "124:0")],
                                                 markers={m: marker for m in call.args[1:]})(call))
    slurm.ssh("TAIL_FILES", "")
    out = cli("tao_slurm.py", "status", rec["id"])
    assert "stopped after timeout_hours" in out.out, out
    assert f"tao_jobs.py continue {rec['id']} --time-hours H" in out.out


def test_k8s_deadline_suggests_continue_with_more_time_and_a_plain_failure_does_not(fake, cli):
    late, broken = k8s_record(), k8s_record()

    def answer(call):
        out = []
        for rec, reason in ((late, "DeadlineExceeded"), (broken, "BackoffLimitExceeded")):
            j = job(rec["id"], f"uid-{rec['id']}", condition="Failed")
            j["status"]["conditions"][0].update(reason=reason, message="Job failed")
            p = pod(rec["id"], f"uid-{rec['id']}", "Failed")
            p["status"]["containerStatuses"] = [{"name": "main", "state": {"terminated": {"exitCode": 2}}}]
            out += [j, p]
        return items(out)

    fake.kubectl("get", "jobs,pods", answer=answer)
    fake.kubectl("logs", answer="last words\n")
    out = cli("tao_k8s.py", "status", late["id"], broken["id"])
    assert records.load(late["id"])["state"] == records.load(broken["id"])["state"] == "ERROR", out
    assert f"tao_jobs.py continue {late['id']} --time-hours H" in out.out
    assert f"continue {broken['id']}" not in out.out
