"""The tier A output-copy wrapper as the kubelet hands it to a real POSIX sh (dash).

Each case renders the Job, applies the kubelet's ``$(VAR)``/``$$`` expansion to the
container command, runs it under /bin/sh and checks the exit code and the copy.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from taobank.platforms.kubernetes.render import find, render_manifests

JOB_ID = "dino-train-1a2b3c4d"
WS = {"pvc": "ws", "mount_path": "/results"}


def kubelet_expand(arg: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of command/args: ``$$`` -> ``$``, ``$(NAME)`` -> its value when defined."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", sub, arg)


def command_for(argv: list[str]) -> list[str]:
    job = find(render_manifests({"image": "i", "args": argv, "mounts": [WS]}, job_id=JOB_ID, namespace="default"), "Job")
    (main,) = job["spec"]["template"]["spec"]["containers"]
    return [kubelet_expand(a, {}) for a in main["command"]]


def start(tmp_path: Path, argv: list[str], host: str = "p-0") -> tuple[subprocess.Popen, Path]:
    out = tmp_path / f"stdout-{host}"
    env = {"PATH": "/usr/bin:/bin", "TAO_API_RESULTS_DIR": str(tmp_path / "res"), "TAO_API_JOB_ID": JOB_ID,
           "HOSTNAME": f"{host}-{os.getpid()}"}
    with out.open("w") as fh:  # a file, not a pipe: a lingering child must not hold the test up
        proc = subprocess.Popen(command_for(argv), env=env, stdout=fh, stderr=subprocess.STDOUT)
    return proc, out


def log_of(tmp_path: Path, host: str = "p-0") -> Path:
    return tmp_path / "res" / JOB_ID / "logs" / f"{host}-{os.getpid()}.log"


@pytest.mark.parametrize("code", [0, 3])
def test_the_command_exit_code_and_output_come_back(tmp_path, code):
    proc, out = start(tmp_path, ["sh", "-c", f'echo "out $1"; echo err >&2; exit {code}', "x", "a b; $(id)"])
    assert proc.wait(timeout=20) == code
    assert out.read_text() == "out a b; $(id)\nerr\n"
    assert log_of(tmp_path).read_text() == "out a b; $(id)\nerr\n"
    assert not list(log_of(tmp_path).parent.glob(".*"))  # nothing but the log on the volume


def test_an_unwritable_log_folder_still_runs_the_command_with_its_code(tmp_path):
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / JOB_ID).write_text("a file where the folder should be")
    proc, out = start(tmp_path, ["sh", "-c", "echo still ran; exit 4"])
    assert proc.wait(timeout=20) == 4 and out.read_text() == "still ran\n"


def test_an_existing_log_file_that_cannot_be_opened_runs_the_command_alone(tmp_path):
    log_of(tmp_path).mkdir(parents=True)  # a directory where the log file should be: open fails, even for root
    proc, out = start(tmp_path, ["sh", "-c", "echo ran; exit 6"])
    assert proc.wait(timeout=20) == 6 and out.read_text() == "ran\n"


def test_term_reaches_the_command_which_exits_with_its_own_code(tmp_path):
    script = 'trap "echo got-term; exit 7" TERM; echo ready; while :; do sleep 0.1; done'
    proc, out = start(tmp_path, ["sh", "-c", script])
    end = time.time() + 10
    while "ready" not in out.read_text():
        assert time.time() < end and proc.poll() is None, out.read_text()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 7
    assert "got-term" in out.read_text() and "got-term" in log_of(tmp_path).read_text()  # tee kept draining


def test_term_to_a_command_that_does_not_trap_it_is_143(tmp_path):
    proc, out = start(tmp_path, ["sh", "-c", "echo ready; exec sleep 30"])
    end = time.time() + 10
    while "ready" not in out.read_text():
        assert time.time() < end and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 143


def test_a_background_child_holding_the_pipe_does_not_keep_the_wrapper_alive(tmp_path):
    pid_file = tmp_path / "child.pid"
    proc, out = start(tmp_path, ["sh", "-c", 'echo before; sleep 30 & echo "$!" > "$1"; exit 0', "x", str(pid_file)])
    try:
        assert proc.wait(timeout=15) == 0
        os.kill(int(pid_file.read_text()), 0)  # the child still runs: the wrapper did not wait for it
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)  # in a pod, PID 1 exiting ends it
    assert "before" in log_of(tmp_path).read_text() and "before" in out.read_text()
    assert not list(Path("/dev/shm").glob(f".tao-log-p-0-{os.getpid()}.*"))  # the fifo is gone
