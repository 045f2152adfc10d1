"""Resource mapping: seed defaults, wall-time rules, whole-node GPU requests."""
import pytest

from taobank.errors import TaoError
from taobank.slurm import resources


def test_defaults_come_from_versions_yaml():
    r = resources.resolve({}, {})
    d = resources.defaults()
    assert (r.nodes, r.gpus_per_node, r.cpus_per_task) == (1, 4, 16)
    assert r.time_minutes == 240 and r.timeout_seconds == int(3.8 * 3600)
    assert r.partition == d["partition"] == "polar,polar3,polar4,grizzly"
    assert r.requeue is True and not r.exclusive
    assert ("--time", "720") not in r.directives()  # never 12 h


def test_env_time_overrides():
    r = resources.resolve({"partition": "long"}, {"SLURM_TIME_HOURS": "2", "SLURM_TIMEOUT_HOURS": "1.5"})
    assert r.time_minutes == 120 and r.timeout_seconds == 5400


def test_shorter_wall_time_scales_the_inner_timeout():
    r = resources.resolve({"time_hours": 1}, {})
    assert r.timeout_seconds == int(0.95 * 3600)


def test_longer_wall_time_scales_the_inner_timeout_too():
    """A 10 h job on a long partition must not be stopped at the 4 h default's 3.8 h
    (troubleshooting.md tells users to raise time_hours for exactly that error)."""
    r = resources.resolve({"time_hours": 10, "partition": "long"}, {})
    assert r.time_minutes == 600 and r.timeout_seconds == int(0.95 * 10 * 3600)
    r = resources.resolve({"partition": "long"}, {"SLURM_TIME_HOURS": "8"})
    assert r.timeout_seconds == int(0.95 * 8 * 3600)
    assert resources.resolve({}, {}).timeout_seconds == int(3.8 * 3600)  # the pinned default pair (4 h wall, 3.8 h timeout)


def test_more_than_four_hours_on_default_partitions_refused():
    with pytest.raises(TaoError, match="exceeds the 4 h limit.*name a partition"):
        resources.resolve({"time_hours": 6}, {})
    with pytest.raises(TaoError, match="exceeds"):
        resources.resolve({}, {"SLURM_TIME_HOURS": "12"})
    assert resources.resolve({"time_hours": 6, "partition": "batch_long"}, {}).time_minutes == 360


def test_timeout_must_be_below_wall_time_or_zero():
    with pytest.raises(TaoError, match="below time_hours"):
        resources.resolve({"time_hours": 1, "timeout_hours": 1}, {})
    assert resources.resolve({"time_hours": 1, "timeout_hours": 0}, {}).timeout_seconds == 0


def test_one_minute_job_for_timeout_tests():
    r = resources.resolve({"time_hours": 1 / 60, "timeout_hours": 0, "partition": "local"}, {})
    assert r.time_minutes == 1 and r.timeout_seconds == 0


@pytest.mark.parametrize("gpus,per_node,nodes,expect", [
    (8, 8, None, (1, 8, True)),
    (16, 8, None, (2, 8, True)),
    (16, 8, 2, (2, 8, True)),
    (8, 4, None, (2, 4, True)),
    (4, 8, None, (1, 4, False)),
    (4, 8, 2, (2, 2, False)),
    (0, 8, None, (1, 0, False)),
])
def test_gpu_to_node_mapping(gpus, per_node, nodes, expect):
    spec = {"num_gpus": gpus, "max_num_gpus_per_node": per_node}
    if nodes:
        spec["num_nodes"] = nodes
    r = resources.resolve(spec, {})
    assert (r.nodes, r.gpus_per_node, r.exclusive) == expect
    assert ("--exclusive", None) in r.directives() if expect[2] else ("--exclusive", None) not in r.directives()


def test_uneven_whole_node_request_refused():
    with pytest.raises(TaoError, match="not a multiple"):
        resources.resolve({"num_gpus": 12}, {})
    with pytest.raises(TaoError, match="disagrees"):
        resources.resolve({"num_gpus": 16, "num_nodes": 3}, {})
    with pytest.raises(TaoError, match="split evenly"):
        resources.resolve({"num_gpus": 3, "num_nodes": 2}, {})


@pytest.mark.parametrize("bad", [{"partition": "a b"}, {"partition": "x\n#SBATCH --uid=0"}, {"account": "a;b"},
                                 {"mem": "lots"}, {"num_gpus": -1}, {"num_gpus": 1.5}, {"time_hours": "x"},
                                 {"use_requeue": "yes"}])
def test_bad_values_refused(bad):
    with pytest.raises(TaoError):
        resources.resolve(bad, {})


def test_no_gres_without_gpus_and_account_directive():
    r = resources.resolve({"num_gpus": 0, "account": "edgeai"}, {})
    opts = [o for o, _ in r.directives()]
    assert "--gres" not in opts and ("--account", "edgeai") in r.directives()
    assert resources.resolve({"use_requeue": False}, {}).directives()[-1] == ("--no-requeue", None)
