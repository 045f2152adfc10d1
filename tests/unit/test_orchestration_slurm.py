"""SLURM orchestration (submit, reconcile, resume, retry, watch, cancel) against the fake ssh: no cluster."""
from __future__ import annotations

import json

import pytest

from fakeproc import find_answer, ok, sacct_row, slurm_record, squeue_row, sweep_answer
from taobank.contract import SubmitOptions
from taobank.core import platform
from taobank import records
from taobank.errors import SubmitUncertain, TaoError
from taobank.platforms.slurm import storage
from taobank.platforms.slurm import facts as slurm_facts

SPEC = {"network_arch": "dino", "action": "train", "container_runtime": "none", "num_gpus": 1,
        "command": ["python", "train.py"]}


def children(job_id: str) -> list[dict]:
    return [r for r in records.list_records("slurm") if r.get("retry_of") == job_id]


# ------------------------------------------------------------------ submit
LOST = {
    "empty": dict(answer=""),
    "garbled": dict(answer="sbatch: Submitted batch jo"),
    "connection-dropped": dict(answer="", rc=255, stderr="client_loop: send disconnect: Broken pipe"),
}


@pytest.mark.parametrize("lost", LOST, ids=list(LOST))
def test_lost_sbatch_answer_is_reconciled_by_exact_name_never_submitted_twice(slurm, lost):
    def find(call):
        name = call.args[0]
        decoy = squeue_row("7", "RUNNING", name + "-old")  # a longer name is another job
        if not slurm.count("SBATCH"):
            return find_answer([decoy])
        return find_answer([decoy, squeue_row("4242", "PENDING", name)])

    slurm.ssh("STAGE")
    slurm.ssh("FIND", find)
    slurm.ssh("SBATCH", **LOST[lost])  # sbatch ran, its answer was lost
    slurm.ssh("ADOPT")
    view = platform.get("slurm").submit(SPEC, SubmitOptions())
    rec = records.load(view.id)
    assert rec["backend_ref"] == "slurm:4242" and rec["backend"]["slurm_job_id"] == "4242"
    assert "reconciled" in rec["message"]
    assert slurm.count("SBATCH") == 1  # never submitted twice
    (adopt,) = slurm.ssh_calls("ADOPT")
    assert adopt.args[0] == "4242"


def test_lost_sbatch_answer_and_no_job_by_that_name_is_an_error_without_resubmit(slurm):
    slurm.ssh("STAGE")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "", rc=3, stderr="sbatch: error: Batch job submission failed: Invalid partition name specified")
    slurm.ssh("UNSTAGE")
    with pytest.raises(TaoError, match="Check SLURM_PARTITION.*; its staged folder was removed$"):
        platform.get("slurm").submit(SPEC, SubmitOptions())
    assert slurm.count("SBATCH") == 1
    (rec,) = records.list_records("slurm")
    assert rec["state"] == "ERROR"
    # a refused submit takes back what it staged: the job's folder (credentials and all), the results folder
    (undo,) = [c for c in slurm.of("ssh") if c.script == "UNSTAGE"]
    assert undo.args == [rec["backend"]["staged_dir"], rec["results_dir"], rec["id"]]


def test_a_refused_submit_whose_folder_cannot_be_removed_says_where_it_is(slurm):
    slurm.ssh("STAGE")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "", rc=3, stderr="sbatch: error: Batch job submission failed: Invalid partition name specified")
    slurm.ssh("UNSTAGE", "", rc=3, stderr="rm: cannot remove: Read-only file system")
    with pytest.raises(TaoError, match="also could not remove its staged folder .* delete it by hand"):
        platform.get("slurm").submit(SPEC, SubmitOptions())
    assert records.list_records("slurm")[0]["state"] == "ERROR"


def test_sbatch_answer_lost_and_cluster_gone_leaves_a_resumable_record(slurm):
    slurm.ssh("STAGE")
    slurm.ssh("FIND", "", rc=1, stderr="squeue: error: slurm_load_jobs error: Unable to contact slurm controller")
    slurm.ssh("FIND", find_answer(), times=1)  # the latest rule wins: this answers the first FIND only
    slurm.ssh("SBATCH", "")
    with pytest.raises(SubmitUncertain, match="resume"):
        platform.get("slurm").submit(SPEC, SubmitOptions())
    (rec,) = records.list_records("slurm")
    assert rec["state"] == "PENDING" and not rec["backend"].get("slurm_job_id")
    # resume later: the job did reach SLURM -> adopted, sbatch never runs again
    slurm.ssh("FIND", find_answer([squeue_row("55", "PENDING", rec["id"])]))
    slurm.ssh("ADOPT")
    view = platform.get("slurm").resume(rec["id"])
    assert view.backend_ref == "slurm:55" and slurm.count("SBATCH") == 1


def test_resume_of_an_unstaged_record_is_one_line_and_runs_nothing(slurm, cli):
    rec = slurm_record(staged=False)
    before = records.load(rec["id"])
    out = cli("tao_slurm.py", "resume", rec["id"])
    assert out.rc == 1 and len(out.err_lines) == 1 and "never staged" in out.err, out
    assert "Traceback" not in out.err and slurm.calls == []
    assert records.load(rec["id"]) == before


