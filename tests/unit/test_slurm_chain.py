"""The SLURM wall-time chain: its settings, its script (run under bash with stand-in SLURM clients, USR1 sent
as SLURM would), and status following the next attempt under the same record (fake ssh)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from fakeproc import sacct_row, slurm_record, squeue_row, sweep_answer
from taobank.core import platform
from taobank import records
from taobank.errors import TaoError
from taobank.platforms.slurm import chain, render, resources, status as slurm_status, sweep as slurm_sweep

JOB = "dino-train-5e6f7a8b"
STANDINS = {
    "srun": 'while [ "$#" -gt 0 ] && [ "$1" != -- ]; do shift; done; shift; exec "$@"',
    # sbatch: like the real one it needs a script it can read; it keeps its argv and what it inherits
    "sbatch": '[ -r "${!#}" ] || { echo "sbatch: error: Unable to open file ${!#}" >&2; exit 1; }; '
              'printf "%s\\n" "$@" > "$TAO_T/sbatch.args"; echo "${TAO_SLURM_JOB_REF-unset}" > "$TAO_T/sbatch.ref"; '
              'echo 777',
    "scontrol": "true",
    "scancel": 'printf "%s\\n" "$@" > "$TAO_T/scancel.args"',
}


def res(minutes: int = 10):
    return resources.resolve({"partition": "local", "cpus_per_task": 1, "num_gpus": 1, "time_minutes": minutes}, {})


# ------------------------------------------------------------------ settings
@pytest.mark.parametrize("text,seconds", [("24h", 86400), ("90m", 5400), ("2d", 172800), ("3600s", 3600),
                                          ("45", 2700), (30, 1800), ("1.5h", 5400)])
def test_durations(text, seconds):
    assert chain.parse_duration(text) == seconds


@given(st.text(max_size=12))
def test_any_duration_text_is_seconds_or_one_line(text):
    try:
        assert 60 <= chain.parse_duration(text) <= chain.MAX_TOTAL_SECONDS
    except TaoError as exc:
        assert "\n" not in str(exc) and "--max-total-time" in str(exc)


def test_no_chain_unless_asked_and_a_margin_must_fit_the_wall_time():
    assert chain.settings({"command": ["x"]}, res()) is None
    c = chain.settings({"command": ["x"], "action": "train", "max_total_time": "1h"}, res(10))
    assert c.max_attempts == 7 and c.max_total_seconds == 3600 and c.resume  # 6 allocations + 1
    assert (c.margin_seconds, c.stop_grace_seconds, c.run_on_seconds) == (300, 100, 100)
    shell = chain.settings({"command": "train.sh", "action": "train", "max_attempts": 3}, res(10))
    assert shell.max_attempts == 3 and not shell.resume  # shell text cannot take the override
    with pytest.raises(TaoError, match="more than half the wall time"):
        chain.settings({"command": ["x"], "max_attempts": 2, "walltime_margin_seconds": 200}, res(5))


def test_the_script_asks_for_usr1_and_drops_the_inner_timeout():
    c = chain.settings({"command": ["x"], "action": "train", "max_attempts": 3, "walltime_margin_seconds": 60}, res(10))
    inp = render.ScriptInput(job_id=JOB, job_dir="/l/jobs/j", results_parent="/l/results", command=["x", "-e", "s"],
                             resources=res(10), runtime="none", chain=c, action="train")
    text = render.render(inp)
    render.lint(text)
    assert "--signal=B:USR1@60" in render.parse_directives(text)
    assert "timeout --signal" not in text and "tao_latest_checkpoint" in text
    plain = render.render(render.ScriptInput(job_id=JOB, job_dir="/l/jobs/j", results_parent="/l/results",
                                             command=["x"], resources=res(10), runtime="none"))
    assert "USR1" not in plain and "tao_cmd" not in plain


# ------------------------------------------------------------------ the script, under bash
def _run(tmp_path: Path, *, attempt: int | None = None, max_attempts: int = 3, usr1: bool = True,
         checkpoint: str | None = None, self_retries: int = 0, sweep: bool = False, finishes: bool = False) -> dict:
    """Run the chained job script under bash (``self_retries=0``: as ``--no-requeue`` or ``infra_retries: false``
    render it); ``sweep``: as task 0 of array 900 (the array's own script, which runs the trial's)."""
    # a program that ends by itself gets a run-on time it cannot miss on a loaded machine (it ends in 0.5 s)
    c = chain.Chain(max_attempts=max_attempts, max_total_seconds=0, margin_seconds=30,
                    run_on_seconds=20 if finishes else 1, stop_grace_seconds=2, resume=True)
    jdir = tmp_path / "jobs" / JOB
    results = tmp_path / "results"
    # the stand-in program: says its argv, then trains until stopped (TERM)
    prog = ["sh", "-c", 'echo "argv: $*"; touch "$TAO_T/started"; trap "echo stopped; exit 143" TERM; '
            'while :; do sleep 0.2; done', "prog", "train", "-e", "spec.yaml"]
    if not usr1:
        prog = ["sh", "-c", 'echo "argv: $*"', "prog", "train"]
    if finishes:  # ends by itself (its last epoch) just after USR1 came: well before the run-on time is up
        prog = ["sh", "-c", 'echo "argv: $*"; touch "$TAO_T/started"; sleep 0.5; echo "training done"',
                "prog", "train"]
    text = render.render(render.ScriptInput(job_id=JOB, job_dir=str(jdir), results_parent=str(results), command=prog,
                                            resources=res(10), runtime="none", chain=c, action="train",
                                            self_retries=self_retries))
    for d in ("meta", "sbatch", f"slurm-logs/{JOB}-101"):
        (jdir / d).mkdir(parents=True, exist_ok=True)
    script = jdir / "sbatch" / f"job_{JOB}.sbatch"
    script.write_text(text)
    array = None
    if sweep:
        inp = render.ScriptInput(job_id=JOB, job_dir=str(jdir), results_parent=str(results), command=prog,
                                 resources=res(10), runtime="none", chain=c, action="train")
        array = slurm_sweep.array_script("dino-sweep-0a0b0c0d", str(tmp_path / "jobs" / "dino-sweep-0a0b0c0d"),
                                         inp, [JOB], [str(jdir)], [str(script)], 1)
        render.lint(array, "array.sbatch")
        (tmp_path / "array.sbatch").write_text(array)
    if attempt:
        (jdir / "meta" / "chain_attempt").write_text(f"{attempt}\n")
        (jdir / "meta" / "chain_seconds").write_text("100\n")
    if checkpoint:
        (results / JOB / "train").mkdir(parents=True)
        for name in ("model_epoch_009.pth", checkpoint, "notes.txt"):
            (results / JOB / "train" / name).write_text("x")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STANDINS.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body + "\n")
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TAO_T": str(tmp_path), "SLURM_JOB_ID": "101",
           "SLURM_JOB_NAME": JOB, "HOME": str(tmp_path)}
    if sweep:
        env.update(SLURM_ARRAY_JOB_ID="900", SLURM_ARRAY_TASK_ID="0", SLURM_JOB_NAME="dino-sweep-0a0b0c0d")
    out = tmp_path / "out.txt"
    with open(out, "wb") as fh:
        proc = subprocess.Popen(["bash", str(tmp_path / "array.sbatch" if sweep else script)], stdout=fh, stderr=fh,
                                env=env)
        if usr1:
            end = time.time() + 20
            while not (tmp_path / "started").exists():
                assert time.time() < end and proc.poll() is None, out.read_text()
                time.sleep(0.05)
            proc.send_signal(signal.SIGUSR1)
        rc = proc.wait(timeout=30)
    hops = jdir / "meta" / "retries.jsonl"
    sb = tmp_path / "sbatch.args"
    log = jdir / "slurm-logs" / f"{JOB}-900_0" / "main.out"  # the array task's output goes to the trial's log folder
    return {"rc": rc, "out": out.read_text() + (log.read_text() if sweep and log.exists() else ""), "array": array,
            "sbatch_ref": (tmp_path / "sbatch.ref").read_text().strip() if sb.exists() else None, "marker": (jdir / "meta" / "exit.json").exists(),
            "hops": [json.loads(x) for x in hops.read_text().splitlines()] if hops.exists() else [],
            "sbatch": sb.read_text().splitlines() if sb.exists() else None,
            "scancel": (tmp_path / "scancel.args").read_text().split() if (tmp_path / "scancel.args").exists() else None,
            "attempt": (jdir / "meta" / "chain_attempt").read_text().strip()
            if (jdir / "meta" / "chain_attempt").exists() else None}


def test_usr1_resubmits_the_next_attempt_stops_the_program_and_leaves_no_marker(tmp_path):
    got = _run(tmp_path)
    assert got["rc"] == 0 and not got["marker"], got["out"]
    assert got["sbatch"] == ["--parsable", "--hold", f"--job-name={JOB}", "--dependency=afterany:101",
                             str(tmp_path / "jobs" / JOB / "sbatch" / f"job_{JOB}.sbatch")]
    assert got["hops"] == [{"from": "101", "next": "777", "attempt": 2, "reason": "walltime",
                            "run_seconds": got["hops"][0]["run_seconds"]}]
    assert got["attempt"] == "2" and "stopped" in got["out"] and "attempt 1 of 3" in got["out"]


@pytest.mark.parametrize("self_retries", [0, 3])
def test_the_chain_resubmits_its_own_script_with_or_without_the_infrastructure_retry(tmp_path, self_retries):
    """--no-requeue / infra_retries: false render no self-retry: the chain still names the script it resubmits."""
    got = _run(tmp_path, self_retries=self_retries)
    script = tmp_path / "jobs" / JOB / "sbatch" / f"job_{JOB}.sbatch"
    assert f"TAO_SCRIPT=\"$TAO_JOB_DIR\"/sbatch/job_{JOB}.sbatch" in script.read_text()
    assert got["sbatch"] is not None and got["sbatch"][-1] == str(script), got["out"]
    assert [h["next"] for h in got["hops"]] == ["777"] and got["attempt"] == "2" and not got["marker"]


def test_a_sweep_trial_chains_from_its_array_task_and_the_next_attempt_is_a_job_of_its_own(tmp_path):
    """The array's batch shell gets USR1 (it runs the trial's script in place), the hop names the trial's array
    task (the record's id, so status follows it), and the next attempt does not inherit the array reference."""
    got = _run(tmp_path, sweep=True)
    assert "--signal=B:USR1@30" in render.parse_directives(got["array"])
    assert got["rc"] == 0 and not got["marker"], got["out"]
    assert [(h["from"], h["next"], h["attempt"]) for h in got["hops"]] == [("900_0", "777", 2)]
    assert got["sbatch"][3] == "--dependency=afterany:101"  # the task's own job id
    assert got["sbatch_ref"] == "unset"  # its logs and exit marker are its own (<name>-777), not 900_0's
    assert "sweep trial 0" in got["out"] and "stopped" in got["out"]
    hop = slurm_status.follow_retries((tmp_path / "jobs" / JOB / "meta" / "retries.jsonl").read_text(), "900_0")
    assert hop and hop["next"] == "777" and hop["reason"] == "walltime"


def test_the_next_attempt_resumes_from_the_newest_checkpoint(tmp_path):
    got = _run(tmp_path, attempt=2, checkpoint="model_epoch_011.pth")
    newest = tmp_path / "results" / JOB / "train" / "model_epoch_011.pth"
    assert f"argv: train -e spec.yaml train.resume_training_checkpoint_path={newest}" in got["out"]
    assert "attempt 2 of 3 (wall-time chain; 100s run before it)" in got["out"]


def test_the_last_attempt_is_not_resubmitted(tmp_path):
    got = _run(tmp_path, attempt=3, max_attempts=3)
    assert got["sbatch"] is None and got["hops"] == [] and "was the last (--max-attempts 3)" in got["out"]
    assert got["marker"]  # it ended: the marker tells status how


def test_a_program_that_finishes_during_the_run_on_drops_the_held_next_attempt(tmp_path):
    """USR1 came while the last epoch was ending: the next attempt was submitted held, and is canceled (never
    released) once the program ended by itself; the run ends as a plain run with its marker."""
    got = _run(tmp_path, finishes=True)
    assert got["rc"] == 0 and got["marker"] and "training done" in got["out"], got["out"]
    assert got["sbatch"] is not None and "--hold" in got["sbatch"]  # submitted held when USR1 came
    assert got["scancel"] == ["777"] and got["hops"] == [] and got["attempt"] is None
    assert "ended by itself before the wall time: no next attempt" in got["out"]
    assert not (tmp_path / "jobs" / JOB / "slurm-logs" / f"{JOB}-777").exists()


def test_a_run_that_ends_before_the_wall_time_is_a_plain_run(tmp_path):
    got = _run(tmp_path, usr1=False)
    assert got["rc"] == 0 and got["marker"] and got["sbatch"] is None and "argv: train" in got["out"]


# ------------------------------------------------------------------ status and cancel follow the chain
def _chained(slurm) -> dict:
    rec = slurm_record()
    return records.mark(rec["id"], "RUNNING", backend_ref="slurm:101",
                        backend={"walltime_chain": True, "max_attempts": 3})


def test_status_follows_the_next_attempt_under_the_same_record(slurm):
    rec = _chained(slurm)
    hops = rec["backend"]["staged_dir"] + "/meta/retries.jsonl"
    line = '{"from":"101","next":"102","attempt":2,"reason":"walltime","run_seconds":118}\n'
    slurm.ssh("SWEEP", sweep_answer(sacct=[sacct_row("101", rec["id"], "COMPLETED", "0:0")], markers={hops: line}))
    (view,) = platform.refresh([records.load(rec["id"])])
    now = records.load(rec["id"])
    assert now["backend_ref"] == "slurm:102" and now["backend"]["slurm_job_id"] == "102"
    assert now["backend"]["chain_attempt"] == 2 and now["backend"]["chain_seconds"] == 118
    assert view.state == "PENDING" and "continued as SLURM job 102 (attempt 2 of 3, 1m58s run so far)" in view.message
    assert view.attempt == 2 and view.to_dict()["chain_seconds"] == 118
    slurm.ssh("SWEEP", sweep_answer(squeue=[squeue_row("102", "RUNNING", rec["id"])], markers={hops: line}))
    (view,) = platform.refresh([records.load(rec["id"])])
    assert view.state == "RUNNING" and "attempt 2 of 3 (1m58s run before it)" in view.message
    slurm.ssh("scancel", "")
    slurm.ssh("CANCEL_NAME", "")
    (view,), _ = platform.cancel("slurm", [rec["id"]])
    assert view.state == "CANCELED"
    assert [c.words for c in slurm.of("ssh") if c.words[:1] == ["scancel"]] == [["scancel", "102"]]
    assert [c.args for c in slurm.ssh_calls("CANCEL_NAME")] == [[rec["id"]]]  # a job it resubmitted meanwhile goes too


def test_follow_retries_reads_the_reason():
    hop = slurm_status.follow_retries('{"from":"1","next":"2","attempt":2,"reason":"walltime","run_seconds":5}\n', "1")
    assert hop["reason"] == "walltime" and hop["run_seconds"] == 5
    old = slurm_status.follow_retries('{"from":"1","next":"2","attempt":1,"failed_on":"n","excluded":"n"}\n', "1")
    assert old["reason"] == "infra"



def test_a_multi_node_chain_renders_and_passes_shellcheck():
    two = resources.resolve({"partition": "local", "cpus_per_task": 1, "num_gpus": 16, "time_minutes": 30}, {})
    c = chain.settings({"command": ["x"], "action": "train", "max_attempts": 2}, two)
    text = render.render(render.ScriptInput(job_id=JOB, job_dir="/l/jobs/j", results_parent="/l/results",
                                            command=["x", "-e", "s"], resources=two, runtime="none", chain=c,
                                            action="train"))
    render.lint(text)
    assert two.nodes == 2 and 'tao-task \\\n"${tao_cmd[@]}" &' in text and "--signal=B:USR1@300" in text
