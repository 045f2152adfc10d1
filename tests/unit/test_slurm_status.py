"""Status mapping from recorded squeue/sacct output (Slurm 22.05 on the local cluster)."""
import json

import pytest

from taobank.states import STATES
from taobank.progress import statusfile
from taobank.platforms.slurm import status as st

# Recorded: squeue -h -o '%i|%T|%r|%j' ; sacct -n -X -P -o JobIDRaw,JobName,State,ExitCode
SQUEUE = """\
11|PENDING|Resources|dino-train-aaaaaaaa
12|PENDING|QOSMaxGRESPerUser|dino-train-bbbbbbbb
13|RUNNING|None|dino-train-cccccccc
14|COMPLETING|None|dino-train-dddddddd
15|SUSPENDED|None|dino-train-eeeeeeee
16|PENDING|BeginTime|dino-train-ffffffff
17|REQUEUE_HOLD|JobHeldUser|dino-train-gggggggg
18|PENDING|PartitionNodeLimit|dino-train-hhhhhhhh
slurm_load_jobs error: Invalid job id specified
"""
SACCT = """\
1|sbatch|COMPLETED|0:0
3|sbatch|FAILED|3:0
4|sbatch|CANCELLED by 1001|0:0
4.batch|batch|CANCELLED|0:15
5|x|TIMEOUT|0:0
6|x|OUT_OF_MEMORY|0:125
7|x|NODE_FAIL|0:0
8|x|PREEMPTED|0:0
9|x|BOOT_FAIL|0:0
10|x|DEADLINE|0:0
16|x|REQUEUED|0:0
20|x|CANCELLED+|0:0
"""


def test_parse_squeue_and_sacct():
    q = st.parse_squeue(SQUEUE)
    assert q["11"] == {"state": "PENDING", "reason": "Resources", "name": "dino-train-aaaaaaaa"}
    assert len(q) == 8
    a = st.parse_sacct(SACCT)
    assert a["4"]["state"] == "CANCELLED" and a["4"]["raw_state"] == "CANCELLED by 1001"
    assert a["20"]["state"] == "CANCELLED"  # narrow-column truncation
    assert "4.batch" not in a


@pytest.mark.parametrize("jid,state,fragment", [
    ("11", "PENDING", "free nodes"), ("12", "PENDING", "QOS limit"), ("13", "RUNNING", "running"),
    ("14", "RUNNING", "completing"), ("15", "RUNNING", "paused"), ("16", "PENDING", "start time"),
    ("17", "PENDING", "requeued"), ("18", "PENDING", "partition allows"),
])
def test_squeue_mapping(jid, state, fragment):
    v = st.classify(st.parse_squeue(SQUEUE)[jid], None, None)
    assert v.state == state and fragment in v.message


@pytest.mark.parametrize("jid,state,err,retry", [
    ("1", "COMPLETE", None, False), ("4", "CANCELED", None, False), ("20", "CANCELED", None, False),
    ("5", "ERROR", "ERR_PROGRAM", False), ("6", "ERROR", "ERR_PROGRAM", False),
    ("7", "ERROR", "ERR_INFRA", True), ("9", "ERROR", "ERR_INFRA", True), ("8", "CANCELED", None, False),
    ("16", "PENDING", None, False),
])
def test_sacct_mapping(jid, state, err, retry):
    v = st.classify(None, st.parse_sacct(SACCT)[jid], None)
    assert (v.state, v.err_class, v.retry) == (state, err, retry)
    assert v.state in STATES


def test_failed_needs_the_log_then_classifies_by_pattern():
    rec = st.parse_sacct(SACCT)["3"]
    v = st.classify(None, rec, None)
    assert v.needs_log and v.state == "ERROR" and "exit code 3" in v.message
    v = st.classify(None, rec, None, log_tail="Traceback ...\nValueError: bad spec\n")
    assert (v.err_class, v.retry) == ("ERR_PROGRAM", False)
    v = st.classify(None, rec, None, log_tail="NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus\n")
    assert (v.err_class, v.retry) == ("ERR_INFRA", True) and "xid" in v.message
    v = st.classify(None, st.parse_sacct(SACCT)["10"], None, log_tail="")
    assert v.err_class == "ERR_PROGRAM"