def test_resume_of_a_submitted_record_says_so_and_runs_nothing(slurm, cli):
    rec = slurm_record()
    out = cli("tao_slurm.py", "resume", rec["id"])
    assert out.rc == 0 and "already submitted" in out.out and slurm.calls == []


# ------------------------------------------------------------------ retry
NODE_FAIL = "NODE_FAIL"


def test_retry_claim_two_pollers_only_one_resubmits(slurm):
    rec = slurm_record()
    stale_a, stale_b = records.load(rec["id"]), records.load(rec["id"])  # both read it while RUNNING
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], NODE_FAIL, "0:0")]))
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "102\n")
    first = platform.refresh([stale_a])
    second = platform.refresh([stale_b])
    assert slurm.count("SBATCH") == 1
    (retry,) = children(rec["id"])
    assert retry["attempt"] == 2 and retry["backend"]["slurm_job_id"] == "102"
    assert records.load(rec["id"])["state"] == "ERROR"
    assert {v.id for v in first} == {rec["id"], retry["id"]} and {v.id for v in second} == {rec["id"]}


def test_retry_claim_two_concurrent_pollers_only_one_resubmits(slurm):
    """Both pollers see the failure before either marks it (a barrier in the sweep answer)."""
    import threading

    rec = slurm_record()
    both_swept = threading.Barrier(2, timeout=10)
    failed = sweep_answer(sacct=[sacct_row("101", rec["id"], NODE_FAIL)])

    def sweep(call):
        both_swept.wait()
        return failed(call)

    slurm.ssh("SWEEP", sweep, times=2)
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "102\n")
    errors: list[BaseException] = []

    def poller():
        try:
            platform.status("slurm", [rec["id"]])
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=poller) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert errors == [] and slurm.count("SWEEP") == 2
    assert slurm.count("SBATCH") == 1 and len(children(rec["id"])) == 1


def test_watch_no_retry_never_resubmits(slurm):
    rec = slurm_record()
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], NODE_FAIL)]))
    views = platform.watch("slurm", [rec["id"]], on_line=lambda _: None, retry=False, sleep=lambda _: None)
    assert [v.state for v in views] == ["ERROR"] and platform.watch_exit_code(views) == 1
    assert slurm.count("SBATCH") == 0 and children(rec["id"]) == []


def test_cli_status_watch_no_retry_never_resubmits(slurm, cli):
    rec = slurm_record()
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], NODE_FAIL)]))
    out = cli("tao_slurm.py", "status", rec["id"], "--watch", "--no-retry")
    assert out.rc == 1 and f"{rec['id']} ERROR (ERR_INFRA)" in out.out, out
    assert slurm.count("SBATCH") == 0 and children(rec["id"]) == []


def test_cli_status_no_retry_without_watch_never_resubmits(slurm, cli):
    rec = slurm_record()
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], NODE_FAIL)]))
    out = cli("tao_slurm.py", "status", rec["id"], "--no-retry", "--json")
    assert out.rc == 0 and [v["state"] for v in json.loads(out.out)] == ["ERROR"]
    assert slurm.count("SBATCH") == 0 and children(rec["id"]) == []


def test_watch_with_retry_follows_the_resubmitted_job(slurm):
    """The contrast of --no-retry: the same failure is resubmitted and the watch follows the new job."""
    rec = slurm_record()

    def sweep(call):
        done = [sacct_row("101", rec["id"], NODE_FAIL)]
        if slurm.count("SBATCH"):
            retry = children(rec["id"])[0]["id"]
            done.append(sacct_row("102", retry, "COMPLETED"))
        return sweep_answer(sacct=done)(call)

    slurm.ssh("SWEEP", sweep)
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "102\n")
    lines: list[str] = []
    views = platform.watch("slurm", [rec["id"]], on_line=lines.append, sleep=lambda _: None)
    assert slurm.count("SBATCH") == 1
    assert sorted(v.state for v in views) == ["COMPLETE", "ERROR"] and platform.watch_exit_code(views) == 0


# ------------------------------------------------------------------ cancel
def test_cancel_many_one_fails_the_others_are_still_cancelled(slurm, cli):
    recs = [slurm_record(slurm_job_id=str(200 + i)) for i in range(3)]
    slurm.ssh("scancel", "")
    slurm.ssh("scancel", "", rc=1, stderr="scancel: error: Kill job error on job id 201: Access/permission denied",
              where=lambda c: c.words[1:] == ["201"])
    out = cli("tao_slurm.py", "cancel", *[r["id"] for r in recs])
    assert out.rc == 1, out
    assert [records.load(r["id"])["state"] for r in recs] == ["CANCELED", "RUNNING", "CANCELED"]
    assert len(out.err_lines) == 1 and recs[1]["id"] in out.err and "permission denied" in out.err
    assert sorted(c.words[1] for c in slurm.ssh_calls("scancel")) == ["200", "201", "202"]
    assert len(slurm.of("ssh", control=True)) - len(slurm.of("ssh")) == 1  # one connection for all three


