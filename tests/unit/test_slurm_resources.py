"""Resource mapping: seed defaults, wall-time rules, whole-node GPU requests."""
import pytest

from taobank.errors import TaoError
from taobank.platforms.slurm import resources


def test_defaults_come_from_versions_yaml():
    r = resources.resolve({}, {})
    d = resources.defaults()
    assert (r.nodes, r.gpus_per_node, r.cpus_per_task) == (1, 4, 16)
    assert r.time_minutes == 240 and r.timeout_seconds + r.kill_grace_seconds == int(3.8 * 3600)
    assert r.kill_grace_seconds == d["kill_grace_seconds"] == 120
    assert r.partition == d["partition"] == "polar,polar3,polar4,grizzly"
    assert r.requeue is True and not r.exclusive
    assert ("--time", "720") not in r.directives()  # never 12 h


def test_env_time_overrides():
    r = resources.resolve({"partition": "long"}, {"SLURM_TIME_HOURS": "2", "SLURM_TIMEOUT_HOURS": "1.5"})
    assert r.time_minutes == 120 and r.timeout_seconds == 5400 and r.kill_grace_seconds == 120


def test_shorter_wall_time_scales_the_inner_timeout():
    r = resources.resolve({"time_hours": 1}, {})
    assert r.timeout_seconds + r.kill_grace_seconds == int(0.95 * 3600)


def test_longer_wall_time_scales_the_inner_timeout_too():
    """A 10 h job on a long partition must not be stopped at the 4 h default's 3.8 h
    (troubleshooting.md tells users to raise time_hours for exactly that error)."""
    r = resources.resolve({"time_hours": 10, "partition": "long"}, {})
    assert r.time_minutes == 600 and r.timeout_seconds + r.kill_grace_seconds == int(0.95 * 10 * 3600)
    r = resources.resolve({"partition": "long"}, {"SLURM_TIME_HOURS": "8"})
    assert r.timeout_seconds + r.kill_grace_seconds == int(0.95 * 8 * 3600)
    r = resources.resolve({}, {})  # the pinned default pair (4 h wall, 3.8 h timeout)
    assert r.timeout_seconds + r.kill_grace_seconds == int(3.8 * 3600)


def test_more_than_four_hours_on_default_partitions_refused():
    with pytest.raises(TaoError, match="exceeds the 4 h limit.*name a partition"):
        resources.resolve({"time_hours": 6}, {})
    with pytest.raises(TaoError, match="exceeds"):
        resources.resolve({}, {"SLURM_TIME_HOURS": "12"})
    assert resources.resolve({"time_hours": 6, "partition": "batch_long"}, {}).time_minutes == 360


def test_timeout_must_be_below_wall_time_or_zero():
    with pytest.raises(TaoError, match="below the wall time"):
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
                                 {"memory": "lots"}, {"num_gpus": -1}, {"num_gpus": 1.5}, {"time_hours": "x"},
                                 {"use_requeue": "yes"}])
def test_bad_values_refused(bad):
    with pytest.raises(TaoError):
        resources.resolve(bad, {})


def test_no_gres_without_gpus_and_account_directive():
    r = resources.resolve({"num_gpus": 0, "account": "edgeai"}, {})
    opts = [o for o, _ in r.directives()]
    assert "--gres" not in opts and ("--account", "edgeai") in r.directives()
    assert resources.resolve({"use_requeue": False}, {}).directives()[-1] == ("--no-requeue", None)


@pytest.mark.parametrize("spec,minutes", [
    ({"time_hours": 0.1667}, 10),  # "at most 10 minutes" as a new user writes it: not --time=11
    ({"time_minutes": 10}, 10),
    ({"time": "00:10:00"}, 10),
    ({"time": "1-02:00:30"}, 26 * 60 + 1),  # seconds round UP to SLURM's whole minutes
    ({"time_minutes": 90.5}, 91),
    ({"time": "0:0:1"}, 1),
])
def test_wall_time_units(spec, minutes):
    r = resources.resolve({**spec, "partition": "long"}, {})
    assert r.time_minutes == minutes
    assert ("--time", str(minutes)) in r.directives()


def test_wall_time_given_once_and_well_formed():
    with pytest.raises(TaoError, match="give the wall time once: time_hours and time_minutes"):
        resources.resolve({"time_hours": 1, "time_minutes": 10}, {})
    with pytest.raises(TaoError, match="not HH:MM:SS"):
        resources.resolve({"time": "10 minutes"}, {})
    with pytest.raises(TaoError, match="not HH:MM:SS"):
        resources.resolve({"time": "10:00"}, {})  # MM:SS or HH:MM? refused rather than guessed
    # the environment's hours never override an explicit unit in the spec
    assert resources.resolve({"time_minutes": 10}, {"SLURM_TIME_HOURS": "3"}).time_minutes == 10


@pytest.mark.parametrize("spec", [
    {"time_minutes": 10}, {"time_minutes": 1}, {"time_minutes": 2}, {"time_hours": 4}, {"time": "00:05:00"},
    {"time_minutes": 10, "timeout_hours": 9 / 60}, {"time_minutes": 10, "timeout_hours": 599 / 3600},
    {"time_hours": 8, "partition": "long", "timeout_hours": 7.99},
])
def test_timeout_plus_kill_grace_never_passes_the_wall_time(spec):
    """The old render gave ``timeout --kill-after=120 570`` under a 600 s limit."""
    r = resources.resolve({"partition": "long", **spec}, {})
    wall = r.time_minutes * 60
    assert r.timeout_seconds > 0 and r.kill_grace_seconds >= 1
    assert r.timeout_seconds + r.kill_grace_seconds <= wall
    if "timeout_hours" not in spec:
        assert r.timeout_seconds + r.kill_grace_seconds == int(wall * 0.95)  # 95 %, grace inside


def test_ten_minute_job_renders_a_fitting_timeout():
    r = resources.resolve({"time_minutes": 10, "partition": "long"}, {})
    assert (r.timeout_seconds, r.kill_grace_seconds) == (513, 57)  # 570 s budget: SIGKILL at 570, 30 s before SLURM


def test_multi_node_waits_for_all_nodes():
    assert ("--wait-all-nodes", "1") in resources.resolve({"num_gpus": 16}, {}).directives()
    assert not any(o == "--wait-all-nodes" for o, _ in resources.resolve({"num_gpus": 4}, {}).directives())


@pytest.mark.parametrize("spec,env,want", [
    ({}, {}, True),                                                   # the pin
    ({}, {"SLURM_USE_REQUEUE": "false"}, False),                      # the seed's variable sets the default
    ({}, {"SLURM_USE_REQUEUE": "0"}, False),
    ({}, {"SLURM_USE_REQUEUE": "True"}, True),
    ({"use_requeue": True}, {"SLURM_USE_REQUEUE": "false"}, True),   # the spec beats the environment
    ({"use_requeue": False}, {"SLURM_USE_REQUEUE": "yes"}, False),
])
def test_use_requeue_spec_beats_env_beats_pin(spec, env, want):
    res = resources.resolve(spec, env)
    assert res.requeue is want
    assert res.directives()[-1] == (("--requeue" if want else "--no-requeue"), None)


def test_a_use_requeue_env_that_is_no_switch_is_one_line():
    with pytest.raises(TaoError, match="SLURM_USE_REQUEUE='maybe' is not a switch: set it to true or false"):
        resources.resolve({}, {"SLURM_USE_REQUEUE": "maybe"})
