"""Typed job specs (taobank.jobspec) against the JSON Schemas, the on-disk truth: every schema property is a
field and every field a property, per platform; a shared field is named once and spelled per platform."""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from taobank import jobspec
from taobank.errors import TaoError
from taobank.core import platform
from taobank import registry
from taobank.platforms.docker.spec import DockerSpec
from taobank.jobspec import JobSpec
from taobank.platforms.kubernetes.spec import KubernetesSpec
from taobank.platforms.slurm.spec import SlurmSpec

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
SHARED = {f.name for f in fields(JobSpec)}


@pytest.mark.parametrize("name", registry.names())
def test_every_schema_property_is_a_field_and_every_field_a_property(name):
    cls = platform.get(name).spec_type
    schema = json.loads((SCHEMAS / cls.SCHEMA).read_text())
    props = set(schema["properties"])
    keys = cls.keys()
    assert set(keys.values()) == props, (f"{cls.__name__} and schemas/{cls.SCHEMA} disagree: only in the schema "
                                         f"{sorted(props - set(keys.values()))}, only in the class "
                                         f"{sorted(set(keys.values()) - props)}")
    assert len(set(keys.values())) == len(keys)  # one field per key
    lacking = {f.name for f in fields(cls)} - set(keys)
    assert lacking <= SHARED  # only a shared field may be one the platform lacks, and it says so (SPELLING: None)
    assert lacking == {name for name, key in cls.SPELLING.items() if key is None}
    assert set(cls.SPELLING) <= SHARED  # the spelling table names shared fields only


def test_the_fields_every_platform_has_are_named_once():
    everywhere = set.intersection(*(set(cls.keys()) for cls in (platform.get(n).spec_type for n in registry.names())))
    assert {"image", "command", "network_arch", "action", "env", "nccl_env", "cpus", "memory",
            "results_dir"} <= everywhere
    assert SlurmSpec.key("nodes") == "num_nodes" and KubernetesSpec.key("nodes") == "nodes"
    assert DockerSpec.key("nodes") is None and SlurmSpec.key("gpus") is None  # SLURM counts GPUs in total


@pytest.mark.parametrize("cls, spec", [
    (KubernetesSpec, {"image": "nvcr.io/x:1", "command": "sleep 1", "gpus": 2, "nodes": 2, "cpu": "4",
                      "mounts": [{"pvc": "data", "mount_path": "/data"}], "results_dir": "/data/results",
                      "node_selector": {"gpu": "a100"}, "working_dir": "/w"}),
    (SlurmSpec, {"image": "nvcr.io/x:1", "command": ["python3", "t.py"], "num_nodes": 2, "num_gpus": 8,
                 "cpus_per_task": 8, "memory": "64G", "results_base": "/lustre/r", "time_hours": 2.5,
                 "secrets": ["HF_TOKEN"], "prefetch": {"ckpt/m.pth": "s3://bucket/m.pth"}}),
    (DockerSpec, {"image": "nvcr.io/x:1", "command": "nvidia-smi", "gpus": "all", "cpus": 4.0, "memory": "16g",
                  "mounts": [{"host": "/d", "container": "/d", "read_only": True}], "workdir": "/w",
                  "secrets": ["NGC_KEY"]}),
])
def test_a_valid_spec_is_typed_and_written_back_as_it_was(cls, spec):
    typed = cls.parse(spec)
    assert typed.to_dict() == spec
    assert typed.image == "nvcr.io/x:1" and typed.command == spec["command"]
    assert typed.cpus == spec.get(cls.key("cpus"))  # read by its one name whatever the platform spells


def test_the_bank_s_own_specs_are_typed_too(monkeypatch):
    from taobank.platforms.kubernetes import nccl_probe as k8s_probe
    from taobank.platforms.slurm import nccl_probe as slurm_probe

    monkeypatch.delenv("TAO_K8S_NCCL_ENV", raising=False)
    k = k8s_probe.build_spec(nodes=2, gpus=1, image=None, timeout=60)
    assert KubernetesSpec.parse(k).to_dict() == k and KubernetesSpec.parse(k).nodes == 2
    s = slurm_probe.build_spec(nodes=2, gpus=1, image=None, timeout=60, partition="gpu")
    assert SlurmSpec.parse(s).nodes == 2 and SlurmSpec.parse(s).num_gpus == 2


def test_slurm_reads_mem_as_an_alias_of_memory_and_writes_memory():
    """One spelling (issue 49): the flag --memory and the key memory; mem (sbatch's word, the key before) is read."""
    old = {"command": "true", "mem": "8G"}
    assert SlurmSpec.parse(old).memory == "8G" and SlurmSpec.parse(old).to_dict() == {"command": "true", "memory": "8G"}
    assert SlurmSpec.of(old).memory == "8G"  # a spec saved before the rename, read back for continue
    from taobank.platforms.slurm import spec as slurm_spec

    assert slurm_spec.typed(old).memory == "8G"
    with pytest.raises(TaoError, match="both memory and mem"):
        SlurmSpec.parse({"command": "true", "mem": "8G", "memory": "16G"})
    with pytest.raises(TaoError, match="memory"):
        slurm_spec.typed({"command": "true", "mem": "lots"})


def test_refusals_name_the_field():
    with pytest.raises(TaoError, match="num_nodes"):
        DockerSpec.from_dict({"image": "x", "command": "y", "num_nodes": 2})
    with pytest.raises(TaoError, match="unknown field 'nodes'"):
        DockerSpec.from_dict({"image": "x", "command": "y", "nodes": 2})  # one host: no nodes
    with pytest.raises(TaoError, match="has no nodes"):
        DockerSpec(image="x", command="y", nodes=2).to_dict()
    with pytest.raises(TaoError, match="field gpus"):
        KubernetesSpec.parse({"image": "x", "command": "y", "gpus": "two"})


def test_the_shared_flags_land_where_the_typed_spec_spells_them(monkeypatch):
    from taobank.platforms.kubernetes import spec as k8s_flags
    from taobank.platforms.slurm import flags as slurm_flags

    monkeypatch.delenv("TAO_K8S_NCCL_ENV", raising=False)
    given = {"image": "nvcr.io/x:1", "nodes": 2, "cpus": "8", "memory": "64G"}
    slurm = SlurmSpec.parse(slurm_flags.spec_from_flags(None, {**given, "command": ["python3", "t.py"]}))
    k8s = KubernetesSpec.parse(k8s_flags.spec_from_flags(None, {**given, "command": "sleep 1", "cpus": "500m"}))
    assert (slurm.nodes, slurm.cpus, slurm.memory) == (2, 8, "64G")
    assert slurm.to_dict()["num_nodes"] == 2 and slurm.to_dict()["memory"] == "64G"
    assert (k8s.nodes, k8s.cpus, k8s.memory) == (2, "500m", "64G") and k8s.to_dict()["cpu"] == "500m"
    assert set(jobspec.FLAG_FIELDS.values()) <= SHARED