def test_cancel_marks_the_backend_state_cancelled(slurm):
    rec = slurm_record(staged_secrets=True)
    slurm.ssh("scancel", "")
    slurm.ssh("REMOVE")
    views, errors = platform.cancel("slurm", [rec["id"]])
    after = records.load(rec["id"])
    assert errors == [] and after["state"] == "CANCELED" and after["backend"]["slurm_state"] == "CANCELLED"
    (rm,) = [c for c in slurm.of("ssh") if c.script == "REMOVE"]
    assert rm.args == [f"{rec['backend']['job_dir']}/{storage.CREDS_FILE}"]


def test_cancel_of_a_staged_record_whose_answer_was_lost_finds_the_job_by_name(slurm):
    rec = slurm_record(slurm_job_id=None, state="PENDING")
    slurm.ssh("FIND", find_answer([squeue_row("77", "PENDING", rec["id"])]))
    slurm.ssh("scancel", "")
    views, errors = platform.cancel("slurm", [rec["id"]])
    assert errors == [] and views[0].state == "CANCELED"
    assert [c.words for c in slurm.of("ssh") if c.words[0] == "scancel"] == [["scancel", "77"]]


# ------------------------------------------------------------------ watch loop
def _running_then(slurm, rec: dict, polls: int, end: str = "COMPLETED") -> None:
    seen = {"n": 0}

    def sweep(call):
        seen["n"] += 1
        if seen["n"] > polls:
            return sweep_answer(sacct=[sacct_row("101", rec["id"], end)])(call)
        return sweep_answer(squeue=[squeue_row("101", "RUNNING", rec["id"], "node1")])(call)

    slurm.ssh("SWEEP", sweep)


def test_watch_backoff_doubles_from_5_to_60_with_no_time_cap(slurm):
    rec = slurm_record()
    _running_then(slurm, rec, polls=40)
    slept: list[float] = []
    lines: list[str] = []
    views = platform.watch("slurm", [rec["id"]], on_line=lines.append, sleep=slept.append)
    assert slept[:6] == [5.0, 10.0, 20.0, 40.0, 60.0, 60.0]
    assert len(slept) == 40 and set(slept[4:]) == {60.0}  # 35+ minutes of waiting, and it still watched
    assert views[0].state == "COMPLETE" and platform.watch_exit_code(views) == 0
    assert len(lines) == 2  # one line per change, not per poll


def test_watch_backoff_resets_when_something_changes(slurm):
    rec = slurm_record(state="PENDING")
    answers = ["PENDING"] * 3 + ["RUNNING"] * 3

    def sweep(call):
        if answers:
            return sweep_answer(squeue=[squeue_row("101", answers.pop(0), rec["id"], "Priority")])(call)
        return sweep_answer(sacct=[sacct_row("101", rec["id"], "COMPLETED")])(call)

    slurm.ssh("SWEEP", sweep)
    slept: list[float] = []
    platform.watch("slurm", [rec["id"]], on_line=lambda _: None, sleep=slept.append, first=2.0)
    assert slept == [2.0, 4.0, 8.0, 2.0, 4.0, 8.0]


def test_watch_stops_after_max_unknown_polls(slurm):
    rec = slurm_record()
    slurm.ssh("SWEEP", sweep_answer())  # neither squeue nor sacct knows the job, no exit marker
    slept: list[float] = []
    lines: list[str] = []
    views = platform.watch("slurm", [rec["id"]], on_line=lines.append, sleep=slept.append, max_unknown=4)
    assert len(slept) == 3 and slurm.count("SWEEP") == 4
    assert lines[-1].startswith("stopped watching") and rec["id"] in lines[-1]
    assert platform.watch_exit_code(views) == 1


@pytest.mark.parametrize("first", [0, -1])
def test_watch_refuses_a_non_positive_interval(slurm, first):
    rec = slurm_record()
    with pytest.raises(TaoError, match="--interval must be a positive"):
        platform.watch("slurm", [rec["id"]], on_line=lambda _: None, first=first)
    assert slurm.calls == []


@pytest.mark.parametrize("end,code", [("COMPLETED", 0), ("TIMEOUT", 1), ("CANCELLED", 0)])
def test_cli_watch_exit_code_follows_the_end_state(slurm, cli, end, code):
    rec = slurm_record()
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], end)]))
    out = cli("tao_slurm.py", "status", rec["id"], "--watch")
    assert out.rc == code, out


def test_retry_limit_reached_is_not_resubmitted(slurm, monkeypatch):
    monkeypatch.setattr(slurm_facts, "max_retries", lambda: 0)
    rec = slurm_record()
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], NODE_FAIL)]))
    (view,) = platform.status("slurm", [rec["id"]])
    assert view.state == "ERROR" and "retry limit 0 reached" in view.message
    assert slurm.count("SBATCH") == 0 and children(rec["id"]) == []


def test_front_door_watch_no_retry_never_resubmits(slurm, cli):
    rec = slurm_record()
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], NODE_FAIL)]))
    out = cli("tao_jobs.py", "status", rec["id"], "--watch", "--no-retry")
    assert out.rc == 1 and slurm.count("SBATCH") == 0 and children(rec["id"]) == []


