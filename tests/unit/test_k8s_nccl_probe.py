"""Kubernetes NCCL probe pieces that need no cluster: the script text, the shell command, the spec."""
from __future__ import annotations

import ast
import shlex
import subprocess
import sys

import pytest

from taobank import nccl_probe as core
from taobank import pins
from taobank.errors import TaoError
from taobank.kubernetes import nccl_probe


def test_probe_script_is_valid_python_even_after_shell_quoting():
    # the exact check the brief asks for: python3 parses the script (torch is not installed, so never run it)
    proc = subprocess.run([sys.executable, "-c", "import ast,sys; ast.parse(sys.stdin.read())"],
                          input=core.SCRIPT, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    tree = ast.parse(core.SCRIPT)
    calls = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert {"init_process_group", "all_reduce", "destroy_process_group"} <= calls
    assert '"nccl"' in core.SCRIPT


def test_probe_command_runs_the_script_under_timeout_with_the_rendezvous_env():
    cmd = nccl_probe.probe_command(90)
    argv = shlex.split(cmd)  # sh -c word splitting: the script survives quoting byte for byte
    assert argv[:4] == ["timeout", "-k", "10", "90"]
    assert argv[4] == "torchrun" and "--no-python" in argv
    assert argv[-3:-1] == ["python3", "-c"] and argv[-1] == core.SCRIPT
    for var in ("NNODES", "NPROC_PER_NODE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"):
        assert f'"${var}"' in cmd
    with pytest.raises(TaoError):
        nccl_probe.probe_command(0)


def test_spec_defaults_to_the_pinned_image_and_takes_the_cluster_nccl_env(tmp_path, monkeypatch):
    env_file = tmp_path / "nccl.env"
    env_file.write_text("NCCL_SOCKET_IFNAME=eth0\nNCCL_IB_HCA=mlx5\n")
    monkeypatch.setenv("TAO_K8S_NCCL_ENV", str(env_file))
    spec = nccl_probe.build_spec(nodes=2, gpus=4, image=None, timeout=120)
    assert spec["image"] == pins.resolve("images.nccl_probe") == "nvcr.io/nvidia/pytorch:25.08-py3"
    assert spec["nodes"] == 2 and spec["gpus"] == 4
    assert spec["nccl_env"] == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5"}
    assert spec["command"] == nccl_probe.probe_command(120)
    assert spec["active_deadline_seconds"] == 120 + core.WAIT_SLACK_S


@pytest.mark.parametrize("nodes,gpus", [(1, 1), (2, 0)])
def test_spec_refuses_a_probe_that_tests_nothing(nodes, gpus):
    with pytest.raises(TaoError):
        nccl_probe.build_spec(nodes=nodes, gpus=gpus, image="x", timeout=10)
