"""SLURM NCCL probe: a thin adapter over taobank.core.nccl_probe (key, spec, submit) and the multi-node gate."""
from __future__ import annotations

import pytest

from fakeproc import find_answer, sacct_row, sweep_answer
from taobank.contract import SubmitOptions
from taobank.core import nccl_probe as core
from taobank.core import platform
from taobank import records
from taobank.errors import TaoError
from taobank.platforms.slurm import nccl_probe
from taobank.platforms.slurm import submit as slurm_submit

TWO_NODES = {"network_arch": "dino", "action": "train", "container_runtime": "none", "num_nodes": 2, "num_gpus": 2,
             "partition": "gpu", "command": ["true"]}


def _probe_job(slurm, state="COMPLETED", code="0:0"):
    slurm.ssh("STAGE")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "901\n")
    slurm.ssh("SWEEP", lambda call: sweep_answer(sacct=[sacct_row("901", _only_id(), state, code)])(call))


def _only_id() -> str:
    (rec,) = records.list_records("slurm")
    return rec["id"]


def test_the_probe_is_an_ordinary_job_without_retries_and_its_ok_opens_the_gate(slurm):
    with pytest.raises(TaoError, match=r"need an ok NCCL probe and no probe has run: run `tao_slurm.py nccl-probe`"):
        slurm_submit.submit(TWO_NODES)
    assert slurm.calls == []  # refused before any connection
    _probe_job(slurm)
    out = nccl_probe.probe(runtime="none", partition="gpu", interval=0.5)
    assert out["verdict"] == "ok" and out["cluster"] == "login1/gpu" and not out["cached"]
    rec = records.load(out["job_id"])
    assert rec["backend"]["infra_retries"] is False and rec["backend"]["self_retry"] is False
    sbatch = next(c for c in slurm.calls if c.script == "STAGE")
    from test_orchestration_slurm import _staged

    script = _staged(sbatch)[f"sbatch/job_{rec['id']}.sbatch"]
    assert "timeout -k 10 300 torchrun --nnodes=" in script and "#SBATCH --nodes=2" in script
    assert "#SBATCH --wait-all-nodes=1" in script and "tao_retry" not in script
    again = nccl_probe.probe(runtime="none", partition="gpu")
    assert again["cached"] and again["job_id"] == out["job_id"]
    # the gate is open for this cluster and partition, and the record says why
    slurm.ssh("SBATCH", "902\n")
    job = slurm_submit.submit(TWO_NODES)
    assert job["backend"]["nccl_probe"] == "ok" and job["backend"]["nccl_probe_job"] == out["job_id"]
    with pytest.raises(TaoError, match="need an ok NCCL probe"):  # another partition: other nodes, other network
        slurm_submit.submit({**TWO_NODES, "partition": "other"})


@pytest.mark.parametrize("code,verdict", [("124:0", "hang/timeout"), ("1:0", "failed")])
def test_a_failed_probe_is_cached_as_such_and_the_gate_stays_closed(slurm, code, verdict):
    _probe_job(slurm, "FAILED", code)
    slurm.ssh("TAIL_FILES", "")
    out = nccl_probe.probe(runtime="none", partition="gpu", interval=0.5)
    assert out["verdict"] == verdict and "--nccl-env" in out["advice"]
    assert core.cached("slurm", "login1/gpu")["verdict"] == verdict
    assert records.load(out["job_id"])["state"] == "ERROR" and len(records.list_records("slurm")) == 1  # no resubmit
    with pytest.raises(TaoError, match=f"the last probe said {verdict}"):
        slurm_submit.submit(TWO_NODES)


def test_skip_is_explicit_and_recorded(slurm):
    slurm.ssh("STAGE")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "903\n")
    view = platform.get("slurm").submit(TWO_NODES, SubmitOptions(skip_nccl_probe=True))
    assert records.load(view.id)["backend"]["nccl_probe"] == "skipped"
    single = {**TWO_NODES, "num_nodes": 1, "num_gpus": 1}
    slurm.ssh("SBATCH", "904\n")
    assert "nccl_probe" not in slurm_submit.submit(single)["backend"]  # one node: no gate


def test_the_one_line_form_runs_the_same_script(capsys):
    exec(core.one_line_python("x = 6 * 7\nprint(f'sum={x}')\n"))
    assert capsys.readouterr().out == "sum=42\n"
    assert "\n" not in core.probe_command(30, one_line=True)



@pytest.mark.parametrize("nodes,gpus", [(2, 1), (2, 4), (4, 2), (3, 4), (2, 7), (2, 8), (3, 8), (2, 16)])
def test_any_nodes_by_gpus_per_node_resolves_to_exactly_that(nodes, gpus):
    from taobank.platforms.slurm import resources
    from taobank.platforms.slurm.nccl_probe import build_spec

    res = resources.resolve(build_spec(nodes=nodes, gpus=gpus, image=None, timeout=60, partition="gpu"), {})
    assert (res.nodes, res.gpus_per_node) == (nodes, gpus)
    assert res.exclusive == (gpus >= int(resources.defaults()["max_num_gpus_per_node"]))


def test_gloo_cpu_probe_asks_for_no_gpu_and_runs_one_python_per_node():
    spec = nccl_probe.build_spec(nodes=2, gpus=1, image=None, timeout=60, backend="gloo-cpu")
    assert spec["num_gpus"] == 0 and spec["num_nodes"] == 2 and spec["memory"] == core.pins.resolve("nccl_probe.slurm_mem")
    assert spec["command"].startswith("timeout -k 10 60 python3 -c ") and "torchrun" not in spec["command"]
    from taobank.platforms.slurm import resources

    res = resources.resolve(spec, {})
    assert (res.nodes, res.gpus_per_node) == (2, 0)
    nccl = nccl_probe.build_spec(nodes=2, gpus=1, image=None, timeout=60)
    # the NCCL probe checks for PyTorch and a GPU before torchrun; torchrun's underscore options (every release)
    assert nccl["command"].startswith(core.gpu_precheck()) and "--nproc_per_node=" in nccl["command"]
    with pytest.raises(TaoError, match="NCCL needs a GPU"):
        nccl_probe.build_spec(nodes=2, gpus=0, image=None, timeout=60)
    assert nccl_probe.build_spec(nodes=2, gpus=0, image=None, timeout=60, backend="gloo-cpu")["num_gpus"] == 0