def test_resume_of_a_terminal_record_never_submitted_is_refused(slurm, cli):
    rec = slurm_record(slurm_job_id=None, state="PENDING")
    records.mark(rec["id"], "ERROR", message="submit failed")
    out = cli("tao_slurm.py", "resume", rec["id"])
    assert out.rc == 1 and len(out.err_lines) == 1 and "nothing to resume" in out.err and slurm.calls == []


def test_logs_of_a_record_whose_sbatch_answer_was_lost_points_to_resume(slurm, cli):
    rec = slurm_record(slurm_job_id=None, state="PENDING")
    out = cli("tao_slurm.py", "logs", rec["id"])
    assert out.rc == 1 and f"tao_slurm.py resume {rec['id']}" in out.err and slurm.of("ssh") == []


def test_cancel_marks_canceled_once_scancel_succeeded_even_if_cleanup_fails(slurm):
    rec = slurm_record(staged_secrets=True)
    slurm.ssh("scancel", "")
    slurm.ssh("REMOVE", "", rc=1, stderr="rm: cannot remove: Read-only file system")
    platform.cancel("slurm", [rec["id"]])
    assert records.load(rec["id"])["state"] == "CANCELED"


def test_watch_of_a_staged_record_without_a_slurm_job_does_not_poll_forever(slurm):
    rec = slurm_record(slurm_job_id=None, state="PENDING")
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        if len(slept) > 200:
            raise AssertionError(f"still watching after {len(slept)} polls ({sum(slept) / 3600:.1f} h)")

    views = platform.watch("slurm", [rec["id"]], on_line=lambda _: None, sleep=sleep)
    assert platform.watch_exit_code(views) == 1


def test_watch_follows_a_retry_made_before_the_watch_started(slurm):
    rec = slurm_record()
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], NODE_FAIL)]), times=1)
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "102\n")
    platform.status("slurm", [rec["id"]])  # a plain status resubmits the infrastructure failure
    (retry,) = children(rec["id"])
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("102", retry["id"], "COMPLETED")]))
    views = platform.watch("slurm", [rec["id"]], on_line=lambda _: None, sleep=lambda _: None)
    assert retry["id"] in [v.id for v in views] and platform.watch_exit_code(views) == 0


def test_watch_never_polls_faster_than_the_interval_asked(slurm):
    rec = slurm_record()
    _running_then(slurm, rec, polls=5)
    slept: list[float] = []
    platform.watch("slurm", [rec["id"]], on_line=lambda _: None, sleep=slept.append, first=120.0)
    assert min(slept) >= 120.0, slept


def test_status_sweep_is_one_remote_command_for_many_records(slurm):
    recs = [slurm_record(slurm_job_id=str(500 + i), state="PENDING") for i in range(4)]
    slurm.ssh("SWEEP", sweep_answer(squeue=[squeue_row(str(500 + i), "RUNNING", r["id"], "node1")
                                            for i, r in enumerate(recs)]))
    views = platform.status("slurm")
    assert [v.state for v in views] == ["RUNNING"] * 4
    (sweep,) = slurm.of("ssh")
    assert sweep.script == "SWEEP" and sweep.args[0] == "500,501,502,503"


def test_missing_inputs_refuse_the_submit_before_any_record(slurm):
    spec = {**SPEC, "dataset": {"root": "lustre:///data/coco", "required": ["train.json", "val.json"]}}
    slurm.ssh("MISSING", lambda c: ok("".join(p + "\n" for p in c.args if p.endswith("val.json"))))
    with pytest.raises(TaoError, match="missing on the cluster .*val.json"):
        platform.get("slurm").submit(spec, SubmitOptions())
    assert records.list_records() == [] and slurm.count("MISSING") == 1
    assert set(slurm.scripts()) <= {"MISSING"}  # nothing written on the cluster


def test_a_failed_stage_marks_the_record_error_and_never_sbatches(slurm):
    slurm.ssh("STAGE", "", rc=2, stderr="mkdir: cannot create directory '/lustre/base': Permission denied")
    with pytest.raises(TaoError, match="Permission denied"):
        platform.get("slurm").submit(SPEC, SubmitOptions())
    (rec,) = records.list_records()
    assert rec["state"] == "ERROR" and slurm.count("SBATCH") == 0


# ------------------------------------------------------------------ TAO status.json
TAO_LINES = {
    "success": '{"status": "STARTED", "message": "Starting train"}\n{"status": "SUCCESS", "message": "Training finished"}\n',
    "failure": '{"status": "RUNNING", "kpi": {"loss": 1}}\n{"status": "FAILURE", "message": "Dataset has no images"}\n',
}