def test_out_of_memory_is_a_program_error_unless_its_log_shows_an_infrastructure_cause():
    rec = st.parse_sacct(SACCT)["6"]
    v = st.classify(None, rec, None)
    assert v.needs_log and (v.state, v.err_class, v.retry) == ("ERROR", "ERR_PROGRAM", False)  # log tail fetched next
    v = st.classify(None, rec, None, log_tail="RuntimeError: DataLoader worker (pid 77) is killed by signal: Killed\n")
    assert (v.err_class, v.retry, v.needs_log) == ("ERR_PROGRAM", False, False) and "--memory" in v.message
    v = st.classify(None, rec, None, log_tail="OSError: [Errno 116] Stale file handle: '/lustre/data/x.jpg'\n")
    assert (v.state, v.err_class, v.retry) == ("ERROR", "ERR_INFRA", True) and "stale_filesystem" in v.message
    assert v.observed == "OUT_OF_MEMORY"


# Recorded on the local cluster (Slurm 22.05, cgroup v1): `--memory 100M` and a program that takes 600 MB. The job's
# own line says FAILED 1:0 (the batch script outlived its srun step); only the step says OUT_OF_MEMORY.
# sacct -n -P -o JobID,JobName,State,ExitCode,ReqMem,Timelimit,NodeList -j 8,9,10,11,12
SACCT_CAUSES = """\
8|custom-run-b53c3c98|FAILED|1:0|100M|00:05:00|node1
8.batch|batch|FAILED|1:0||||node1
8.extern|extern|COMPLETED|0:0||||node1
8.0|bash|OUT_OF_MEMORY|0:125||||node1
9|dino-train-99999999|TIMEOUT|0:0|3G|00:01:00|node2
9.batch|batch|CANCELLED|0:15||||node2
9.0|bash|CANCELLED|0:15||||node2
10|dino-train-aaaaaaaa|NODE_FAIL|0:0|3G|00:05:00|node1,node2
10.batch|batch|CANCELLED|0:9||||node1
11|dino-train-bbbbbbbb|PREEMPTED|0:0|3G|00:05:00|node2
12|dino-train-cccccccc|OUT_OF_MEMORY|0:125|4000Mc|00:05:00|node1
12.batch|batch|OUT_OF_MEMORY|0:125||||node1
"""


def test_each_cause_reaches_the_message_with_what_to_do():
    """OUT_OF_MEMORY (of a step: the job says FAILED), TIMEOUT, NODE_FAIL, PREEMPTED: the cause first, then the
    request sacct saw or the node, then the flag that fixes it (issue 49: an OOM read `ERR_PROGRAM exit code 1`)."""
    rows = st.parse_sacct(SACCT_CAUSES)
    assert set(rows) == {"8", "9", "10", "11", "12"} and rows["8"]["oom"] == "1" and "oom" not in rows["9"]
    assert rows["8"]["req_mem"] == "100M" and rows["9"]["time_limit"] == "00:01:00"
    v = st.classify(None, rows["8"], {"exit_code": 1, "oom": False}, log_tail="srun: error: node1: task 0: Out Of Memory\n")
    assert (v.state, v.err_class, v.retry, v.observed) == ("ERROR", "ERR_PROGRAM", False, "OUT_OF_MEMORY")
    assert v.message.startswith("OUT_OF_MEMORY: the job used more than the 100M of memory it asked for; ask for "
                                "more with --memory"), v.message
    v = st.classify(None, rows["12"], None, log_tail="")
    assert "more than the 4000M per CPU of memory" in v.message
    v = st.classify(None, rows["9"], None)
    assert (v.state, v.err_class, v.cut_short) == ("ERROR", "ERR_PROGRAM", "time limit")
    assert v.message.startswith("TIMEOUT: SLURM ended the job at its wall time (00:01:00); ask for more with "
                                "--time-hours"), v.message
    v = st.classify(None, rows["10"], None)
    assert (v.state, v.err_class, v.retry) == ("ERROR", "ERR_INFRA", True)
    assert v.message.startswith("NODE_FAIL: a node (node1,node2) failed under the job (the cluster's fault"), v.message
    v = st.classify(None, rows["11"], None)
    assert (v.state, v.cut_short) == ("CANCELED", "preempted")
    assert v.message.startswith("PREEMPTED: a higher-priority job took its node (node2)"), v.message


