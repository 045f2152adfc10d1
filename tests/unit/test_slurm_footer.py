"""The rendered job script's own end (exit marker, self-resubmission) run under bash with stand-in SLURM clients."""
from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from taobank.platforms.slurm import render, resources, storage

JOB = "dino-train-1a2b3c4d"
STANDINS = {
    # srun: run what follows "--" (once: the stand-in node count does not matter for the footer)
    "srun": 'while [ "$#" -gt 0 ] && [ "$1" != -- ]; do shift; done; shift; exec "$@"',
    # sbatch: keep its argv and its environment, answer a job id
    "sbatch": 'printf "%s\\n" "$@" > "$TAO_T/sbatch.args"; env > "$TAO_T/sbatch.env"; echo 555',
    "scontrol": 'if [ "$1 $2" = "show hostnames" ]; then printf "%s\\n" $TAO_T_NODES; fi',
    "sinfo": 'printf "%s\\n" $TAO_T_PARTITION',
    "scancel": "true",
}


def run_job(tmp_path: Path, command: list[str], *, nodes: int = 1, secrets: dict[str, str] | None = None,
            partition: str = "n1 n2 n3 n4", timeout: tuple[int, int] | None = None, old_log: str = "",
            excluded: str = "", self_retries: int = 3, poller_retries: bool = True, ref: str | None = None) -> dict:
    """``ref``: run as a sweep trial does, in array task ``ref`` (the array's dispatcher exports TAO_SLURM_JOB_REF
    and sends the output to ``<name>-<ref>``)."""
    res = resources.resolve({"partition": "local", "cpus_per_task": 1, "num_gpus": nodes, "gpus_per_node": 1}, {})
    if timeout:
        res = dataclasses.replace(res, timeout_seconds=timeout[0], kill_grace_seconds=timeout[1])
    jdir = tmp_path / "jobs" / JOB
    inp = render.ScriptInput(job_id=JOB, job_dir=str(jdir), results_parent=str(tmp_path / "results"), command=command,
                             resources=res, runtime="none", has_credentials=bool(secrets),
                             secret_names=tuple(secrets or ()), self_retries=self_retries,
                             poller_retries=poller_retries)
    text = render.render(inp)
    render.lint(text)
    for d in ("meta", "sbatch", f"slurm-logs/{JOB}-{ref or 101}"):
        (jdir / d).mkdir(parents=True, exist_ok=True)
    (jdir / "sbatch" / f"job_{JOB}.sbatch").write_text(text)
    if secrets:
        (jdir / storage.CREDS_FILE).parent.mkdir(parents=True, exist_ok=True)
        (jdir / storage.CREDS_FILE).write_text(storage.credentials_text(secrets))
    if excluded:
        (jdir / "meta" / "excluded_nodes").write_text(excluded + "\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in STANDINS.items():
        f = bin_dir / name
        f.write_text("#!/bin/bash\n" + body + "\n")
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    node_names = " ".join(f"n{i + 1}" for i in range(nodes))
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TAO_T": str(tmp_path), "TAO_T_NODES": node_names,
           "TAO_T_PARTITION": partition, "SLURM_JOB_ID": "101", "SLURM_JOB_NAME": JOB, "SLURMD_NODENAME": "n1",
           "SLURM_JOB_NODELIST": node_names.replace(" ", ","), "SLURM_JOB_NUM_NODES": str(nodes),
           "SLURM_JOB_PARTITION": "local", "SLURM_NODEID": "0", "HOME": str(tmp_path),
           **({"TAO_SLURM_JOB_REF": ref} if ref else {})}
    logs = jdir / "slurm-logs" / f"{JOB}-{ref or 101}"
    (logs / "main.err").write_text(old_log)
    with open(logs / "main.out", "ab") as out, open(logs / "main.err", "ab") as err:
        rc = subprocess.run(["bash", str(jdir / "sbatch" / f"job_{JOB}.sbatch")], stdout=out, stderr=err, env=env,
                            timeout=60).returncode
    hops = jdir / "meta" / "retries.jsonl"
    sb = tmp_path / "sbatch.args"
    return {"rc": rc, "out": (logs / "main.out").read_text(), "err": (logs / "main.err").read_text(),
            "hops": [json.loads(line) for line in hops.read_text().splitlines()] if hops.exists() else [],
            "sbatch": sb.read_text().splitlines() if sb.exists() else None,
            "sbatch_env": (tmp_path / "sbatch.env").read_text() if sb.exists() else "",
            "marker": (jdir / storage.MARKER_FILE).exists(),
            "marker_text": (jdir / storage.MARKER_FILE).read_text() if (jdir / storage.MARKER_FILE).exists() else "", "creds": (jdir / storage.CREDS_FILE).exists()}