@pytest.mark.parametrize("sacct_state,exit_code,tao,want", [
    ("COMPLETED", "0:0", "failure", ("ERROR", "Dataset has no images")),   # exit 0 yet TAO failed
    ("COMPLETED", "0:0", "success", ("COMPLETE", "Training finished")),
    ("FAILED", "1:0", "success", ("COMPLETE", "exited 1:0 afterwards")),   # TAO finished; teardown failed
    ("COMPLETED", "0:0", None, ("COMPLETE", "COMPLETED")),                 # no status.json: the exit code decides
])
def test_tao_status_json_decides_complete_vs_error(slurm, sacct_state, exit_code, tao, want):
    rec = slurm_record()
    status_file = rec["backend"]["results_dir"] + "/status.json"
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], sacct_state, exit_code)],
                                    markers={status_file: TAO_LINES[tao]} if tao else {}))
    (view,) = platform.refresh([records.load(rec["id"])])
    assert (view.state, want[1] in (view.message or "")) == (want[0], True), view.message
    (sweep,) = slurm.ssh_calls("SWEEP")
    assert status_file in sweep.args  # read in the same one remote command as squeue/sacct
    if want[0] == "ERROR":
        assert view.err_class == "ERR_PROGRAM"


def test_failed_job_with_tao_failure_still_retries_an_infrastructure_log(slurm, monkeypatch):
    rec = slurm_record()
    status_file = rec["backend"]["results_dir"] + "/status.json"
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], "FAILED", "1:0")],
                                    markers={status_file: TAO_LINES["failure"]}))
    slurm.ssh("TAIL_FILES", lambda call: ok(f"@@file {call.args[1]}\nNCCL WARN NET/IB : Got completion from peer with error 12\n"))
    (view,) = platform.refresh([records.load(rec["id"])], retry=False)
    assert view.state == "ERROR" and view.err_class == "ERR_INFRA"


# ------------------------------------------------------------------ image conversion job
PYXIS = {**SPEC, "container_runtime": "pyxis", "image": "nvcr.io/nvidia/tao/x:1", "account": "acct",
         "conversion_partition": "cpu"}


def _staged(call) -> dict:
    import base64
    import io
    import tarfile

    tar = tarfile.open(fileobj=io.BytesIO(base64.b64decode(call.stdin)))
    return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def test_missing_sqsh_is_a_conversion_job_the_training_job_waits_for(slurm):
    slurm.ssh("MISSING", lambda call: ok(call.args[-1] + "\n"))  # the cached .sqsh is missing
    slurm.ssh("STAGE")
    slurm.ssh("CONVERT", "900\n")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "901\n")
    view = platform.get("slurm").submit(PYXIS, SubmitOptions())
    assert slurm.count("CONVERT") == 1 and slurm.count("SBATCH") == 1
    assert "SWEEP" not in slurm.scripts()  # submit returns: nothing waits for the conversion
    rec = records.load(view.id)
    b = rec["backend"]
    assert (b["convert_job_id"], b["slurm_job_id"]) == ("900", "901")
    assert b["convert_log"] == f"{b['job_dir']}/slurm-logs/convert-900.out"
    sbatch = next(c for c in slurm.calls if c.script == "SBATCH")
    assert sbatch.args[3] == "900"  # --dependency=afterok:900, --kill-on-invalid-dep=yes
    files = _staged(next(c for c in slurm.calls if c.script == "STAGE"))
    conv = files[f"sbatch/convert_{view.id}.sbatch"]
    assert "#SBATCH --partition=cpu\n#SBATCH --account=acct\n" in conv and "enroot import" in conv
    assert f"--container-image={b['job_dir'].rsplit('/jobs/', 1)[0]}/sqsh-cache/nvcr.io+nvidia+tao+x+1.sqsh" in \
        files[f"sbatch/job_{view.id}.sbatch"]


def test_a_cached_sqsh_needs_no_conversion_job(slurm):
    slurm.ssh("MISSING", "")
    slurm.ssh("STAGE")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "901\n")
    view = platform.get("slurm").submit(PYXIS, SubmitOptions())
    assert "CONVERT" not in slurm.scripts() and slurm.count("SBATCH") == 1
    assert next(c for c in slurm.calls if c.script == "SBATCH").args[3] == ""
    assert "convert_job_id" not in records.load(view.id)["backend"]


def _converting(slurm) -> dict:
    rec = slurm_record(state="PENDING")
    jdir = rec["backend"]["staged_dir"]
    return records.mark(rec["id"], "PENDING", backend={"convert_job_id": "100", "convert_log": f"{jdir}/slurm-logs/convert-100.out"})


def test_training_waits_for_the_conversion_then_ends_in_error_with_its_log_tail(slurm):
    rec = _converting(slurm)
    slurm.ssh("SWEEP", sweep_answer(squeue=[squeue_row("101", "PENDING", rec["id"], "Dependency"),
                                            squeue_row("100", "RUNNING", rec["id"] + "-sqsh")]))
    (view,) = platform.refresh([records.load(rec["id"])])
    assert view.state == "PENDING" and "waiting for image conversion job 100 (running)" in view.message
    (sweep,) = slurm.ssh_calls("SWEEP")
    assert sweep.args[0] == "100,101"  # one squeue/sacct for both jobs
    # the import failed: SLURM cancels the dependent job; the record says why, from the conversion log
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], "CANCELLED", "0:0"),
                                           sacct_row("100", rec["id"] + "-sqsh", "FAILED", "1:0")]))
    slurm.ssh("TAIL_FILES", lambda call: ok(f"@@file {call.args[1]}\ntao: converting x\n"
                                            "[ERROR] Could not process JSON input\n"))
    (view,) = platform.refresh([records.load(rec["id"])])
    assert view.state == "ERROR" and view.err_class == "ERR_PROGRAM"
    assert "image conversion job 100 ended FAILED (exit code 1): tao: converting x | [ERROR] Could not process JSON " \
           "input" in view.message and "enroot-credentials" in view.message
    assert [c.args[1:] for c in slurm.ssh_calls("TAIL_FILES")] == [[rec["backend"]["convert_log"]]]


