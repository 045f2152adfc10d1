"""A SLURM submit's partitions, checked by the one preflight command before anything is staged: ``--dry-run
--check`` and the submit refuse a partition the cluster does not have (``sinfo -a``'s, hidden ones included: sbatch
takes them) in one line naming those it has, as sbatch would refuse it (``Invalid partition name specified``) after
the job folder was staged; the job's, its image conversion's and its prefetch's. No remote command more."""
from __future__ import annotations

import pytest

from taobank import records
from taobank.platforms.slurm import resources

SLURM = ["tao_slurm.py", "submit", "--runtime", "none", "--results-base", "/lustre/u", "--num-gpus", "1", "--cpus", "1"]
#: the local cluster's answer to the preflight command's sinfo: two partitions on two nodes, and a hidden one
SINFO = ("@@node local*|node1|2|16000|gpu:8\n@@node convert|node1|2|16000|gpu:8\n"
         "@@node local*|node2|2|16000|gpu:8\n@@node convert|node2|2|16000|gpu:8\n"
         "@@part local*\n@@part convert\n@@part hidden\n")


@pytest.fixture()
def cluster(slurm):
    slurm.ssh("MISSING", SINFO)
    return slurm


@pytest.mark.parametrize("partition", ["gpuu", "local,gpuu"])
def test_an_unknown_partition_is_refused_by_the_dry_run_check_in_one_line(cluster, cli, partition):
    out = cli(*SLURM, "--partition", partition, "--dry-run", "--check", "--", "true")
    assert out.rc == 1 and out.err_lines == [
        "error: partition gpuu is not a partition of this cluster (sinfo lists convert, hidden, local (the "
        "default)): set --partition or SLURM_PARTITION to one of them; nothing was submitted"], out
    assert cluster.scripts() == ["MISSING"] and records.list_records() == []


def test_the_submit_refuses_it_before_staging_anything(cluster, cli, monkeypatch):
    monkeypatch.setenv("SLURM_PARTITION", "gpuu")
    out = cli(*SLURM, "--", "true")
    assert out.rc == 1 and "partition gpuu is not a partition of this cluster" in out.err and len(out.err_lines) == 1
    assert cluster.scripts() == ["MISSING"] and records.list_records() == []  # no STAGE, no SBATCH, no record


@pytest.mark.parametrize("partition", ["local", "convert", "hidden", "local,convert"])
def test_a_partition_sinfo_lists_passes_with_one_command(cluster, cli, partition):
    out = cli(*SLURM, "--partition", partition, "--dry-run", "--check", "--", "true")
    assert out.rc == 0, out
    assert cluster.scripts() == ["MISSING"]  # the node sizes and partitions come with the one preflight command
    (check,) = cluster.ssh_calls("MISSING")
    assert check.args[0] == "@@nodes"
    if partition != "hidden":  # its nodes are not listed: no line, and nothing refused
        assert f"partition {partition}: 2 of its 2 node(s) can hold the job" in out.err_lines[0]


def test_the_dry_run_says_it_did_not_check_a_partition_sinfo_did_not_list(slurm, cli):
    out = cli(*SLURM, "--partition", "gpuu", "--dry-run", "--check", "--", "true")  # sinfo answered nothing
    assert out.rc == 0, out
    assert "not checked: the partition (sinfo on login1 listed none; sbatch judges it)" in out.err_lines[0]


def test_the_prefetch_and_conversion_partitions_are_checked_too(cluster, cli, monkeypatch):
    for key, value in (("AWS_ACCESS_KEY_ID", "AKIA" + "Q" * 16), ("AWS_SECRET_ACCESS_KEY", "s" * 40)):
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SLURM_PARTITION", "local")
    monkeypatch.setenv("TAO_SLURM_PREFETCH_PARTITION", "cpuq")
    out = cli(*SLURM, "--prefetch", "s3://bucket/x.pth=x.pth", "--dry-run", "--check", "--", "true")
    assert out.rc == 1 and len(out.err_lines) == 1, out
    assert "the prefetch job's partition cpuq is not a partition of this cluster" in out.err and \
        "set prefetch_partition or TAO_SLURM_PREFETCH_PARTITION" in out.err


@pytest.mark.parametrize("text, known", [
    (SINFO, ["local*", "convert", "hidden"]), ("", []),
    ("@@node garbage\n@@node \x1b[2J\n@@part a b\n@@part ;rm\n", []),  # nothing a job could name
    ("@@node gpu*|n1|x|y|z\n", ["gpu*"]),  # a size it cannot read still names its partition
])
def test_partitions_are_read_from_both_kinds_of_sinfo_line(text, known):
    assert resources.partitions(text) == known


def test_an_unknown_partition_is_judged_only_when_sinfo_named_some():
    asked = [("partition", "gpuu", "--partition or SLURM_PARTITION")]
    assert resources.unknown_partition(asked, []) is None
    assert resources.unknown_partition([("partition", "local,convert", "x")], ["local*", "convert"]) is None
    line = resources.unknown_partition(asked, ["local*", "convert"])
    assert line is not None and "\n" not in line and "convert, local (the default)" in line