def fails_with(line: str) -> list[str]:
    return ["bash", "-c", 'echo "$1" >&2; exit 1', "tao", line]


NCCL = "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12"


def test_an_infrastructure_failure_resubmits_without_the_secrets_in_its_environment(tmp_path):
    secret = "s3cr3t-" + "x" * 20
    job = run_job(tmp_path, ["bash", "-c", 'test "$NGC_API_KEY" = "$1" && echo "$2" >&2; exit 1', "tao", secret,
                             "x:1:2 [0] " + NCCL], secrets={"NGC_API_KEY": secret})
    assert job["sbatch"] is not None and job["hops"][0]["next"] == "555", job  # the command did see the secret
    assert secret not in job["sbatch_env"] and "NGC_API_KEY" not in job["sbatch_env"]
    assert "--exclude=n1" in job["sbatch"] and not job["marker"]


def test_a_sweep_trial_s_retry_is_a_job_of_its_own_and_its_hop_names_the_array_task(tmp_path):
    """The trial runs in array task 900_0 (its record's id): the hop starts there, so status follows it; the retry
    does not inherit TAO_SLURM_JOB_REF, so it reads its own log folder and writes its exit marker under its id."""
    from taobank.platforms.slurm import status as slurm_status

    job = run_job(tmp_path, fails_with(NCCL), ref="900_0")
    assert [(h["from"], h["next"]) for h in job["hops"]] == [("900_0", "555")], job
    assert "TAO_SLURM_JOB_REF" not in job["sbatch_env"]
    assert slurm_status.follow_retries("\n".join(json.dumps(h) for h in job["hops"]), "900_0")["next"] == "555"
    # the retry as SLURM runs it (the environment sbatch passed on, its own id): it fails again, past the limit
    (tmp_path / "jobs" / JOB / "meta" / "attempts").write_text("3\n")
    env = dict(line.split("=", 1) for line in job["sbatch_env"].splitlines() if "=" in line)
    again = run_job(tmp_path, fails_with(NCCL), ref=env.get("TAO_SLURM_JOB_REF"))
    assert "retry limit 3 reached" in again["out"], again
    assert json.loads(again["marker_text"])["slurm_job_id"] == "101"


def test_a_program_error_writes_the_marker_and_never_resubmits(tmp_path):
    job = run_job(tmp_path, fails_with("Traceback: ValueError"))
    assert job["sbatch"] is None and job["marker"] and job["rc"] == 1


@pytest.mark.parametrize("line,oom", [
    ("srun: error: n1: task 0: Out Of Memory", True),  # recorded: cgroup v1 on the local cluster
    ("slurmstepd-n1: error: Detected 1 oom-kill event(s) in StepId=101.0. Some of your processes may have been "
     "killed by the cgroup out-of-memory handler.", True),
    ("slurmstepd: error: Step 101.0 exceeded memory limit (614400 > 102400), being killed", True),  # OverMemoryKill
    ("MemoryError: the program's own words", False),
])
def test_the_marker_says_a_step_was_killed_for_memory_from_this_runs_log_only(tmp_path, line, oom):
    """SLURM's job line often says FAILED 1:0 for a step it killed OUT_OF_MEMORY: the marker carries the cause."""
    job = run_job(tmp_path, fails_with(line), old_log="srun: error: n1: task 0: Out Of Memory\n")
    assert json.loads(job["marker_text"])["oom"] is oom, job
    assert json.loads(run_job(tmp_path, ["true"])["marker_text"])["oom"] is False


@pytest.mark.parametrize("line", ["slurmstepd: error: *** JOB 101 ON n1 CANCELLED DUE TO NODE FAILURE ***",
                                  "slurmstepd: error: *** JOB 101 ON n1 CANCELLED DUE TO PREEMPTION ***"])
