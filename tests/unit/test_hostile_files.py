"""Hostile files and flags: bounded reads and parses, never a hang, a memory blow-up or a traceback.

Each case here once hung a helper, used gigabytes or printed a traceback.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from taobank import fsio, pins, records, spec
from taobank.core import nccl_probe
from taobank.errors import TaoError
from taobank.platforms.slurm import resources, ssh

BANK = Path(__file__).resolve().parents[2]
SCRIPTS = BANK / "scripts"

#: 464 bytes of nested anchors that expand to about 10^7 nodes.
ALIAS_BOMB = "image: x\ncommand: echo\ntolerations:\n" + "".join(
    f"  - &a{i} [{', '.join(['*a' + str(i - 1)] * 10) if i else 'key'}]\n" for i in range(8))


def _helper(*argv: str, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _one_line_error(res: subprocess.CompletedProcess) -> None:
    assert res.returncode != 0 and "Traceback" not in res.stderr and res.stderr.count("\n") == 1, res.stderr


@pytest.fixture()
def fifo(tmp_path) -> Path:
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return p


def test_yaml_aliases_are_refused_before_they_expand(tmp_path, state_dir):
    f = tmp_path / "bomb.yaml"
    f.write_text(ALIAS_BOMB)
    assert len(ALIAS_BOMB) < 600
    t0 = time.monotonic()
    for argv in ([str(SCRIPTS / "render_k8s_job.py"), "--spec", str(f)],
                 [str(SCRIPTS / "tao_k8s.py"), "submit", "--spec", str(f), "--dry-run"]):
        res = _helper(*argv, env={"TAO_STATE_DIR": str(state_dir)})
        _one_line_error(res)
        assert "aliases" in res.stderr
    assert time.monotonic() - t0 < 20


@pytest.mark.parametrize("text", ["a: " + "[" * 100000, "[" * 100000, "a: " + "{b: " * 5000 + "1" + "}" * 5000,
                                  "n: " + "9" * 5000, "k" * 1100 + ": v"])
def test_a_spec_nested_too_deeply_or_holding_a_giant_number_is_one_line(tmp_path, text):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(TaoError) as exc:
        spec.load_file(f)
    assert str(f) in str(exc.value)


def test_json_nesting_and_giant_numbers_are_one_line():
    for text in ("[" * 200000, "1" * 5000, '{"a": ' * 100 + "1" + "}" * 100):
        with pytest.raises(TaoError):
            fsio.json_value(text, "x")
    assert fsio.json_value('{"a": [1, {"b": 2}]}', "x") == {"a": [1, {"b": 2}]}


@pytest.mark.parametrize("name", ["/dev/zero", "fifo"])
def test_a_device_or_fifo_is_never_read(tmp_path, fifo, name):
    path = fifo if name == "fifo" else Path(name)
    with pytest.raises(TaoError, match="not a regular file"):
        spec.load_file(path)
    res = _helper(str(SCRIPTS / "render_k8s_job.py"), "--spec", str(path), timeout=20)
    _one_line_error(res)


def test_an_oversized_file_is_refused_without_reading_it_whole(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" + b"#" * (spec.MAX_SPEC_BYTES + 10))
    with pytest.raises(TaoError, match="larger than"):
        spec.load_file(big)
    assert fsio.read_regular(tmp_path / "missing", "x", missing_ok=True) is None


def test_a_fifo_as_remembered_login_host_or_probe_cache_does_not_hang(state_dir):
    records.state_dir()
    (state_dir / "slurm").mkdir(mode=0o700)
    os.mkfifo(state_dir / "slurm" / "login_host")
    os.mkfifo(state_dir / nccl_probe.CACHE_FILE)
    t0 = time.monotonic()
    assert ssh.remembered_host() is None
    assert nccl_probe.load_cache() == {}
    assert time.monotonic() - t0 < 5


def test_a_symlinked_slurm_state_folder_is_never_written_through(state_dir, tmp_path):
    records.state_dir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (state_dir / "slurm").symlink_to(outside)
    ssh.remember_host("login1")
    assert list(outside.iterdir()) == []


def test_a_record_nested_200000_deep_is_skipped_and_the_others_still_list(state_dir):
    good = records.open_record("slurm", "img", "dino", "train", "A", "/r")
    bad_id = "dino-train-deadbeef"
    records.state_dir()
    (state_dir / f"{bad_id}.json").write_text("[" * 200000)
    os.chmod(state_dir / f"{bad_id}.json", 0o600)
    problems: list[str] = []
    assert [r["id"] for r in records.list_records(problems=problems)] == [good["id"]]
    assert len(problems) == 1 and bad_id in problems[0]
    with pytest.raises(TaoError, match="nested"):
        records.load(bad_id)
    res = _helper(str(SCRIPTS / "tao_jobs.py"), "list", env={"TAO_STATE_DIR": str(state_dir)})
    assert res.returncode == 0 and good["id"] in res.stdout and "Traceback" not in res.stderr


def test_a_deep_versions_file_is_one_line(tmp_path, monkeypatch):
    f = tmp_path / "versions.yaml"
    f.write_text("a: " + "[" * 50000)
    monkeypatch.setenv(pins.VERSIONS_ENV, str(f))
    with pytest.raises(TaoError):
        pins.load()


@pytest.mark.parametrize("value", [10 ** 400, "1" * 400, 10 ** 13, -1, 1e308 * 10])
def test_a_huge_resource_number_is_one_line(value):
    with pytest.raises(TaoError):
        resources.resolve({"num_gpus": value}, {})


@pytest.mark.parametrize("value", ["abc", "-5", "0", "1e9", "99999999999"])
def test_a_bad_ssh_timeout_setting_is_one_line(value):
    with pytest.raises(TaoError, match="TAO_SSH_CONNECT_TIMEOUT"):
        ssh.Connection({"SLURM_USER": "me", "SLURM_HOSTNAME": "login1", "TAO_SSH_CONNECT_TIMEOUT": value})


@pytest.mark.parametrize("argv", [
    ["tao_slurm.py", "submit", "--env=--", "--dry-run", "--", "true"],
    ["tao_slurm.py", "submit", "--secret-env=--", "--dry-run", "--", "true"],
    ["tao_k8s.py", "submit", "--env=--", "--image", "x", "--command", "true", "--dry-run"],
    ["tao_k8s.py", "submit", "--secret-env=--", "--image", "x", "--command", "true", "--dry-run"],
    ["tao_slurm.py", "logs", "--tail=--", "dino-train-aaaaaaaa"],
    ["tao_jobs.py", "logs", "--tail=--", "dino-train-aaaaaaaa"],
    ["tao_k8s.py", "submit", "--args-json", "[" * 100000, "--image", "x", "--dry-run"],
])
def test_dash_dash_as_a_flag_value_and_deep_flags_are_one_line(argv, state_dir):
    res = _helper(str(SCRIPTS / argv[0]), *argv[1:], env={"TAO_STATE_DIR": str(state_dir)})
    _one_line_error(res)


@pytest.mark.parametrize("name", ["/dev/zero", "fifo"])
def test_lint_never_reads_a_device_or_fifo(fifo, name):
    res = _helper(str(SCRIPTS / "redact_secrets.py"), "lint", str(fifo if name == "fifo" else name), timeout=20)
    _one_line_error(res)
    assert res.returncode == 2