def test_a_finished_conversion_leaves_the_training_verdict_alone(slurm):
    rec = _converting(slurm)
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], "COMPLETED"),
                                           sacct_row("100", rec["id"] + "-sqsh", "COMPLETED")]))
    (view,) = platform.refresh([records.load(rec["id"])])
    assert view.state == "COMPLETE"


# ------------------------------------------------------------------ retries the job makes itself
def _self_retrying(slurm) -> dict:
    rec = slurm_record()
    return records.mark(rec["id"], "RUNNING", backend={"self_retry": True})


def test_status_follows_a_job_that_resubmitted_itself_and_never_resubmits_again(slurm):
    rec = _self_retrying(slurm)
    hops = rec["backend"]["staged_dir"] + "/meta/retries.jsonl"
    lines = ('{"from":"101","next":"102","attempt":1,"failed_on":"node3","excluded":"node3"}\n'
             '{"from":"102","next":"103","attempt":2,"failed_on":"node4","excluded":"node3,node4"}\n')
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], "FAILED", "1:0")], markers={hops: lines}))
    (view,) = platform.refresh([records.load(rec["id"])])
    b = records.load(rec["id"])["backend"]
    assert view.state == "PENDING" and b["slurm_job_id"] == "103" and b["self_retries"] == 2
    assert b["excluded_nodes"] == "node3,node4" and b["log_dir"].endswith(f"/slurm-logs/{rec['id']}-103")
    assert "resubmitted itself as SLURM job 103 (retry 2 of 10, excluding node3,node4)" in view.message
    assert children(rec["id"]) == []
    # its last attempt failed with an infrastructure log and did not resubmit (limit): ERROR, no poller resubmit
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("103", rec["id"], "FAILED", "1:0")], markers={hops: lines}))
    slurm.ssh("TAIL_FILES", lambda call: ok(f"@@file {call.args[1]}\nNVRM: Xid (PCI:0000:3b:00): 79\n"))
    (view,) = platform.refresh([records.load(rec["id"])])
    assert view.state == "ERROR" and view.err_class == "ERR_INFRA" and "did not resubmit itself" in view.message
    assert children(rec["id"]) == [] and slurm.count("SBATCH") == 0


def test_cancel_of_a_self_retrying_job_stops_every_job_of_its_name(slurm):
    rec = _self_retrying(slurm)
    slurm.ssh("scancel", "")
    slurm.ssh("CANCEL_NAME", "")
    (view,), _ = platform.cancel("slurm", [rec["id"]])
    assert view.state == "CANCELED"
    assert slurm.count("scancel") == 1 and [c.args for c in slurm.ssh_calls("CANCEL_NAME")] == [[rec["id"]]]


def test_cancel_of_a_failed_job_stops_its_running_retry(slurm):
    first = slurm_record()
    records.mark(first["id"], "ERROR", err_class="ERR_INFRA", message="xid")
    retry = records.open_record("slurm", "none", "dino", "train", "A", first["results_dir"], retry_of=first["id"],
                                backend={"backend_type": "slurm"})
    records.mark(retry["id"], "PENDING", backend_ref="slurm:202", backend={
        "slurm_job_id": "202", "job_dir": first["backend"]["staged_dir"], "job_name": retry["id"],
        "log_dir": first["backend"]["staged_dir"] + f"/slurm-logs/{retry['id']}-202"})
    slurm.ssh("scancel", "")
    views, errors = platform.cancel("slurm", [first["id"]])
    assert errors == [] and {v.id: v.state for v in views} == {first["id"]: "ERROR", retry["id"]: "CANCELED"}
    assert [c.words for c in slurm.of("ssh") if c.words[:1] == ["scancel"]] == [["scancel", "202"]]


def test_logs_show_the_conversion_log_of_a_job_that_waited_for_one(slurm):
    rec = _converting(slurm)
    records.mark(rec["id"], "PENDING", backend={"slurm_job_id": "101", "log_dir": rec["backend"]["staged_dir"] +
                                                f"/slurm-logs/{rec['id']}-101"})
    slurm.ssh("LOGS", "@@out\n@@err\n")
    slurm.ssh("TAIL_FILES", lambda call: ok(f"@@file {call.args[1]}\n" + "".join(f"line {i}\n" for i in range(9))))
    logs = platform.logs("slurm", rec["id"], tail=3)
    conv = records.load(rec["id"])["backend"]["convert_log"]
    assert list(logs.sections)[0] == conv and logs.sections[conv] == "line 6\nline 7\nline 8\n"