def test_node_failure_and_preemption_are_left_to_slurm_requeue(tmp_path, line):
    job = run_job(tmp_path, fails_with(line))
    assert job["sbatch"] is None and job["marker"]


def test_an_earlier_runs_log_lines_do_not_resubmit_a_requeued_run(tmp_path):
    job = run_job(tmp_path, fails_with("Traceback: ValueError"), old_log=f"x:1:2 [0] {NCCL}\n")
    assert job["sbatch"] is None and job["marker"]


def test_a_run_killed_after_the_kill_grace_counts_as_timed_out_and_is_never_resubmitted(tmp_path):
    job = run_job(tmp_path, ["bash", "-c", f'trap "" TERM; echo "{NCCL}" >&2; sleep 10'], timeout=(1, 1))
    marker = json.loads((tmp_path / "jobs" / JOB / storage.MARKER_FILE).read_text())
    assert job["rc"] == 137 and marker["timed_out"] is True and job["sbatch"] is None


def test_multi_node_excludes_only_the_node_that_printed_the_failure(tmp_path):
    job = run_job(tmp_path, fails_with(f"n3:4242:4250 [2] {NCCL}"), nodes=4, partition="n1 n2 n3 n4 n5 n6")
    assert "--exclude=n3" in job["sbatch"] and job["hops"][0]["failed_on"] == "n3"


def test_multi_node_that_cannot_tell_the_node_excludes_none(tmp_path):
    every = "; ".join(f"echo 'n{i}:1:2 [0] {NCCL}' >&2" for i in (1, 2, 3, 4))
    for command in (fails_with(NCCL), ["bash", "-c", every + "; exit 1"]):
        job = run_job(tmp_path, command, nodes=4, partition="n1 n2 n3 n4 n5 n6")
        assert not [a for a in job["sbatch"] if a.startswith("--exclude")], job["sbatch"]
        (tmp_path / "sbatch.args").unlink()
        (tmp_path / "jobs" / JOB / "meta" / "retries.jsonl").unlink()


def test_exclusions_are_capped_so_the_partition_can_still_hold_the_job(tmp_path):
    job = run_job(tmp_path, fails_with(f"n3:4242:4250 [2] {NCCL}"), nodes=4, partition="n1 n2 n3 n4 n5 n6",
                  excluded="n7,n8")
    assert "--exclude=n8,n3" in job["sbatch"]  # 6 nodes, 4 needed: 2 exclusions at most, the oldest goes
    job = run_job(tmp_path, fails_with(f"n3:4242:4250 [2] {NCCL}"), nodes=4, partition="")  # sinfo says nothing
    assert not [a for a in job["sbatch"] if a.startswith("--exclude")]


SECRET = {"HF_TOKEN": "hf_" + "q" * 30}


@pytest.mark.parametrize("self_retries", [3, 0])
@pytest.mark.parametrize("command", [["true"], ["false"], ["bash", "-c", "echo Traceback >&2; exit 3"]])
def test_a_finished_run_removes_its_credentials_itself(tmp_path, self_retries, command):
    """Success or a program failure ends the job: the credentials leave the shared filesystem at once."""
    job = run_job(tmp_path, command, secrets=SECRET, self_retries=self_retries)
    assert job["marker"] and not job["creds"]


def test_a_run_that_resubmitted_itself_keeps_its_credentials(tmp_path):
    job = run_job(tmp_path, fails_with(NCCL), secrets=SECRET)
    assert job["hops"] and job["creds"]


def test_an_infrastructure_failure_keeps_the_credentials_for_the_status_verb_retry(tmp_path):
    job = run_job(tmp_path, fails_with(NCCL), secrets=SECRET, self_retries=0)
    assert not job["hops"] and job["creds"]


def test_without_any_retry_an_infrastructure_failure_removes_the_credentials(tmp_path):
    job = run_job(tmp_path, fails_with(NCCL), secrets=SECRET, self_retries=0, poller_retries=False)
    assert not job["hops"] and not job["creds"]


def test_a_self_retrying_job_past_its_retry_limit_removes_the_credentials(tmp_path):
    jdir = tmp_path / "jobs" / JOB / "meta"
    jdir.mkdir(parents=True)
    (jdir / "attempts").write_text("3\n")
    job = run_job(tmp_path, fails_with(NCCL), secrets=SECRET)
    assert not job["hops"] and not job["creds"]
