"""Where a Kubernetes job's results go: under a mount or an s3:// prefix, one folder per job, told to the pod."""
from __future__ import annotations

import pytest

from taobank.contract import SubmitOptions
from taobank.errors import TaoError
from taobank.platforms.kubernetes import render
from taobank.platforms.kubernetes.render import find, render_manifests

JOB_ID = "dino-train-0a1b2c3d"
WS = {"pvc": "ws", "mount_path": "/results"}


def pod_env(spec: dict) -> dict:
    job = find(render_manifests(spec, job_id=JOB_ID, namespace="default", cred_secret="c"), "Job")
    return {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_default_is_one_folder_per_job_under_the_first_writable_mount():
    spec = {"image": "i", "command": "c", "mounts": [{"pvc": "data", "mount_path": "/data", "read_only": True}, WS]}
    plan = render.results_plan(spec).for_job(JOB_ID)
    assert plan.folder == f"/results/{JOB_ID}" == plan.pod_folder
    env = pod_env(spec)
    assert env["TAO_API_RESULTS_DIR"] == "/results" and env["TAO_API_JOB_ID"] == JOB_ID  # parent + folder name


def test_given_results_dir_is_the_parent_unless_exact():
    spec = {"image": "i", "command": "c", "mounts": [WS], "results_dir": "/results/dino"}
    assert render.results_plan(spec).for_job(JOB_ID).folder == f"/results/dino/{JOB_ID}"
    exact = render.results_plan({**spec, "results_exact": True}).for_job(JOB_ID)
    assert (exact.folder, exact.parent, exact.name) == ("/results/dino", "/results", "dino")
    env = pod_env({**spec, "results_exact": True})
    assert env["TAO_API_RESULTS_DIR"] + "/" + env["TAO_API_JOB_ID"] == "/results/dino"


@pytest.mark.parametrize("spec,why", [
    ({"results_dir": "/results/run1"}, "is on no mounted volume"),  # the reported bug: written into the pod
    ({"results_dir": "/other", "mounts": [WS]}, "is on no mounted volume"),
    ({}, "nothing mounted"),
    ({"mounts": [{**WS, "read_only": True}], "results_dir": "/results"}, "read-only"),
    ({"mounts": [{**WS, "read_only": True}]}, "nothing mounted"),
    ({"results_dir": "s3://b/p", "mounts": [WS]}, "storage_tier C"),
    ({"results_dir": "relative/x", "mounts": [WS]}, "absolute"),
    ({"results_dir": "/results/../etc", "mounts": [WS]}, "absolute"),
    ({"results_exact": True, "mounts": [WS]}, "needs results_dir"),
])
def test_results_that_would_be_lost_are_refused_in_one_line(spec, why):
    with pytest.raises(TaoError, match=why) as exc:
        render_manifests({"image": "i", "command": "c", **spec}, job_id=JOB_ID, namespace="default")
    assert "\n" not in str(exc.value)


def test_tier_c_results_are_staged_then_uploaded_to_the_jobs_own_prefix():
    spec = {"image": "i", "command": "c", "storage_tier": "C", "results_dir": "s3://bucket/runs/"}
    plan = render.results_plan(spec, staging="/tao-staging").for_job(JOB_ID)
    assert plan.folder == f"s3://bucket/runs/{JOB_ID}"
    job = find(render_manifests(spec, job_id=JOB_ID, namespace="default", cred_secret="c"), "Job")
    main, upload = job["spec"]["template"]["spec"]["containers"]
    assert upload["command"][4:] == [f"/tao-staging/results/{JOB_ID}", f"s3://bucket/runs/{JOB_ID}"]
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert env["TAO_API_RESULTS_DIR"] == "/tao-staging/results" and env["TAO_API_JOB_ID"] == JOB_ID


def test_no_results_sets_nothing_and_the_user_cannot_override_the_results_env():
    assert "TAO_API_RESULTS_DIR" not in pod_env({"image": "i", "command": "c", "no_results": True})
    with pytest.raises(TaoError, match="TAO_API_RESULTS_DIR"):
        render_manifests({"image": "i", "command": "c", "mounts": [WS], "env": {"TAO_API_RESULTS_DIR": "/x"}},
                         job_id=JOB_ID, namespace="default")


def test_the_record_keeps_the_jobs_folder(fake, state_dir):
    from fakeproc import echo_applied, items, node, k8s_cluster
    from taobank.core import platform
    from taobank import records

    k8s_cluster(fake)
    fake.kubectl("apply", answer=echo_applied())
    view = platform.get("kubernetes").submit({"image": "i", "command": "c", "gpus": 1, "mounts": [WS]}, SubmitOptions())
    rec = records.load(view.id)
    assert rec["results_dir"] == view.results_dir == f"/results/{view.id}"


def test_output_copy_wraps_the_argv_unparsed_and_keeps_the_exit_code(tmp_path):
    """The wrapper, run by a real POSIX sh: output on stdout and in <folder>/logs/<host>.log, same exit code."""
    import subprocess

    from taobank.platforms.kubernetes import render

    spec = {"image": "i", "args": ["sh", "-c", 'echo "out $1"; echo err >&2; exit 7', "x", "a b; $(id)"],
            "mounts": [WS]}
    job = find(render_manifests(spec, job_id=JOB_ID, namespace="default"), "Job")
    (main,) = job["spec"]["template"]["spec"]["containers"]
    assert main["command"][:4] == ["/bin/sh", "-c", render.kube_literal(render.LOG_WRAPPER), "tao-main"]
    assert main["command"][4:] == spec["args"]
    env = {"PATH": "/usr/bin:/bin", "TAO_API_RESULTS_DIR": str(tmp_path), "TAO_API_JOB_ID": JOB_ID, "HOSTNAME": "p-0"}
    as_kubelet_passes_it = [a.replace("$$", "$") for a in main["command"][:4]] + main["command"][4:]
    proc = subprocess.run(as_kubelet_passes_it, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 7 and proc.stdout == "out a b; $(id)\nerr\n"
    assert (tmp_path / JOB_ID / "logs" / "p-0.log").read_text() == "out a b; $(id)\nerr\n"
    assert not list((tmp_path / JOB_ID / "logs").glob(".exit-*"))
    off = find(render_manifests({**spec, "log_copy": False}, job_id=JOB_ID, namespace="default"), "Job")
    assert off["spec"]["template"]["spec"]["containers"][0]["command"] == spec["args"]


def test_open_record_names_the_jobs_folder_with_its_minted_id(state_dir):
    from taobank import records

    rec = records.open_record("kubernetes", "i", "dino", "train", "A", "/results/{id}")
    assert rec["results_dir"] == f"/results/{rec['id']}" == records.load(rec["id"])["results_dir"]