def test_a_status_retry_of_a_self_retrying_job_keeps_its_self_retry(slurm):
    """NODE_FAIL never reaches the footer: the poller resubmits the same script, footer included, so the
    new record must still read retries.jsonl and cancel by name."""
    rec = records.mark(slurm_record()["id"], "RUNNING", backend={"self_retry": True, "infra_retries": True})
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], NODE_FAIL, "0:0")]))
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "102\n")
    platform.refresh([records.load(rec["id"])])
    (retry,) = children(rec["id"])
    assert retry["backend"]["self_retry"] is True and retry["backend"]["infra_retries"] is True
    # the retry's own footer resubmitted it: status follows the hop and never resubmits a second job
    hops = rec["backend"]["staged_dir"] + "/meta/retries.jsonl"
    line = '{"from":"102","next":"103","attempt":1,"failed_on":"node3","excluded":"node3"}\n'
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("102", retry["id"], "FAILED", "1:0")], markers={hops: line}))
    platform.refresh([records.load(retry["id"])])
    assert records.load(retry["id"])["backend"]["slurm_job_id"] == "103" and slurm.count("SBATCH") == 1
    slurm.ssh("scancel", "")
    slurm.ssh("CANCEL_NAME", "")
    platform.cancel("slurm", [retry["id"]])
    assert [c.args for c in slurm.ssh_calls("CANCEL_NAME")] == [[retry["id"]]]


def test_a_retry_hop_seen_from_unknown_is_not_an_illegal_transition(slurm):
    rec = _self_retrying(slurm)
    records.mark(rec["id"], "UNKNOWN", message="lost contact")
    other = _self_retrying(slurm)
    hops = rec["backend"]["staged_dir"] + "/meta/retries.jsonl"
    line = '{"from":"101","next":"102","attempt":1,"failed_on":"node3","excluded":"node3"}\n'
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], "FAILED", "1:0"),
                                           sacct_row("101", other["id"], "RUNNING")], markers={hops: line}))
    out = {v.id: v for v in platform.refresh([records.load(rec["id"]), records.load(other["id"])])}
    assert out[rec["id"]].state == "UNKNOWN" and records.load(rec["id"])["backend"]["slurm_job_id"] == "102"
    assert "resubmitted itself as SLURM job 102" in out[rec["id"]].message
    assert out[other["id"]].state == "RUNNING"  # the rest of the sweep is still observed


def test_a_self_retrying_job_stopped_at_its_deadline_is_error_and_never_resubmitted(slurm):
    rec = _self_retrying(slurm)
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], "DEADLINE", "0:0")]))
    slurm.ssh("TAIL_FILES", lambda call: ok(f"@@file {call.args[1]}\nNVRM: Xid (PCI:0000:3b:00): 79\n"))
    (view,) = platform.refresh([records.load(rec["id"])])
    assert view.state == "ERROR" and "stopped at its deadline" in view.message and "did not resubmit" not in view.message
    assert children(rec["id"]) == [] and slurm.count("SBATCH") == 0


def test_the_conversion_is_held_until_the_training_job_exists_and_released_by_its_sbatch(slurm):
    from taobank.platforms.slurm import remote

    assert "sbatch --parsable --hold" in remote.CONVERT
    # the training sbatch releases the conversion ($4) only after its own job was created and released
    assert remote.SBATCH.index('scontrol release "$4"') > remote.SBATCH.index('scontrol release "$jid"')
    assert 'scontrol release "$4"' in remote.ADOPT


def test_a_refused_training_sbatch_cancels_the_held_conversion(slurm):
    slurm.ssh("MISSING", lambda call: ok(call.args[-1] + "\n"))
    slurm.ssh("STAGE")
    slurm.ssh("CONVERT", "900\n")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", ok("", rc=3, stderr="sbatch: error: Invalid generic resource (gres) specification"))
    slurm.ssh("scancel", "")
    slurm.ssh("UNSTAGE")
    with pytest.raises(TaoError, match=r"Invalid generic resource.*image conversion job 900 cancelled"):
        platform.get("slurm").submit(PYXIS, SubmitOptions())
    assert [c.words for c in slurm.of("ssh") if c.words[:1] == ["scancel"]] == [["scancel", "900"]]
    (rec,) = records.list_records("slurm")
    assert rec["state"] == "ERROR" and "image conversion job 900 cancelled" in rec["message"]


def test_a_lost_training_answer_is_adopted_and_the_adoption_releases_the_conversion(slurm):
    slurm.ssh("MISSING", lambda call: ok(call.args[-1] + "\n"))
    slurm.ssh("STAGE")
    slurm.ssh("CONVERT", "900\n")
    slurm.ssh("FIND", lambda call: ok(find_answer(squeue=[squeue_row("901", "PENDING", call.args[0], "JobHeldUser")])))
    slurm.ssh("FIND", find_answer(), times=1)  # nothing by that name before the sbatch
    slurm.ssh("SBATCH", "")  # the answer was lost
    slurm.ssh("ADOPT")
    view = platform.get("slurm").submit(PYXIS, SubmitOptions())
    assert records.load(view.id)["backend"]["slurm_job_id"] == "901"
    assert next(c for c in slurm.calls if c.script == "ADOPT").args[1:] == [
        records.load(view.id)["backend"]["job_dir"] + "/slurm-logs", view.id, "900"]
    assert not [c for c in slurm.of("ssh") if c.words[:1] == ["scancel"]]


