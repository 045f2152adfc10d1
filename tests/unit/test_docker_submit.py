"""tao_docker.py submit against recorded engine answers: the checks come before any record, the preview
contacts nothing, and a refused run leaves nothing behind."""
from __future__ import annotations

import json

import pytest

from taobank import records


def _engine(fake, *, have_image: bool = True, run_rc: int = 0):
    fake.on("docker", lambda c: c.argv[1] == "info", '{"ServerVersion": "20.10.24", "SecurityOptions": []}')
    fake.on("docker", lambda c: c.argv[1:3] == ["image", "inspect"], "sha256:1" if have_image else "",
            rc=0 if have_image else 1, stderr="" if have_image else "Error: No such image")
    fake.on("docker", lambda c: c.argv[1] == "run", "0123456789abcdef" if run_rc == 0 else "", rc=run_rc,
            stderr="" if run_rc == 0 else "docker: Error response from daemon: OCI runtime create failed.")
    fake.on("docker", lambda c: c.argv[1] == "rm", "")


def test_dry_run_contacts_nothing(fake, cli, tmp_path):
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--results-dir", str(tmp_path),
              "--dry-run", "--", "echo", "--json")
    assert out.rc == 0 and fake.calls == [] and records.list_records() == []
    assert out.out.startswith("docker run --detach") and out.out.rstrip().endswith("img:1 echo --json")


def test_a_submit_runs_detached_and_records_the_job(fake, cli, tmp_path):
    _engine(fake)
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--results-dir", str(tmp_path),
              "--json", "--", "echo", "hi")
    assert out.rc == 0, out
    view = json.loads(out.out)
    assert view["state"] == "PENDING" and view["backend_ref"] == "0123456789ab" and view["platform"] == "docker"
    assert (tmp_path / view["id"]).is_dir()
    run = [c for c in fake.calls if c.argv[1] == "run"][0]
    assert run.argv[run.argv.index("--name") + 1] == view["id"]


def test_gpus_on_a_host_without_them_is_refused_before_any_record(fake, cli, tmp_path, monkeypatch):
    _engine(fake)
    monkeypatch.setattr("shutil.which", lambda name: None if name == "nvidia-smi" else f"/usr/bin/{name}")
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "2", "--results-dir", str(tmp_path), "--", "true")
    assert out.rc == 1 and len(out.err_lines) == 1 and "this host has none" in out.err
    assert records.list_records() == [] and not any(c.argv[1] == "run" for c in fake.calls)


def test_too_many_gpus_and_unknown_devices(fake, cli, tmp_path, monkeypatch):
    _engine(fake)
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    rows = "0, GPU-11111111-2222, NVIDIA H200, 580.82.07, 9.0, 143771\n"
    fake.on("nvidia-smi", lambda c: True, rows)
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "2", "--results-dir", str(tmp_path), "--", "true")
    assert out.rc == 1 and "asks for 2 GPUs but this host has 1" in out.err
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpu-device", "3", "--results-dir", str(tmp_path), "--", "true")
    assert out.rc == 1 and "GPU 3 is not on this host" in out.err
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpu-device", "GPU-11111111-2222", "--results-dir",
              str(tmp_path), "--json", "--", "true")
    assert out.rc == 0, out
    run = [c for c in fake.calls if c.argv[1] == "run"][-1]
    assert run.argv[run.argv.index("--gpus") + 1] == '"device=GPU-11111111-2222"'


def test_a_failed_run_leaves_no_container_and_no_folder(fake, cli, tmp_path):
    _engine(fake, run_rc=125)
    res = tmp_path / "results"
    res.mkdir()
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--results-dir", str(res), "--", "true")
    assert out.rc == 1 and "OCI runtime create failed" in out.err and "nothing was left running" in out.err
    assert list(res.iterdir()) == [] and any(c.argv[1] == "rm" for c in fake.calls)
    (rec,) = records.list_records()
    assert rec["state"] == "ERROR"


