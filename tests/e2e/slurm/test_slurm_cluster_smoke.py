"""The local SLURM cluster is real: everything here goes through ``ssh -o BatchMode=yes``
with the pinned known_hosts, exactly as a skill user reaches a login node."""
from __future__ import annotations

import shlex
import time
import uuid
from pathlib import Path

import pytest

from testclusters import slurm as local_slurm
from taobank.run import Result, run

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED"}


def hosts(env: dict[str, str]) -> list[str]:
    return env["SLURM_HOSTNAME"].split(",")


def ssh(env: dict[str, str], command: str, *, stdin: str | None = None, host: str | None = None,
        extra: tuple[str, ...] = ()) -> Result:
    """One ssh round trip to the working login address (the second one)."""
    argv = ["ssh", "-F", env["TAO_SSH_CONFIG"], "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-i", env["SSH_KEY_PATH"], "-l", env["SLURM_USER"], *extra, host or hosts(env)[-1], command]
    return run(argv, stdin=stdin, timeout=60, check=False)


def sbatch(env: dict[str, str], workdir: str, script: str, *opts: str) -> str:
    cmd = " ".join(["sbatch", "--parsable", f"--chdir={shlex.quote(workdir)}",
                    f"--partition={shlex.quote(env['SLURM_PARTITION'])}",
                    f"--account={shlex.quote(env['SLURM_ACCOUNT'])}",  # the cluster requires one
                    *map(shlex.quote, opts)])
    res = ssh(env, cmd, stdin=script)
    assert res.ok, f"sbatch failed: {res.stderr}"
    return res.stdout.strip().split(";")[0]


def sacct(env: dict[str, str], job: str, fields: str = "State,ExitCode", *extra: str) -> list[list[str]]:
    res = ssh(env, f"sacct -n -X -P {' '.join(extra)} -j {job} -o {fields}")
    assert res.ok, res.stderr
    return [line.split("|") for line in res.stdout.splitlines() if line.strip()]


def _pause(since: float) -> float:
    """Seconds between two polls: brisk at first, then every 2 s (each poll is one ssh command)."""
    return min(2.0, 0.3 + (time.monotonic() - since) / 10)


def wait_final(env: dict[str, str], job: str, timeout: float = 300.0) -> tuple[str, str]:
    """Poll sacct until the job's state is terminal (sacct lags a few seconds; a job may first wait PENDING while
    the other e2e tests hold the nodes)."""
    deadline = time.monotonic() + timeout
    last = ("", "")
    while time.monotonic() < deadline:
        rows = sacct(env, job)
        if rows:
            last = (rows[0][0].split()[0], rows[0][1])
            if last[0] in TERMINAL:
                return last
        time.sleep(_pause(deadline - timeout))
    pytest.fail(f"job {job} not terminal after {timeout}s (last sacct: {last})")