# ------------------------------------------------------------------ the one preflight command
def test_the_paths_the_command_names_are_checked_in_the_one_preflight_command(slurm):
    spec = {**SPEC, "command": ["dino", "train", "-e", "/lustre/fsw/other/specs/train.yaml",
                                "train.results_dir=/lustre/out"]}
    slurm.ssh("MISSING", lambda c: ok("".join(p + "\n" for p in c.args if p.endswith("train.yaml"))))
    with pytest.raises(TaoError, match=r"missing on the cluster \(login1\): /lustre/fsw/other/specs/train.yaml; put "):
        platform.get("slurm").submit(spec, SubmitOptions())
    assert records.list_records() == [] and set(slurm.scripts()) <= {"MISSING"}
    (check,) = slurm.ssh_calls("MISSING")
    assert check.args == ["@@nodes", "/lustre/fsw/other/specs/train.yaml"]  # an output (results_dir=) may not exist yet


@pytest.mark.parametrize("cached", ["empty", "not squashfs"])
def test_an_empty_or_foreign_cached_sqsh_is_converted_again(slurm, cached):
    from taobank.platforms.slurm import remote

    slurm.ssh("MISSING", lambda call: ok(f"{call.args[-1]} (empty or not a squashfs image)\n"))
    slurm.ssh("STAGE")
    slurm.ssh("CONVERT", "900\n")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "901\n")
    view = platform.get("slurm").submit(PYXIS, SubmitOptions())
    check = next(c for c in slurm.calls if c.script == "MISSING")
    assert check.args[-2] == remote.SQSH_MARK and check.args[-1].endswith("/sqsh-cache/nvcr.io+nvidia+tao+x+1.sqsh")
    assert slurm.count("CONVERT") == 1 and slurm.count("SBATCH") == 1
    assert records.load(view.id)["backend"]["convert_job_id"] == "900"


def test_a_given_sqsh_that_is_no_squashfs_image_is_refused_before_any_record(slurm):
    from taobank.platforms.slurm import remote

    spec = {**PYXIS, "image": "/lustre/images/tao.sqsh"}
    slurm.ssh("MISSING", lambda call: ok(f"{call.args[-1]} (empty or not a squashfs image)\n"))
    with pytest.raises(TaoError, match=r"missing on the cluster \(login1\): /lustre/images/tao.sqsh \(empty or not a "
                                       r"squashfs image\)"):
        platform.get("slurm").submit(spec, SubmitOptions())
    (check,) = slurm.ssh_calls("MISSING")
    assert records.list_records() == [] and check.args[-2:] == [remote.SQSH_MARK, "/lustre/images/tao.sqsh"]
    assert set(slurm.scripts()) <= {"MISSING"}  # only read-only checks ran


# ------------------------------------------------------------------ a generic command
def test_a_generic_command_needs_no_tao_network(slurm, cli):
    """A new user's `sleep 600` failed with a schema error: network_arch and action were required."""
    slurm.ssh("MISSING", "")
    slurm.ssh("STAGE")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "901\n")
    out = cli("tao_slurm.py", "submit", "--runtime", "none", "--num-gpus", "1", "--quiet", "--", "sleep", "600")
    assert out.rc == 0, out
    rec = records.load(out.out.strip())
    assert (rec["network_arch"], rec["action"]) == ("custom", "run") and rec["id"].startswith("custom-run-")


# ------------------------------------------------------------------ OUT_OF_MEMORY
def test_an_out_of_memory_job_with_an_infrastructure_log_is_retried(slurm):
    rec = slurm_record()
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], "OUT_OF_MEMORY", "0:125")]))
    slurm.ssh("TAIL_FILES", lambda call: ok(f"@@file {call.args[1]}\nNVRM: Xid (PCI:0000:3b:00): 79\n"))
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "102\n")
    platform.refresh([records.load(rec["id"])])
    first = records.load(rec["id"])
    assert (first["state"], first["err_class"]) == ("ERROR", "ERR_INFRA") and "resubmitting" in first["message"]
    (retry,) = children(rec["id"])
    assert retry["backend"]["slurm_job_id"] == "102"


@pytest.mark.parametrize("field, where", [
    ({"command": ["python", "train.py", "a\nb"]}, "command[2]"),
    ({"env": {"EPOCHS": "3\r"}}, "env.EPOCHS"),
    ({"env": {"A\nB": "1"}}, "the name of env.<a key>"),
    ({"command": "python train.py\x00"}, "command"),
])
def test_a_line_break_in_a_spec_value_is_refused_by_name_before_any_record(slurm, field, where):
    with pytest.raises(TaoError) as caught:
        platform.get("slurm").submit({**SPEC, **field}, SubmitOptions())
    text = str(caught.value)
    assert f"spec value {where} holds a newline" in text and "spec_files" in text and "\n" not in text
    assert records.list_records() == [] and slurm.calls == []
