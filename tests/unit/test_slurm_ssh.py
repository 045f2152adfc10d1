"""SSH argv: host forms, host-key checking never disabled, ControlPath short and private."""
import os
import stat

import pytest

from taobank.errors import TaoError
from taobank.platforms.slurm import ssh


@pytest.mark.parametrize("spec,expect", [
    ("login1", [("login1", None, None)]),
    ("login1,login2:2222", [("login1", None, None), ("login2", None, 2222)]),
    (" me@login1 , [::1]:22 ", [("login1", "me", None), ("::1", None, 22)]),
    ("a,a", [("a", None, None)]),
])
def test_parse_hosts(spec, expect):
    assert [(h.host, h.user, h.port) for h in ssh.parse_hosts(spec)] == expect


@pytest.mark.parametrize("bad", ["", " , ", "-oProxyCommand=x", "host;rm", "a b", "h:99999", "h:0"])
def test_bad_hosts(bad):
    with pytest.raises(TaoError):
        ssh.parse_hosts(bad)


@pytest.fixture()
def conn(tmp_path, monkeypatch):
    key = tmp_path / "id"
    key.write_text("k")
    key.chmod(0o600)
    monkeypatch.delenv("TAO_SSH_CONTROL_DIR", raising=False)  # the default: short and private
    return ssh.Connection({"SLURM_USER": "me", "SLURM_HOSTNAME": "l1,l2:2200", "SSH_KEY_PATH": str(key)})


def test_options_are_non_interactive_and_checked(conn):
    opts = conn.options(conn.hosts[1])
    joined = " ".join(opts)
    assert "BatchMode=yes" in joined and "StrictHostKeyChecking=yes" in joined
    assert "StrictHostKeyChecking=no" not in joined and "accept-new" not in joined
    assert "ControlMaster=auto" in joined and joined.count("%C") == 1
    assert opts[-4:] == ["-l", "me", "-p", "2200"] and "IdentitiesOnly=yes" in joined
    path = next(o for o in opts if o.startswith("ControlPath="))[len("ControlPath="):]
    assert len(path.replace("%C", "x" * 40)) < 104
    d = os.path.dirname(path)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


def test_remote_command_is_one_quoted_string(conn, monkeypatch):
    monkeypatch.setattr(conn, "connect", lambda: conn.hosts[0])
    argv = conn.command_argv(["sh", "-c", 'echo "$1"', "tao", "a b; rm -rf / $(id)"])
    assert argv[-3:-1] == ["--", "l1"]
    assert argv[-1] == "sh -c 'echo \"$1\"' tao 'a b; rm -rf / $(id)'"


def test_key_checks(tmp_path):
    key = tmp_path / "id"
    key.write_text("k")
    key.chmod(0o644)
    with pytest.raises(TaoError, match="chmod 600"):
        ssh.Connection({"SLURM_USER": "me", "SLURM_HOSTNAME": "h", "SSH_KEY_PATH": str(key)})
    with pytest.raises(TaoError, match="not a file"):
        ssh.Connection({"SLURM_USER": "me", "SLURM_HOSTNAME": "h", "SSH_KEY_PATH": str(tmp_path / "nope")})
    with pytest.raises(TaoError, match="SLURM_USER"):
        ssh.Connection({"SLURM_HOSTNAME": "h"})


def test_slurm_user_required_even_with_an_ssh_config(tmp_path):
    """SLURM_USER is required (seed): an ssh_config must not hide that it is unset."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host h\n  User someone\n")
    with pytest.raises(TaoError, match="^SLURM_USER is not set: export SLURM_USER="):
        ssh.Connection({"SLURM_HOSTNAME": "h", "TAO_SSH_CONFIG": str(cfg)})
    with pytest.raises(TaoError, match="SLURM_USER"):  # one host with a user is not enough
        ssh.Connection({"SLURM_HOSTNAME": "me@h1,h2"})
    conn = ssh.Connection({"SLURM_HOSTNAME": "me@h1,you@h2:2200"})  # every entry names its user
    assert [h.user for h in conn.hosts] == ["me", "you"]


def test_control_dir_must_be_private(tmp_path, monkeypatch):
    d = tmp_path / "ctl"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    monkeypatch.setenv("TAO_SSH_CONTROL_DIR", str(d))
    with pytest.raises(TaoError, match="private"):
        ssh.control_dir()


def test_classify_argv():
    assert ssh.classify_argv(["ssh", "-O", "check", "--", "h"]) == "control"
    assert ssh.classify_argv(["ssh", "-o", "x", "--", "h", "true"]) == "connect"
    assert ssh.classify_argv(["ssh", "--", "h", "squeue"]) == "command"
