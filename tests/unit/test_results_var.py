"""Issue 37: one variable names a job's own results folder in its container on every platform, ``RESULTS_DIR``
(``contract.RESULTS_VAR``); TAO's pair ``TAO_API_RESULTS_DIR``/``TAO_API_JOB_ID`` stays beside it, and a job's
own env may set none of them."""
from __future__ import annotations

import subprocess

import pytest

from taobank.contract import RESULTS_VAR, SubmitOptions
from taobank.errors import TaoError
from taobank.platforms.docker import render as drender, submit as dsubmit
from taobank.platforms.docker.spec import typed
from taobank.platforms.kubernetes.render import find, render_manifests
from taobank.platforms.slurm import render as srender, resources, storage

JOB_ID = "dino-train-0a1b2c3d"


def test_the_one_name():
    assert RESULTS_VAR == "RESULTS_DIR"


def test_docker_sets_it_to_the_jobs_folder_in_the_container():
    p = dsubmit.plan_submit(typed({"image": "i:1", "command": ["true"], "gpus": 0, "results_dir": "/data/results"}),
                            SubmitOptions(), job_id=JOB_ID, env={}, ram=64 * 1024 ** 3)
    argv = drender.run_argv(p.run)
    env = dict(argv[i + 1].split("=", 1) for i, w in enumerate(argv) if w == "--env" and "=" in argv[i + 1])
    assert env[RESULTS_VAR] == f"/results/{JOB_ID}" == env["TAO_API_RESULTS_DIR"] + "/" + env["TAO_API_JOB_ID"]
    assert f"target=/results/{JOB_ID}" in " ".join(argv)  # the folder the host's results folder is mounted on


@pytest.mark.parametrize("extra,folder", [({}, f"/results/{JOB_ID}"),
                                          ({"results_dir": "/results/dino", "results_exact": True}, "/results/dino"),
                                          ({"storage_tier": "C", "results_dir": "s3://b/runs", "mounts": []},
                                           f"/tao-staging/results/{JOB_ID}")])
def test_kubernetes_sets_it_to_the_pods_folder(extra, folder):
    spec = {"image": "i", "command": "c", "mounts": [{"pvc": "ws", "mount_path": "/results"}], **extra}
    job = find(render_manifests(spec, job_id=JOB_ID, namespace="default", cred_secret="c"), "Job")
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[RESULTS_VAR] == folder == env["TAO_API_RESULTS_DIR"] + "/" + env["TAO_API_JOB_ID"]


def test_kubernetes_without_results_sets_none():
    job = find(render_manifests({"image": "i", "command": "c", "no_results": True}, job_id=JOB_ID,
                                namespace="default"), "Job")
    assert RESULTS_VAR not in {e["name"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_slurm_script_exports_it_before_the_command(tmp_path):
    res = resources.resolve({"partition": "local", "cpus_per_task": 1, "num_gpus": 1}, {})
    text = srender.render(srender.ScriptInput(
        job_id=JOB_ID, job_dir=f"{tmp_path}/jobs/{JOB_ID}", results_parent=f"{tmp_path}/results",
        command=["python3", "train.py"], resources=res, runtime="pyxis", image="nvcr.io#nvidia/tao/x:1",
        container_mounts=str(tmp_path)))
    start = text.index("export TAO_API_JOB_ID=")
    end = text.index("\n", text.index(f"export {RESULTS_VAR}="))
    block = text[start:end] + f'\nprintf %s "${RESULTS_VAR}"'  # the header's lines, run as the job runs them
    assert text.index(f"export {RESULTS_VAR}=") < text.index("srun ")
    out = subprocess.run(["bash", "-c", block], capture_output=True, text=True, check=True).stdout
    assert out == f"{tmp_path}/results/{JOB_ID}" and (tmp_path / "results" / JOB_ID).is_dir()


@pytest.mark.parametrize("platform", ["docker", "kubernetes", "slurm"])
def test_a_job_env_may_not_set_it(platform):
    env = {RESULTS_VAR: "/elsewhere"}
    with pytest.raises(TaoError, match=RESULTS_VAR):
        if platform == "docker":
            dsubmit.plan_submit(typed({"image": "i:1", "command": ["true"], "gpus": 0, "results_dir": "/data/r", "env": env}),
                                SubmitOptions(), job_id=JOB_ID, env={}, ram=1024 ** 3)
        elif platform == "kubernetes":
            render_manifests({"image": "i", "command": "c", "mounts": [{"pvc": "ws", "mount_path": "/results"}],
                              "env": env}, job_id=JOB_ID, namespace="default")
        else:
            from taobank.envfile import check_job_env

            check_job_env(env, None, reserved=storage.RESERVED_ENV)