def test_a_secret_not_set_is_refused_by_name(fake, cli, tmp_path, monkeypatch):
    _engine(fake)
    monkeypatch.delenv("MY_TOKEN", raising=False)
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--secret-env", "MY_TOKEN",
              "--results-dir", str(tmp_path), "--", "true")
    assert out.rc == 1 and "MY_TOKEN is not set" in out.err and records.list_records() == []


def test_login_puts_the_key_on_stdin_only(fake, cli, monkeypatch):
    monkeypatch.setenv("NGC_KEY", "nvapi-secretvalue1234567890")
    fake.on("docker", lambda c: c.argv[1] == "login", "Login Succeeded")
    out = cli("tao_docker.py", "login")
    assert out.rc == 0
    (call,) = fake.calls
    assert call.stdin == "nvapi-secretvalue1234567890\n"
    assert "nvapi-secretvalue1234567890" not in " ".join(call.argv) + out.out + out.err
    assert call.argv[1:] == ["login", "--username", "$oauthtoken", "--password-stdin", "--", "nvcr.io"]


def test_a_refused_login_never_echoes_the_key(fake, cli, monkeypatch):
    monkeypatch.setenv("NGC_KEY", "nvapi-secretvalue1234567890")
    fake.on("docker", lambda c: c.argv[1] == "login", "", rc=1,
            stderr="Error response from daemon: bad key nvapi-secretvalue1234567890")
    out = cli("tao_docker.py", "login")
    assert out.rc == 1 and "nvapi-secretvalue1234567890" not in out.err + out.out


@pytest.mark.parametrize("host, words", [("/", "whole host"), ("/var/run/docker.sock", "socket"),
                                         ("/root/.ssh", ".ssh"), ("/proc", "processes"), ("/home/u/.ssh/id_rsa", "keys")])
def test_risky_mounts_are_a_warning_line(host, words):
    """Issue 38 item 13: a mount that hands the job the host is never silent (a gate warning, seen under --quiet)."""
    from taobank.platforms.docker.submit import risky_mounts

    (line,) = risky_mounts([(host, "/mnt", True)])
    assert line.startswith("warning: mount ") and "\n" not in line and (words in line or "keys" in line)
    assert risky_mounts([("/data/coco", "/data", True), ("/proc-data", "/x", True)]) == []
    # a folder inside root's home is data (a parent job's results under root's state folder), root's home whole is not
    assert risky_mounts([("/root/.local/state/tao-skill-bank/results/j1", "/parent", True)]) == []
    assert len(risky_mounts([("/root", "/r", True)])) == 1


@pytest.mark.parametrize("flag,value,needle", [("--cpus", "64", "more than the engine's host has (8)"),
                                               ("--memory", "1k", "under the engine's minimum of 6m"),
                                               ("--memory", "900g", "more than the engine's host has")])
def test_limits_the_engine_would_refuse_are_refused_before_any_record(fake, cli, tmp_path, flag, value, needle):
    """Issue 37: all or nothing. What the engine refuses at run time (after the record would open) is read from
    its one ``info`` answer and refused first: no record, no folder, no container call."""
    _engine(fake)
    fake.on("docker", lambda c: c.argv[1] == "info", json.dumps({"ServerVersion": "20.10.24", "SecurityOptions": [],
                                                                 "NCPU": 8, "MemTotal": 64 * 1024 ** 3}))
    res = tmp_path / "results"
    res.mkdir()
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--results-dir", str(res), flag,
              value, "--", "true")
    assert out.rc == 1 and len(out.err_lines) == 1 and needle in out.err and "nothing was done" in out.err, out
    assert records.list_records() == [] and list(res.iterdir()) == []
    assert not any(c.argv[1] in ("run", "create") for c in fake.calls)


@pytest.mark.parametrize("stderr,says", [
    ('Error response from daemon: Get "https://reg.example:5000/v2/": dial tcp 10.0.0.9:5000: connect: connection '
     "refused", "check the registry name and the key"),
    ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
     "start it"),
    ("dial unix /var/run/docker.sock: connect: connection refused", "start it")])