def test_a_job_line_the_database_has_not_filled_in_yet_names_no_request():
    """Recorded seconds after the OOM kill: the job's own line is a placeholder ("allocation", ReqMem "16?", no
    limit) until slurmctld's record reaches slurmdbd; its values are dropped, the step still says OUT_OF_MEMORY."""
    rows = st.parse_sacct("28|allocation|FAILED|1:0|16?||node1\n28.batch|batch|FAILED|1:0|||node1\n"
                          "28.0|bash|OUT_OF_MEMORY|0:125|||node1\n")
    assert rows["28"]["oom"] == "1" and "req_mem" not in rows["28"] and "time_limit" not in rows["28"]
    v = st.classify(None, rows["28"], None, log_tail="")
    assert v.message.startswith("OUT_OF_MEMORY: the job used more memory than it asked for; ask for more with --memory")
    # what observe does: the record's own request (submitted as memory) wins
    v = st.classify(None, {**rows["28"], "req_mem": "100M"}, None, log_tail="")
    assert "more than the 100M of memory" in v.message


def test_the_exit_marker_names_an_out_of_memory_kill_without_accounting():
    """The job's footer writes "oom": true when its main.err says a step was killed for memory."""
    v = st.classify(None, None, {"exit_code": 1, "oom": True}, accounting=False)
    assert (v.state, v.err_class) == ("ERROR", "ERR_PROGRAM") and v.message.startswith("OUT_OF_MEMORY: ")
    v = st.classify(None, {"state": "FAILED", "raw_state": "FAILED", "exit_code": "1:0"}, {"exit_code": 1, "oom": True},
                    log_tail="")
    assert v.message.startswith("OUT_OF_MEMORY: ") and v.observed == "OUT_OF_MEMORY"
    v = st.classify(None, {"state": "FAILED", "raw_state": "FAILED", "exit_code": "1:0"}, {"exit_code": 1, "oom": False},
                    log_tail="")
    assert v.message.startswith("FAILED (exit code 1)")


def test_taos_last_word_is_kept_for_the_core_and_its_success_wins_over_a_failed_wrapper():
    """A clean exit after TAO's FAILURE is the core's one rule (track.tao_last_word), not SLURM's: classify says
    what SLURM saw and keeps TAO's word on the observation; TAO's SUCCESS after a failed wrapper is SLURM's own."""
    from taobank.core import track
    from taobank.contract import TaoEnd

    failed = TaoEnd("FAILURE", "Train was interrupted")
    v = st.classify(None, {"state": "COMPLETED", "raw_state": "COMPLETED", "exit_code": "0:0"}, {"exit_code": 0}, tao=failed)
    assert v.state == "COMPLETE" and v.tao_end == failed
    track.tao_last_word(v)
    assert v.state == "ERROR" and "Train was interrupted" in v.message
    v = st.classify(None, {"state": "FAILED", "raw_state": "FAILED", "exit_code": "2:0"}, None, log_tail="", tao=failed)
    assert v.state == "ERROR" and "FAILURE (Train was interrupted)" in v.message
    v = st.classify(None, {"state": "FAILED", "raw_state": "FAILED", "exit_code": "1:0"}, None,
                    tao=TaoEnd("SUCCESS", "Train finished successfully."))
    assert v.state == "COMPLETE" and "the wrapper exited 1:0 afterwards" in v.message


def test_requeued_job_still_in_squeue_wins_over_a_terminal_looking_sacct_line():
    # NODE_FAIL / PREEMPTED with --requeue: the same job id waits again.
    for sacct_state in ("NODE_FAIL", "PREEMPTED"):
        v = st.classify({"state": "PENDING", "reason": "BeginTime", "name": "x"},
                        {"state": sacct_state, "raw_state": sacct_state, "exit_code": "0:0"}, None)
        assert v.state == "PENDING"
    v = st.classify({"state": "PREEMPTED", "reason": "None", "name": "x"}, None, None)
    assert v.state == "PENDING" and "requeued" in v.message


