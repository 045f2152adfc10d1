"""setup-nvidia-gpu-host.sh --check-only: the parser of nvidia-smi / nvidia-ctk output.

This machine has no GPU: the 'missing' cases run with a PATH that holds only
the basic tools; the 'present' cases put small fake nvidia-smi / nvidia-ctk /
enroot programs (printing recorded output shapes) first on that PATH.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[2]
SCRIPT = BANK / "skills/tao-setup-nvidia-gpu-host/scripts/setup-nvidia-gpu-host.sh"
BASIC_TOOLS = ["bash", "sed", "sort", "head", "tr", "dirname", "cat", "uname", "id", "grep"]

SMI_HEADER = """\
Tue Dec  2 10:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver}              Driver Version: {driver}      CUDA Version: {cuda}     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:19:00.0 Off |                    0 |
+-----------------------------------------+------------------------+----------------------+
"""


def _bin(tmp_path: Path) -> Path:
    b = tmp_path / "bin"
    b.mkdir(exist_ok=True)
    for tool in BASIC_TOOLS:
        real = shutil.which(tool)
        assert real, f"{tool} missing on this host"
        if not (b / tool).exists():
            (b / tool).symlink_to(real)
    py = b / "python3"
    if not py.exists():
        py.symlink_to(os.path.realpath(sys.executable))
    return b


def _fake(b: Path, name: str, body: str) -> None:
    p = b / name
    p.write_text("#!/bin/bash\n" + body)
    p.chmod(0o755)


def fake_smi(b: Path, driver: str, cuda: str) -> None:
    header = SMI_HEADER.format(driver=driver, cuda=cuda)
    # 8 GPUs: one driver line each (a "| head" under pipefail used to lose the value here)
    lines = "\\n".join([driver] * 8)
    _fake(b, "nvidia-smi", f'case "$*" in *--query-gpu=driver_version*) printf "{lines}\\n" ;; *) cat <<"EOF"\n{header}EOF\n;; esac\n')


def fake_ctk(b: Path, version: str) -> None:
    _fake(b, "nvidia-ctk", f'echo "NVIDIA Container Toolkit CLI version {version}"; echo "commit: 1a2b3c4"\n')


def fake_enroot(b: Path) -> None:
    _fake(b, "enroot", 'echo "3.5.0"\n')


def run(b: Path, *args: str, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": str(b), "HOME": os.environ.get("HOME", "/root"), "TAO_SKILL_BANK_PATH": str(BANK)}
    env.update(extra_env or {})
    return subprocess.run([str(b / "bash"), str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)


def test_script_is_executable_and_shellcheck_clean():
    assert os.access(SCRIPT, os.X_OK)
    proc = subprocess.run(["shellcheck", "-s", "bash", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


def test_no_gpu_tools_gives_missing_lines_and_exit_1(tmp_path):
    b = _bin(tmp_path)
    proc = run(b, "--backend", "kubernetes", "--check-only")
    assert proc.returncode == 1
    out = proc.stdout.splitlines()
    assert "MISSING: NVIDIA driver: nvidia-smi not on PATH (need driver branch >= 580, CUDA >= 13.0)" in out
    assert "MISSING: NVIDIA Container Toolkit: nvidia-ctk not on PATH (need >= 1.19.0)" in out
    assert out[-1].startswith("NOT READY: GPU host runtime for kubernetes; fix the MISSING lines")


def test_ready_host_passes(tmp_path):
    b = _bin(tmp_path)
    fake_smi(b, "580.65.06", "13.0")
    fake_ctk(b, "1.19.0")
    proc = run(b, "--backend", "kubernetes", "--check-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "OK: NVIDIA driver 580.65.06 (branch >= 580)",
        "OK: CUDA 13.0 supported by the driver (>= 13.0)",
        "OK: NVIDIA Container Toolkit 1.19.0 (>= 1.19.0)",
        "READY: GPU host runtime for kubernetes",
    ]


def test_newer_versions_pass(tmp_path):
    b = _bin(tmp_path)
    fake_smi(b, "590.10.02", "13.1")
    fake_ctk(b, "1.20.3")
    assert run(b, "--backend", "kubernetes", "--check-only").returncode == 0


@pytest.mark.parametrize(
    "driver,cuda,ctk,missing",
    [
        ("570.124.06", "12.8", "1.19.0", "MISSING: NVIDIA driver 570.124.06 is older than branch 580"),
        ("580.65.06", "12.9", "1.19.0", "MISSING: CUDA 12.9 supported by the driver is older than 13.0"),
        ("580.65.06", "13.0", "1.17.4", "MISSING: NVIDIA Container Toolkit 1.17.4 is older than 1.19.0"),
        # numeric, not text, comparison: 1.9 < 1.19
        ("580.65.06", "13.0", "1.9.0", "MISSING: NVIDIA Container Toolkit 1.9.0 is older than 1.19.0"),
    ],
)
def test_old_parts_are_missing(tmp_path, driver, cuda, ctk, missing):
    b = _bin(tmp_path)
    fake_smi(b, driver, cuda)
    fake_ctk(b, ctk)
    proc = run(b, "--backend", "kubernetes", "--check-only")
    assert proc.returncode == 1
    assert missing in proc.stdout.splitlines()


def test_nvidia_smi_without_gpu(tmp_path):
    b = _bin(tmp_path)
    _fake(b, "nvidia-smi", 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2; exit 9\n')
    fake_ctk(b, "1.19.0")
    proc = run(b, "--backend", "kubernetes", "--check-only")
    assert proc.returncode == 1
    assert "MISSING: NVIDIA driver: nvidia-smi found no GPU or no driver (need branch >= 580)" in proc.stdout.splitlines()


def test_slurm_backend_needs_enroot(tmp_path):
    b = _bin(tmp_path)
    fake_smi(b, "580.65.06", "13.0")
    fake_ctk(b, "1.19.0")
    proc = run(b, "--backend", "slurm", "--check-only")
    assert proc.returncode == 1
    assert "MISSING: enroot not on PATH (Pyxis needs it on every compute node)" in proc.stdout.splitlines()
    fake_enroot(b)
    proc = run(b, "--backend", "slurm", "--check-only")
    assert proc.returncode == 0, proc.stdout
    assert "OK: enroot 3.5.0" in proc.stdout.splitlines()


def test_minimums_come_from_versions_yaml(tmp_path):
    b = _bin(tmp_path)
    fake_smi(b, "580.65.06", "13.0")
    fake_ctk(b, "1.19.0")
    versions = tmp_path / "versions.yaml"
    versions.write_text((BANK / "versions.yaml").read_text().replace('driver_branch: "580"', 'driver_branch: "600"'))
    proc = run(b, "--backend", "kubernetes", "--check-only", extra_env={"TAO_VERSIONS_FILE": str(versions)})
    assert proc.returncode == 1
    assert "MISSING: NVIDIA driver 580.65.06 is older than branch 600" in proc.stdout.splitlines()


@pytest.mark.parametrize(
    "args,message",
    [
        ([], "error: --backend must be kubernetes or slurm (see --help)"),
        (["--backend", "lsf", "--check-only"], "error: --backend must be kubernetes or slurm (see --help)"),
        (["--backend", "slurm"], "error: choose --check-only or --install (see --help)"),
        (["--backend", "slurm", "--check-only", "--force"], "error: unknown argument '--force' (see --help)"),
    ],
)
def test_usage_errors_exit_2(tmp_path, args, message):
    proc = run(_bin(tmp_path), *args)
    assert proc.returncode == 2
    assert proc.stderr.strip() == message


def test_install_without_yes_prints_the_plan_and_changes_nothing(tmp_path):
    b = _bin(tmp_path)
    marker = tmp_path / "apt-ran"
    _fake(b, "apt-get", f'touch "{marker}"\n')
    proc = run(b, "--backend", "kubernetes", "--install")
    assert proc.returncode == 1
    out = proc.stdout.splitlines()
    assert out[0].startswith("Plan for kubernetes on ")
    assert any("apt-get install -y cuda-drivers-580" in ln for ln in out)
    assert any("nvidia-container-toolkit=1.19.0-1" in ln for ln in out)
    assert any("nvidia-ctk runtime configure --runtime=containerd" in ln for ln in out)
    assert out[-1] == "NOT RUN: re-run with --install --yes after the host owner approves these steps"
    assert not marker.exists()


def test_install_yes_needs_root(tmp_path):
    b = _bin(tmp_path)
    marker = tmp_path / "apt-ran"
    _fake(b, "apt-get", f'touch "{marker}"\n')
    (b / "id").unlink()
    _fake(b, "id", "echo 1000\n")
    proc = run(b, "--backend", "slurm", "--install", "--yes")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: --install --yes must run as root (sudo)"
    assert not any("nvidia-ctk runtime configure" in ln for ln in proc.stdout.splitlines())  # k8s-only step
    assert not marker.exists()


# ------------------------------------------------------------------ the SKILL.md step-0 block, run as written

def _step0() -> str:
    from devtools.skill_lint import BANK_LINE, code_blocks

    text = (BANK / "skills/tao-setup-nvidia-gpu-host/SKILL.md").read_text()
    (blk,) = [b for b in code_blocks(text) if any("TAO_K8S_SKIP_NODE_RUNTIME_CHECK:-0" in ln for ln in b.lines)]
    return f"{BANK_LINE}\n" + "\n".join(blk.lines) + "\necho after\n"


def test_step0_fails_clearly_without_gpu_runtime(tmp_path):
    b = _bin(tmp_path)
    env = {"PATH": str(b), "TAO_SKILL_BANK_PATH": str(BANK)}
    proc = subprocess.run([str(b / "bash"), "-c", _step0()], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    out = proc.stdout.splitlines()
    assert out[-1].startswith("MISSING: TAO Kubernetes GPU node runtime is not ready.")
    assert "after" not in out


def test_step0_skipped_on_managed_nodes(tmp_path):
    b = _bin(tmp_path)
    env = {"PATH": str(b), "TAO_SKILL_BANK_PATH": str(BANK), "TAO_K8S_SKIP_NODE_RUNTIME_CHECK": "1"}
    proc = subprocess.run([str(b / "bash"), "-c", _step0()], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == ["SKIPPED: GPU node runtime check (TAO_K8S_SKIP_NODE_RUNTIME_CHECK=1)", "after"]


def test_step0_passes_on_a_ready_node(tmp_path):
    b = _bin(tmp_path)
    fake_smi(b, "580.65.06", "13.0")
    fake_ctk(b, "1.19.0")
    env = {"PATH": str(b), "TAO_SKILL_BANK_PATH": str(BANK)}
    proc = subprocess.run([str(b / "bash"), "-c", _step0()], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[-2:] == ["READY: GPU host runtime for kubernetes", "after"]
