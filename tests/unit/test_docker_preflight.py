"""tao_docker.py preflight, one line per check, against recorded answers. The nvidia-smi row is the one a
real H200 host printed (driver 580.159.04) for the query the bank sends."""
from __future__ import annotations

import json

from taobank.platforms.docker import gpus

H200 = "0, GPU-25f747c7-5737-5148-a3e8-1abaace93b36, NVIDIA H200, 580.159.04, 9.0, 143771\n"
INFO = {"ServerVersion": "28.2.2", "Runtimes": {"runc": {}, "nvidia": {}}, "SecurityOptions": []}


def test_the_real_h200_row_parses_and_passes_the_pins():
    (g,) = gpus.parse(H200)
    assert (g.index, g.name, g.driver, g.compute_cap, g.memory_mib) == ("0", "NVIDIA H200", "580.159.04", "9.0", 143771)
    assert gpus.driver_ok(g.driver) and gpus.capability_ok(g.compute_cap)
    assert not gpus.driver_ok("575.57.08") and not gpus.capability_ok("7.0")


def _host(fake, monkeypatch, rows: str | None, info: dict = INFO):
    monkeypatch.setattr("shutil.which", lambda n: None if (n.startswith("nvidia") and rows is None) else f"/usr/bin/{n}")
    fake.on("docker", lambda c: c.argv[1] == "info", json.dumps(info))
    if rows is not None:
        fake.on("nvidia-smi", lambda c: True, rows)


def test_a_gpu_host_passes_with_one_line_per_check(fake, cli, monkeypatch):
    _host(fake, monkeypatch, H200)
    out = cli("tao_docker.py", "preflight")
    assert out.rc == 0, out
    assert out.out.splitlines() == [
        "OK: docker engine 28.2.2 reachable at the default socket",
        "OK: NVIDIA Container Toolkit present (nvidia runtime)",
        "OK: 1 GPU(s): 0 NVIDIA H200",
        "OK: driver 580.159.04 meets 580.65.06 (CUDA 13.0)",
        "OK: compute capability 9.0 >= 7.5",
    ]


def test_old_driver_and_old_gpu_are_missing(fake, cli, monkeypatch):
    _host(fake, monkeypatch, "0, GPU-1234abcd-0000, Tesla V100, 535.104.05, 7.0, 16384\n")
    out = cli("tao_docker.py", "preflight")
    assert out.rc == 1
    assert "MISSING: driver 535.104.05 is older than 580.65.06 (CUDA 13.0): update the driver (branch 580)" in out.out
    assert "MISSING: GPU 0 (7.0) below compute capability 7.5" in out.out


def test_a_cpu_only_host_says_what_was_not_run(fake, cli, monkeypatch):
    _host(fake, monkeypatch, None, {"ServerVersion": "20.10.24", "Runtimes": {"runc": {}}})
    out = cli("tao_docker.py", "preflight")
    assert out.rc == 1 and "MISSING: no NVIDIA runtime and no CDI devices" in out.out
    out = cli("tao_docker.py", "preflight", "--no-gpus")
    assert out.rc == 0, out
    assert "INFO: GPU count, driver and compute capability: not checked (--no-gpus)" in out.out