def test_completed_checks_the_exit_marker():
    rec = st.parse_sacct(SACCT)["1"]
    assert st.classify(None, rec, {"exit_code": 0}).state == "COMPLETE"
    v = st.classify(None, rec, {"exit_code": 2})
    assert v.state == "ERROR" and "exit" in v.message
    assert st.classify(None, rec, None).state == "COMPLETE"


def test_exit_marker_fallback_without_accounting():
    assert st.classify(None, None, {"exit_code": 0}, accounting=False).state == "COMPLETE"
    v = st.classify(None, None, {"exit_code": 124, "timed_out": True}, accounting=False)
    assert v.state == "ERROR" and "timeout_hours" in v.message
    v = st.classify(None, None, None, accounting=False)
    assert v.state == "UNKNOWN" and "accounting unavailable" in v.message


def test_every_pending_reason_is_explained():
    for reason in ("Resources", "Priority", "Dependency", "JobHeldUser", "JobHeldAdmin", "PartitionNodeLimit",
                   "QOSMaxJobsPerUserLimit", "AssocGrpGRES", "(Resources)"):
        assert st.explain_reason(reason) != reason
    assert st.first_word("CANCELLED by 0") == "CANCELLED" and st.first_word("CANCELLED+") == "CANCELLED"


def test_marker_parse():
    assert st.parse_marker('{"exit_code":0,"slurm_job_id":"5"}\n') == {"exit_code": 0, "slurm_job_id": "5"}
    assert st.parse_marker("") is None and st.parse_marker("garbage") is None


def test_sweep_output_parsing_and_accounting_fallback():
    from taobank.platforms.slurm import observe as slurm_observe

    text = ("@@squeue\n21|RUNNING|None|job-a\n@@rc 0\n@@sacct\n21|job-a|RUNNING|0:0\n22|job-b|COMPLETED|0:0\n@@rc 0\n"
            "@@marker /l/jobs/job-b/meta/exit.json\n{\"exit_code\":0,\"slurm_job_id\":\"22\"}\n\n"
            "@@marker /l/jobs/job-c/meta/exit.json\n\n")
    squeue, sacct, marks, accounting = slurm_observe.parse_sweep(text)
    assert accounting and set(squeue) == {"21"} and set(sacct) == {"21", "22"}
    assert st.parse_marker(marks["/l/jobs/job-b/meta/exit.json"])["exit_code"] == 0
    assert st.parse_marker(marks["/l/jobs/job-c/meta/exit.json"]) is None
    no_acct = ("@@squeue\nslurm_load_jobs error: Invalid job id specified\n@@rc 1\n@@sacct\n"
               "sacct: error: Problem talking to the database: Connection refused\n@@rc 1\n"
               "@@marker /l/m.json\n{\"exit_code\":3,\"slurm_job_id\":\"9\"}\n\n")
    squeue, sacct, marks, accounting = slurm_observe.parse_sweep(no_acct)
    assert (squeue, sacct, accounting) == ({}, {}, False)
    v = st.classify(None, None, st.parse_marker(marks["/l/m.json"]), accounting=accounting)
    assert v.state == "ERROR" and "exit marker" in v.message


def test_only_one_poller_claims_a_retry(state_dir):
    from taobank import records
    from taobank.core import track

    rec = records.get(records.open_record("slurm", "none", "dino", "train", "A", "/lustre/results")["id"])
    assert track.claim_retry(rec) is True
    assert track.claim_retry(rec) is False


