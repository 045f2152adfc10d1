"""check_host.py: OK/MISSING lines, --json, platform clients, version parsing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[2]
SCRIPT = BANK / "scripts/check_host.py"
sys.path.insert(0, str(BANK / "scripts"))
import check_host  # noqa: E402


def run(*args: str, path: str | None = None, extra: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    env.update(extra or {})
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)


def fake(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    p = bin_dir / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)


@pytest.mark.parametrize(
    "text,expected",
    [("1.28.3", (1, 28, 3)), ("v1.34.4+k3s1", (1, 34, 4)), ("9.2p1", (9, 2)), ("OpenSSH_8.0p1", (8, 0)), ("", ())],
)
def test_version_tuple(text, expected):
    assert check_host.version_tuple(text) == expected


def test_numeric_compare_not_text():
    assert check_host.at_least("1.10", "1.9")
    assert not check_host.at_least("1.9", "1.28")


def test_without_platform_checks_python_and_requirements():
    proc = run("--json")
    data = json.loads(proc.stdout)
    names = [c["name"] for c in data["checks"]]
    assert names[0] == "python3" and {"pyyaml", "jsonschema", "jinja2"} <= set(names)
    assert proc.returncode == (0 if data["ok"] else 1)


def test_missing_kubectl_is_one_missing_line(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = run("--platform", "kubernetes", path=str(empty))
    assert proc.returncode == 1
    assert "MISSING: kubectl not on PATH (need >= 1.28): install kubectl (https://kubernetes.io/docs/tasks/tools/) and put it on PATH" in proc.stdout.splitlines()


def test_kubectl_version_is_read(tmp_path):
    b = tmp_path / "bin"
    fake(b, "kubectl", 'echo \'{"clientVersion": {"major": "1", "minor": "27", "gitVersion": "v1.27.9"}}\'\n')
    proc = run("--platform", "kubernetes", path=f"{b}:{os.environ['PATH']}")
    assert "MISSING: kubectl 1.27.9 (need >= 1.28): upgrade kubectl to >= 1.28" in proc.stdout.splitlines()
    fake(b, "kubectl", 'echo \'{"clientVersion": {"gitVersion": "v1.34.4"}}\'\n')
    proc = run("--platform", "kubernetes", "--json", path=f"{b}:{os.environ['PATH']}")
    kubectl = [c for c in json.loads(proc.stdout)["checks"] if c["name"] == "kubectl"][0]
    assert kubectl["ok"] and kubectl["found"] == "1.34.4"


def test_ssh_version_is_read_from_stderr(tmp_path):
    b = tmp_path / "bin"
    fake(b, "ssh", 'echo "OpenSSH_7.4p1, OpenSSL 1.0.2k-fips  26 Jan 2017" >&2\n')
    proc = run("--platform", "slurm", path=f"{b}:{os.environ['PATH']}")
    assert proc.returncode == 1
    assert "MISSING: ssh 7.4p1 (need OpenSSH >= 8.0): upgrade the OpenSSH client to >= 8.0" in proc.stdout.splitlines()
    fake(b, "ssh", 'echo "OpenSSH_9.2p1 Debian-2+deb12u3, OpenSSL 3.0.15 3 Sep 2024" >&2\n')
    proc = run("--platform", "slurm", path=f"{b}:{os.environ['PATH']}")
    assert "OK: ssh 9.2p1 (OpenSSH >= 8.0)" in proc.stdout.splitlines()


def test_missing_python_package_names_the_pip_command(monkeypatch):
    from importlib import metadata

    real = metadata.version

    def version(dist):
        if dist == "jinja2":
            raise metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(check_host.metadata, "version", version)
    jinja = [c for c in check_host.check_requirements() if c["name"] == "jinja2"][0]
    assert not jinja["ok"] and jinja["found"] == "not installed"
    assert jinja["fix"] == f"{sys.executable} -m pip install -r {BANK / 'requirements.txt'}"


def test_bad_platform_is_a_usage_error():
    proc = run("--platform", "lsf")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
