"""Kubernetes NCCL probe pieces that need no cluster: the script text, the shell command, the spec."""
from __future__ import annotations

import ast
import shlex
import subprocess
import sys

import pytest

from taobank.core import nccl_probe as core
from taobank import pins
from taobank.errors import TaoError
from taobank.platforms.kubernetes import nccl_probe


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
    cmd = core.probe_command(90)
    assert cmd.startswith(core.gpu_precheck())  # no PyTorch: 127; no CUDA GPU: exit 3 (verdict no-gpu)
    argv = shlex.split(cmd[len(core.gpu_precheck()):])  # sh -c word splitting: the script survives byte for byte
    assert argv[:4] == ["timeout", "-k", "10", "90"]
    assert argv[4] == "torchrun" and "--no_python" in argv  # underscore options: every torchrun release
    assert argv[-3:-1] == ["python3", "-c"] and argv[-1] == core.script_for("nccl", 90)
    assert "timeout=datetime.timedelta(seconds=90)" in argv[-1]  # the rendezvous waits as long as the probe
    for var in ("NNODES", "NPROC_PER_NODE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"):
        assert f'"${var}"' in cmd
    with pytest.raises(TaoError):
        core.probe_command(0)


def test_spec_defaults_to_the_pinned_image_and_takes_the_cluster_nccl_env(tmp_path, monkeypatch):
    env_file = tmp_path / "nccl.env"
    env_file.write_text("NCCL_SOCKET_IFNAME=eth0\nNCCL_IB_HCA=mlx5\n")
    monkeypatch.setenv("TAO_K8S_NCCL_ENV", str(env_file))
    spec = nccl_probe.build_spec(nodes=2, gpus=4, image=None, timeout=120)
    assert spec["image"] == pins.resolve("images.nccl_probe") == "nvcr.io/nvidia/pytorch:25.08-py3"
    assert spec["nodes"] == 2 and spec["gpus"] == 4
    assert spec["nccl_env"] == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5"}
    assert spec["command"] == core.probe_command(120)
    assert spec["active_deadline_seconds"] == 120 + core.WAIT_SLACK_S


@pytest.mark.parametrize("nodes,gpus", [(1, 1), (2, 0)])
def test_spec_refuses_a_probe_that_tests_nothing(nodes, gpus):
    with pytest.raises(TaoError):
        nccl_probe.build_spec(nodes=nodes, gpus=gpus, image="x", timeout=10)


def test_probe_cli_passes_a_pull_secret_to_the_submit(cli, monkeypatch):
    """The probe image is on nvcr.io like TAO's: --ngc-pull-secret / --image-pull-secret reach the core submit."""
    from types import SimpleNamespace

    from taobank.core import platform

    sent = []

    class Adapter:
        name, helper = "kubernetes", "tao_k8s.py"

        def submit(self, spec, opts):
            sent.append((spec, opts))
            return SimpleNamespace(id="probe-1")

    def fake_run(platform_name, cluster, spec, submit, **kw):
        job = submit(spec)
        return {"verdict": "ok", "job_id": job, "cached": False, "cluster": cluster, "message": ""}

    monkeypatch.setattr(platform, "get", lambda name: Adapter())
    monkeypatch.setattr(nccl_probe.core, "run", fake_run)
    monkeypatch.setattr(nccl_probe.Kubectl, "cluster_key", lambda self: "ctx@server")
    out = cli("tao_k8s.py", "nccl-probe", "--ngc-pull-secret", "--image-pull-secret", "site-pull",
              "--namespace", "ns1", "--json")
    assert out.rc == 0, out
    ((spec, opts),) = sent
    assert opts.probe and opts.ngc_pull_secret and opts.namespace == "ns1"
    assert spec["image_pull_secret"] == "site-pull"
    sent.clear()
    assert cli("tao_k8s.py", "nccl-probe", "--json").rc == 0
    ((spec, opts),) = sent
    assert not opts.ngc_pull_secret and "image_pull_secret" not in spec


def test_probe_spec_with_an_existing_pull_secret_renders_image_pull_secrets():
    from taobank.platforms.kubernetes import render

    spec = nccl_probe.build_spec(nodes=2, gpus=1, image="nvcr.io/nvidia/pytorch:x", timeout=60,
                                 image_pull_secret="site-pull")
    objs = render.render_manifests(spec, job_id="p-1", namespace="ns", name="p-1")
    (job,) = [o for o in objs if o["kind"] == "Job"]
    assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "site-pull"}]


def test_gloo_cpu_probe_runs_one_python_per_pod_one_pod_per_node_and_asks_for_no_gpu():
    from taobank.platforms.kubernetes import render

    cmd = core.probe_command(90, "gloo-cpu")
    argv = shlex.split(cmd)
    assert argv[:6] == ["timeout", "-k", "10", "90", "python3", "-c"] and argv[6] == core.script_for("gloo-cpu", 90)
    spec = nccl_probe.build_spec(nodes=2, gpus=1, image="img:1", timeout=60, backend="gloo-cpu")
    assert spec["gpus"] == 0 and spec["one_pod_per_node"] is True
    objs = render.render_manifests(spec, job_id="probe-1", namespace="ns")
    pod = render.find(objs, "Job")["spec"]["template"]["spec"]
    assert pod["affinity"] == {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"tao-job-id": "probe-1"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    assert "nvidia.com/gpu" not in str(pod["containers"][0].get("resources"))
    plain = render.render_manifests({**spec, "one_pod_per_node": False}, job_id="probe-1", namespace="ns")
    assert "affinity" not in render.find(plain, "Job")["spec"]["template"]["spec"]