def test_skill_status_table_covers_and_matches_the_mapping():
    """The skill's state table (references/states.md) is documentation of status.py: every state appears, simple rows agree."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "skills/tao-run-on-slurm/references/states.md").read_text()
    table = text[text.index("| SLURM | Record |"):].split("\n\n")[0]
    every = (st.PENDING_STATES | st.RUNNING_STATES | st.PAUSED_STATES | st.FAILED_STATES | st.CANCEL_STATES
             | {"COMPLETED", "TIMEOUT"}) - {"RESIZING", "SIGNALING", "STAGE_OUT", "REQUEUE_FED", "RESV_DEL_HOLD"}
    assert not [s for s in every if s not in table]
    for line in table.splitlines()[2:]:
        left, right = [c.strip() for c in line.strip("|").split("|")]
        expect = re.match(r"[A-Z]+", right)
        if not expect or expect.group(0) not in ("PENDING", "RUNNING", "CANCELED", "ERROR"):
            continue
        for state in re.findall(r"\b[A-Z_]{4,}\b", left.split(";")[0].split("(")[0]):
            v = st.classify(None, {"state": state, "raw_state": state, "exit_code": "0:0"}, None, log_tail="")
            assert v.state == expect.group(0), (state, v)


def test_container_launch_failures_get_a_hint():
    rec = {"state": "FAILED", "raw_state": "FAILED", "exit_code": "1:0"}
    v = st.classify(None, rec, None, log_tail="pyxis: importing docker image ...\n[ERROR] Could not process JSON input\n")
    assert v.err_class == "ERR_PROGRAM" and "enroot/.credentials" in v.message
    v = st.classify(None, rec, None, log_tail="srun: unrecognized option '--container-image=x'\n")
    assert "no Pyxis" in v.message


def test_logs_of_a_record_whose_sbatch_answer_was_lost_points_to_resume(state_dir):
    from taobank import records
    from taobank.errors import TaoError
    from taobank.platforms.slurm import logs as slurm_logs

    rec = records.open_record("slurm", "none", "dino", "train", "A", "/lustre/results")
    records.mark(rec["id"], "PENDING", backend={"staged_dir": "/lustre/jobs/x", "job_name": rec["id"]})
    with pytest.raises(TaoError, match=f"tao_slurm.py resume {rec['id']}"):
        slurm_logs.logs(rec["id"])
    bare = records.open_record("slurm", "none", "dino", "train", "A", "/lustre/results")
    with pytest.raises(TaoError, match="has no SLURM job yet"):
        slurm_logs.logs(bare["id"])


@pytest.mark.parametrize("lines,want", [
    (["STARTED", "FAILURE", "STARTED", "RUNNING"], None),  # the retry runs: the first attempt's FAILURE is history
    (["STARTED", "FAILURE", "STARTED", "SUCCESS"], "SUCCESS"),
    (["STARTED", "SUCCESS", "STARTED", "FAILURE"], "FAILURE"),
    (["STARTED", "FAILURE", "STARTED"], None),
    (["FAILURE"], "FAILURE"),  # no STARTED at all: the whole file
])
def test_tao_status_counts_only_entries_since_the_last_started(lines, want):
    import json as _json

    text = "".join(_json.dumps({"status": s, "message": s.lower()}) + "\n" for s in lines)
    got = statusfile.text_outcome(text)
    assert (got["status"] if got else None) == want


def test_a_search_trial_whose_runner_wrote_pruned_ends_pruned_through_the_core_rule():
    """The runner appends PRUNED once TAO has stopped and exits 0: SLURM sees COMPLETED, the core's one rule
    (track.tao_last_word) makes the record PRUNED with the runner's line; a non-zero exit stays an error."""
    from taobank.core import track
    from taobank.contract import TaoEnd

    said = "PRUNED at epoch 3: val_loss 0.91, worse than the rung's cut 0.62"
    text = "".join(json.dumps(x) + "\n" for x in (
        {"status": "STARTED", "message": "Starting DINO train."},
        {"status": "RUNNING", "message": "Training loop in progress", "epoch": 2, "kpi": {"val_loss": 0.91}},
        {"status": "PRUNED", "message": said, "epoch": 2}))
    said_end = statusfile.text_outcome(text)
    assert said_end == {"status": "PRUNED", "message": said}
    tao = TaoEnd(said_end["status"], said_end["message"])
    v = st.classify(None, {"state": "COMPLETED", "exit_code": "0:0"}, None, tao=tao)
    assert v.state == "COMPLETE" and v.tao_end == tao
    track.tao_last_word(v)
    assert v.state == "PRUNED" and v.message == said and v.err_class is None and not v.retry
    failed = track.tao_last_word(st.classify(None, {"state": "FAILED", "exit_code": "1:0"}, None, tao=tao,
                                             log_tail=""))
    assert failed.state == "ERROR"
    assert statusfile.progress(statusfile.parse(text)).line().startswith("PRUNED epoch 3")