def wait_running(env: dict[str, str], job: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ssh(env, f"squeue -h -j {job} -o %T").stdout.strip() == "RUNNING":
            return
        time.sleep(_pause(deadline - timeout))
    pytest.fail(f"job {job} never RUNNING within {timeout}s")


@pytest.fixture(scope="module")
def workdir(slurm_cluster) -> str:
    d = f"{slurm_cluster['SLURM_BASE_RESULTS_DIR']}/smoke-{uuid.uuid4().hex[:8]}"
    assert ssh(slurm_cluster, f"mkdir -p {shlex.quote(d)}").ok
    return d


def test_env_names_both_login_addresses_refusing_first(slurm_cluster):
    assert set(slurm_cluster) >= {
        "SLURM_USER", "SLURM_HOSTNAME", "SSH_KEY_PATH", "TAO_SSH_CONFIG", "TAO_SSH_KNOWN_HOSTS",
        "SLURM_PARTITION", "SLURM_BASE_RESULTS_DIR", "TAO_LOCAL_LUSTRE_ROOT",
    }
    assert slurm_cluster["TAO_SLURM_CONTAINER_RUNTIME"] == "none"
    assert len(hosts(slurm_cluster)) == 2
    # ready: the daemons answer and the nodes are usable; a node a busy machine let miss one heartbeat shows
    # "idle*" for a moment, so the cluster gets 30 s to say so before this fails (with the problem named)
    end = time.time() + 30
    st = local_slurm.status()
    while not st["ready"] and time.time() < end:
        time.sleep(2)
        st = local_slurm.status()
    assert st["ready"] is True, st.get("problem")


def test_refusing_address_really_refuses(slurm_cluster):
    res = ssh(slurm_cluster, "true", host=hosts(slurm_cluster)[0])
    assert res.returncode == 255
    assert "Connection refused" in res.stderr


def test_login_needs_the_pinned_host_key(slurm_cluster, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    res = ssh(slurm_cluster, "true", extra=("-o", f"UserKnownHostsFile={empty}"))
    assert res.returncode == 255
    assert "Host key verification failed" in res.stderr
    ok = ssh(slurm_cluster, "id -un")
    assert ok.ok and ok.stdout.strip() == slurm_cluster["SLURM_USER"]


def test_two_node_job_runs_one_task_per_node(slurm_cluster, workdir):
    script = (
        "#!/bin/bash\n"
        "srun bash -c 'echo \"task $SLURM_NODEID $SLURMD_NODENAME $(getent hosts $SLURMD_NODENAME | cut -d\" \" -f1)\"'\n"
    )
    job = sbatch(slurm_cluster, workdir, script, "--nodes=2", "--ntasks-per-node=1", "--gres=gpu:2",
                 "--output=multi-%j.out")
    # it needs both nodes at once: it waits while the other e2e tests hold either (met: PENDING after 60 s)
    assert wait_final(slurm_cluster, job, timeout=600) == ("COMPLETED", "0:0")
    out = ssh(slurm_cluster, f"cat {shlex.quote(workdir)}/multi-{job}.out").stdout
    tasks = sorted(line.split()[1:] for line in out.splitlines() if line.startswith("task "))
    # distinct SLURM_NODEID per node, and node names resolve to loopback (MASTER_ADDR rendezvous)
    assert tasks == [["0", "node1", "127.0.0.1"], ["1", "node2", "127.0.0.1"]], out


def test_sacct_reports_completed_failed_cancelled(slurm_cluster, workdir):
    ok = sbatch(slurm_cluster, workdir, "#!/bin/bash\necho hello\n", "--output=ok-%j.out")
    bad = sbatch(slurm_cluster, workdir, "#!/bin/bash\nexit 3\n", "--output=bad-%j.out")
    slow = sbatch(slurm_cluster, workdir, "#!/bin/bash\nsleep 600\n", "--output=slow-%j.out")
    assert wait_final(slurm_cluster, ok) == ("COMPLETED", "0:0")
    assert wait_final(slurm_cluster, bad) == ("FAILED", "3:0")
    wait_running(slurm_cluster, slow)
    assert ssh(slurm_cluster, f"scancel {slow}").ok
    assert wait_final(slurm_cluster, slow)[0] == "CANCELLED"
    # the job wrote onto the shared "Lustre" directory the operator sees too
    lustre_file = Path(workdir) / f"ok-{ok}.out"
    assert lustre_file.read_text() == "hello\n"


def test_more_gpus_than_any_node_is_refused_at_submit(slurm_cluster, workdir):
    acct = shlex.quote(slurm_cluster["SLURM_ACCOUNT"])
    res = ssh(slurm_cluster, f"sbatch --chdir={shlex.quote(workdir)} --account={acct} --gres=gpu:100 --wrap=hostname")
    assert res.returncode != 0
    assert "Requested node configuration is not available" in res.stderr


def test_memory_over_limit_is_killed_in_the_documented_form(slurm_cluster, workdir):
    form = local_slurm.status()["memory_kill"]
    script = '#!/bin/bash\npython3 -c "import time; a=bytearray(600*1024*1024); time.sleep(5)"\n'
    job = sbatch(slurm_cluster, workdir, script, "--mem=100M", "--output=oom-%j.out")
    state, code = wait_final(slurm_cluster, job)
    if form == "OUT_OF_MEMORY":
        assert state == "OUT_OF_MEMORY", (state, code)
    else:
        assert (state, code) == ("FAILED", "0:9")


def test_requeued_job_runs_again(slurm_cluster, workdir):
    script = "#!/bin/bash\necho run restart=${SLURM_RESTART_COUNT:-0}\nsleep 3\n"
    job = sbatch(slurm_cluster, workdir, script, "--requeue", "--open-mode=append", "--output=rq-%j.out")
    wait_running(slurm_cluster, job)
    assert ssh(slurm_cluster, f"scontrol requeue {job}").ok
    # the requeued job must leave RUNNING, then run again (cred_expire=10 keeps it short)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and ssh(slurm_cluster, f"squeue -h -j {job} -o %T").stdout.strip() == "RUNNING":
        time.sleep(0.3)
    assert wait_final(slurm_cluster, job, timeout=300) == ("COMPLETED", "0:0")
    history = [row[0] for row in sacct(slurm_cluster, job, "State", "-D")]
    assert history == ["REQUEUED", "COMPLETED"], history
    out = ssh(slurm_cluster, f"cat {shlex.quote(workdir)}/rq-{job}.out").stdout
    runs = [line for line in out.splitlines() if line.startswith("run ")]
    assert runs == ["run restart=0", "run restart=1"], out
    assert "DUE TO JOB REQUEUE" in out


@pytest.mark.exclusive  # kills the shared sshd: another test would meet it down
def test_up_is_idempotent_and_restarts_a_daemon_behind_a_stale_pid_file(slurm_cluster):
    import json
    import os
    import signal

    lay = local_slurm.layout()
    record = lambda: json.loads((lay.state / "cluster.json").read_text())["last_up"]  # noqa: E731
    assert local_slurm.up() == slurm_cluster
    assert record()["started"] == []
    # sshd dies without cleaning up: its pid file stays, naming a dead process
    pidfile = lay.run / "sshd.pid"
    old = int(pidfile.read_text())
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{old}/exe").exists():
        time.sleep(0.1)
    assert pidfile.exists()
    assert local_slurm.up() == slurm_cluster
    assert record()["started"] == ["sshd"]
    assert int(pidfile.read_text()) != old
    assert ssh(slurm_cluster, "id -un").stdout.strip() == slurm_cluster["SLURM_USER"]


def test_cli_env_and_status_agree_with_the_fixture(slurm_cluster, bank):
    import json
    import sys

    cli = [sys.executable, str(bank / "scripts" / "local_cluster.py")]
    assert json.loads(run([*cli, "env", "slurm", "--json"]).stdout) == slurm_cluster
    exports = run([*cli, "env", "slurm"]).stdout.splitlines()
    assert exports[1] == f"export SLURM_HOSTNAME={slurm_cluster['SLURM_HOSTNAME']}"
    st = run([*cli, "status", "slurm", "--json"], check=False)
    assert st.returncode == 0 and json.loads(st.stdout)["ready"] is True


def test_an_account_is_required_and_the_conversion_partition_exists(slurm_cluster, workdir):
    res = ssh(slurm_cluster, f"sbatch --chdir={shlex.quote(workdir)} --wrap=hostname")
    assert res.returncode != 0 and "Job violates accounting/QOS policy" in res.stderr
    job = sbatch(slurm_cluster, workdir, "#!/bin/bash\nhostname\n", "--partition=convert", "--cpus-per-task=1")
    assert wait_final(slurm_cluster, job) == ("COMPLETED", "0:0")