def test_a_refused_login_blames_the_registry_or_the_engine_rightly(fake, cli, monkeypatch, stderr, says):
    monkeypatch.setenv("NGC_KEY", "nvapi-secretvalue1234567890")
    fake.on("docker", lambda c: c.argv[1] == "login", "", rc=1, stderr=stderr)
    out = cli("tao_docker.py", "login", "--registry", "reg.example:5000")
    assert out.rc == 1 and says in out.err, out.err


# ------------------------------------------------------------------ issue 49: --ngc-pull-secret, dry runs that check
KEY = "nvapi-pullkey-0123456789abcdef"


def test_ngc_pull_secret_logs_in_on_stdin_just_before_the_pull_only(fake, cli, tmp_path, monkeypatch):
    monkeypatch.setenv("NGC_KEY", KEY)
    _engine(fake, have_image=False)
    fake.on("docker", lambda c: c.argv[1] == "login", "Login Succeeded")
    fake.on("docker", lambda c: c.argv[1] == "pull", "Pull complete")
    out = cli("tao_docker.py", "submit", "--image", "reg.example:5000/tao/img:1", "--gpus", "0", "--ngc-pull-secret",
              "--results-dir", str(tmp_path), "--json", "--", "true")
    assert out.rc == 0, out
    words = [c.argv[1] for c in fake.calls]
    assert words.index("login") == words.index("pull") - 1  # just before the pull
    (login,) = [c for c in fake.calls if c.argv[1] == "login"]
    assert login.argv[1:] == ["login", "--username", "$oauthtoken", "--password-stdin", "--", "reg.example:5000"]
    assert login.stdin == KEY + "\n" and all(KEY not in " ".join(c.argv) for c in fake.calls)
    assert KEY not in out.out + out.err + json.dumps(records.list_records())
    fake.calls.clear()  # the image is here now: no login at all
    _engine(fake, have_image=True)
    again = cli("tao_docker.py", "submit", "--image", "reg.example:5000/tao/img:1", "--gpus", "0", "--ngc-pull-secret",
                "--results-dir", str(tmp_path), "--json", "--", "true")
    assert again.rc == 0 and "login" not in [c.argv[1] for c in fake.calls], again


def test_ngc_pull_secret_without_the_key_is_one_line_before_any_record(fake, cli, tmp_path, monkeypatch):
    monkeypatch.delenv("NGC_KEY", raising=False)
    _engine(fake, have_image=False)
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--ngc-pull-secret",
              "--results-dir", str(tmp_path), "--", "true")
    assert out.rc == 1 and len(out.err_lines) == 1 and "export NGC_KEY" in out.err, out
    assert records.list_records() == [] and not any(c.argv[1] in ("login", "pull") for c in fake.calls)


def test_dry_run_says_first_what_it_did_not_check_and_check_runs_the_checks(fake, cli, tmp_path, monkeypatch):
    monkeypatch.delenv("NGC_KEY", raising=False)
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--results-dir", str(tmp_path),
              "--dry-run", "--", "true")
    assert out.rc == 0 and fake.calls == [] and out.err_lines[0].startswith("dry run: nothing was contacted, so the "
                                                                            "submit's read-only checks did not run")
    _engine(fake, have_image=False)
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--results-dir", str(tmp_path),
              "--mount", f"{tmp_path}/no-such-data:/data", "--dry-run", "--check", "--", "true")
    assert out.rc == 1 and "bind-mount path" in out.err and records.list_records() == []  # what submit refuses
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--results-dir", str(tmp_path),
              "--ngc-pull-secret", "--dry-run", "--check", "--", "true")
    assert out.rc == 0, out
    first = out.err_lines[0]
    assert first.startswith("dry run: the submit's read-only checks passed (docker engine 20.10.24") and \
        "not checked: pulling img:1 (a dry run pulls nothing); NGC_KEY not set here (the submit needs it)" in first
    assert not any(c.argv[1] in ("login", "pull", "run", "create") for c in fake.calls)
    assert records.list_records() == [] and out.out.startswith("docker run --detach")
    usage = cli("tao_docker.py", "submit", "--image", "img:1", "--check", "--", "true")
    assert usage.rc == 2 and "give --dry-run too" in usage.err
