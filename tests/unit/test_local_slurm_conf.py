"""Config files of the local SLURM cluster: built from data, no value can break a line."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taobank.errors import TaoError
from testclusters import slurm_conf as conf


def lay(state: str = "/tmp/tao-state/slurm") -> conf.Layout:
    return conf.Layout(state=Path(state))


def test_env_puts_the_refusing_login_address_first():
    env = conf.env(lay())
    first, second = env["SLURM_HOSTNAME"].split(",")
    assert first == "tao-slurm-refused" and second == "tao-slurm-login"
    assert env["TAO_SLURM_CONTAINER_RUNTIME"] == "none"
    assert env["SLURM_BASE_RESULTS_DIR"] == f"{env['TAO_LOCAL_LUSTRE_ROOT']}/users/{env['SLURM_USER']}"
    assert env["SSH_KEY_PATH"].startswith("/tmp/tao-state/slurm/")


def test_ssh_config_pins_the_host_key_for_both_aliases():
    text = conf.ssh_config(lay())
    blocks = text.split("Host ")[1:]
    assert [b.split()[0] for b in blocks] == ["tao-slurm-login", "tao-slurm-refused"]
    for block in blocks:
        assert "StrictHostKeyChecking yes" in block
        assert "UserKnownHostsFile /tmp/tao-state/slurm/ssh/known_hosts" in block
        assert "IdentitiesOnly yes" in block
    assert "HostName 127.0.0.2" in blocks[1]


def test_memory_kill_plugins_follow_the_cgroup_mode():
    with_cg = conf.slurm_conf(lay(), cgroup=True, no_in_addr_any=True)
    without = conf.slurm_conf(lay(), cgroup=False, no_in_addr_any=False)
    assert "ProctrackType=proctrack/cgroup" in with_cg and "OverMemoryKill" not in with_cg
    assert "ProctrackType=proctrack/linuxproc" in without and "JobAcctGatherParams=OverMemoryKill" in without
    assert "CommunicationParameters" not in without
    assert "AuthInfo=cred_expire=10" in with_cg
    assert "SchedulerParameters=sched_interval=1,bf_interval=1" in with_cg


def test_two_nodes_share_loopback_on_distinct_ports_with_file_backed_gpus():
    text = conf.slurm_conf(lay(), cgroup=True, no_in_addr_any=True)
    nodes = [ln for ln in text.splitlines() if ln.startswith("NodeName=")]
    assert len(nodes) == 2
    assert {w for ln in nodes for w in ln.split() if w.startswith("Port=")} == {"Port=17001", "Port=17002"}
    assert all("NodeAddr=127.0.0.1" in ln and f"Gres=gpu:{conf.GPUS_PER_NODE}" in ln for ln in nodes)
    gres = conf.gres_conf(lay())
    assert gres.startswith("AutoDetect=off\n")
    assert f"File=/var/lib/tao-local-slurm/dev/nvidia[0-{conf.GPUS_PER_NODE - 1}]" in gres


@pytest.mark.parametrize("state", ["/tmp/a b/slurm", "/tmp/x\ny", "/tmp/q'uote", "/tmp/h#ash"])
def test_paths_that_would_break_a_config_line_are_refused(state):
    with pytest.raises(TaoError):
        conf.ssh_config(lay(state))


def test_db_password_with_a_quote_is_refused():
    with pytest.raises(TaoError):
        conf.mariadb_grants_sql("x' OR '1")


@given(st.text(min_size=1, max_size=40))
def test_any_state_dir_yields_one_value_per_line_or_a_clear_refusal(name):
    try:
        text = conf.ssh_config(lay(f"/tmp/{name}"))
    except TaoError:
        return
    for line in text.splitlines():
        assert len(line.split()) == 2, line  # "Key value": nothing injected


def test_site_features_conversion_partition_required_account_real_cpus():
    text = conf.slurm_conf(lay(), cgroup=True, no_in_addr_any=True, cpus=3)
    assert "AccountingStorageEnforce=associations,limits" in text
    parts = [ln for ln in text.splitlines() if ln.startswith("PartitionName=")]
    assert [p.split()[0] for p in parts] == ["PartitionName=local", "PartitionName=convert"]
    assert "Default=NO" in parts[1]
    assert all("Sockets=1 CoresPerSocket=3 " in ln for ln in text.splitlines() if ln.startswith("NodeName="))
    assert "ConstrainCores=yes" in conf.cgroup_conf(cgroup=True)
    cmds = conf.accounts_argv(lay())
    assert all(c[:2] == ["sacctmgr", "-i"] for c in cmds)
    assert ["sacctmgr", "-i", "modify", "account", "where", "name=tao-nobudget", "cluster=taolocal", "set",
            "MaxSubmitJobs=0"] in cmds  # the default account submits nothing: --account is required
    env = conf.env(lay())
    assert env["SLURM_ACCOUNT"] == "tao-local" and env["TAO_SLURM_CONVERSION_PARTITION"] == "convert"
