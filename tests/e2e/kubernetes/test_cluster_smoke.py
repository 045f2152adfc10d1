"""The local Kubernetes cluster is real: admission, scheduling, Job lifecycle, RBAC, logs.

Every check runs the real kubectl against the real kube-apiserver (+ controllers,
scheduler, kwok kubelets) started by the ``k8s_cluster`` fixture.
"""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from taobank import pins
import testclusters.kubernetes as lk
from testclusters.kubernetes import cluster_state, control_plane

BUSYBOX = pins.resolve("images.busybox")


def kc(env: dict[str, str], *args: str, stdin: str | None = None, kubeconfig: str | None = None,
       check: bool = True) -> subprocess.CompletedProcess:
    full = dict(os.environ, **env)
    if kubeconfig:
        full["KUBECONFIG"] = kubeconfig
    proc = subprocess.run(["kubectl", *args], input=stdin, env=full, capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def job(name: str, *, gpus: int = 1, annotations: dict | None = None, namespace: str = lk.NAMESPACE) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 300,
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {lk.FAKE_NODE_LABEL: "true"},  # kwok plays these pods
                    "containers": [{
                        "name": "train", "image": BUSYBOX, "command": ["true"],
                        "resources": {"limits": {lk.GPU_RESOURCE: str(gpus)}},
                    }],
                },
            },
        },
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def create(env: dict, obj: dict, **kw) -> None:
    kc(env, "apply", "-f", "-", stdin=json.dumps(obj), **kw)


def pods_of(env: dict, job_name: str) -> list[dict]:
    out = kc(env, "-n", lk.NAMESPACE, "get", "pods", "-l", f"job-name={job_name}", "-o", "json").stdout
    return json.loads(out)["items"]


def wait_pod(env: dict, job_name: str, pred, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        for pod in pods_of(env, job_name):
            last = pod
            if pred(pod):
                return pod
        time.sleep(0.3)
    raise AssertionError(f"pod of job {job_name} never matched; last status: {json.dumps((last or {}).get('status'))}")


def job_condition(env: dict, name: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj = json.loads(kc(env, "-n", lk.NAMESPACE, "get", "job", name, "-o", "json").stdout)
        for cond in obj.get("status", {}).get("conditions", []):
            if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
                return cond["type"]
        time.sleep(0.3)
    raise AssertionError(f"job {name} did not finish within {timeout}s")


def terminated(pod: dict) -> dict:
    return pod["status"]["containerStatuses"][0]["state"]["terminated"]


def test_server_reports_pinned_version(k8s_cluster):
    info = json.loads(kc(k8s_cluster, "version", "-o", "json").stdout)
    assert info["serverVersion"]["gitVersion"] == pins.resolve("test_clusters.kubernetes.version")


def test_env_names_the_jobs_namespace_and_both_kubeconfigs(k8s_cluster):
    assert k8s_cluster["TAO_K8S_NAMESPACE"] == lk.NAMESPACE
    assert k8s_cluster["TAO_K8S_SKIP_NODE_RUNTIME_CHECK"] == "1"
    ctx = kc(k8s_cluster, "config", "get-contexts", "-o", "name").stdout.split()
    assert {lk.ADMIN_CONTEXT, lk.USER_CONTEXT} <= set(ctx)
    for key in ("KUBECONFIG", lk.USER_KUBECONFIG_ENV):
        assert os.stat(k8s_cluster[key]).st_mode & 0o077 == 0, f"{key} file must be mode 600"


def test_server_side_dry_run_rejects_an_invalid_job(k8s_cluster):
    good = job(unique("dry"))
    kc(k8s_cluster, "apply", "--dry-run=server", "-f", "-", stdin=json.dumps(good))
    bad = job(unique("dry"))
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"  # forbidden for Jobs
    proc = kc(k8s_cluster, "apply", "--dry-run=server", "-f", "-", stdin=json.dumps(bad), check=False)
    assert proc.returncode != 0
    assert "spec.template.spec.restartPolicy" in proc.stderr
    assert kc(k8s_cluster, "-n", lk.NAMESPACE, "get", "job", bad["metadata"]["name"], check=False).returncode != 0


def test_real_nodes_run_containerd_at_the_pinned_version_with_fake_gpus(k8s_cluster):
    nodes = {n["metadata"]["name"]: n for n in json.loads(kc(k8s_cluster, "get", "nodes", "-o", "json").stdout)["items"]}
    version = pins.resolve("test_clusters.kubernetes.version")
    for name in lk.REAL_NODES:
        node = nodes[name]
        assert node["metadata"]["labels"][lk.REAL_NODE_LABEL] == "true"
        assert lk.FAKE_NODE_LABEL not in node["metadata"]["labels"]
        assert node["status"]["allocatable"][lk.GPU_RESOURCE] == str(lk.GPUS_PER_NODE)
        info = node["status"]["nodeInfo"]
        assert info["kubeletVersion"] == version and info["containerRuntimeVersion"].startswith("containerd://")
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
    ips = {nodes[n]["status"]["addresses"][0]["address"] for n in lk.REAL_NODES}
    assert len(ips) == len(lk.REAL_NODES) and k8s_cluster[lk.BRIDGE_IP_ENV] in ips


def test_nodes_two_schedulable_gpu_nodes_and_one_cordoned(k8s_cluster):
    nodes = {n["metadata"]["name"]: n for n in json.loads(kc(k8s_cluster, "get", "nodes", "-o", "json").stdout)["items"]}
    assert set(lk.GPU_NODES) | {lk.CORDONED_NODE} <= set(nodes)
    for name in lk.GPU_NODES + (lk.CORDONED_NODE,):
        assert nodes[name]["status"]["allocatable"][lk.GPU_RESOURCE] == str(lk.GPUS_PER_NODE)
    assert nodes[lk.CORDONED_NODE]["spec"].get("unschedulable") is True
    assert not any(nodes[n]["spec"].get("unschedulable") for n in lk.GPU_NODES)


def test_gpu_job_schedules_on_a_gpu_node_is_seen_running_then_completes(k8s_cluster):
    name = unique("gpu")
    create(k8s_cluster, job(name, gpus=4, annotations={lk.RUN_DURATION_ANNOTATION: "4s"}))
    running = wait_pod(k8s_cluster, name, lambda p: p["status"].get("phase") == "Running", timeout=30)
    assert running["spec"]["nodeName"] in lk.GPU_NODES
    assert running["spec"]["nodeName"] != lk.CORDONED_NODE
    assert job_condition(k8s_cluster, name) == "Complete"
    done = wait_pod(k8s_cluster, name, lambda p: p["status"].get("phase") == "Succeeded")
    assert terminated(done)["exitCode"] == 0


def test_job_larger_than_any_node_stays_pending_with_insufficient_gpu(k8s_cluster):
    name = unique("huge")
    create(k8s_cluster, job(name, gpus=lk.GPUS_PER_NODE * 2))

    def unschedulable(pod: dict) -> bool:
        return any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
                   for c in pod["status"].get("conditions", []))

    pod = wait_pod(k8s_cluster, name, unschedulable, timeout=30)
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "Insufficient nvidia.com/gpu" in cond["message"]
    time.sleep(2)
    assert all(p["status"].get("phase") == "Pending" for p in pods_of(k8s_cluster, name))
    kc(k8s_cluster, "-n", lk.NAMESPACE, "delete", "job", name, "--wait=false")


def test_a_busy_node_is_skipped(k8s_cluster):
    busy = lk.busy_pod(lk.GPU_NODES[0], name=unique("busy"))
    create(k8s_cluster, busy)
    try:
        name = unique("gpu8")
        create(k8s_cluster, job(name, gpus=lk.GPUS_PER_NODE, annotations={lk.RUN_DURATION_ANNOTATION: "1s"}))
        pod = wait_pod(k8s_cluster, name, lambda p: bool(p["spec"].get("nodeName")), timeout=30)
        assert pod["spec"]["nodeName"] == lk.GPU_NODES[1]
        assert job_condition(k8s_cluster, name) == "Complete"
    finally:
        kc(k8s_cluster, "-n", lk.NAMESPACE, "delete", "pod", busy["metadata"]["name"], "--wait=false")


@pytest.mark.parametrize("annotations,code,reason", [
    ({lk.FAIL_EXIT_CODE_ANNOTATION: "3"}, 3, "Error"),
    ({lk.FAIL_REASON_ANNOTATION: lk.OOM_REASON}, lk.OOM_EXIT_CODE, "OOMKilled"),
])
def test_failure_injection_sets_exit_code_and_reason(k8s_cluster, annotations, code, reason):
    name = unique("fail")
    create(k8s_cluster, job(name, annotations={lk.RUN_DURATION_ANNOTATION: "1s", **annotations}))
    pod = wait_pod(k8s_cluster, name, lambda p: p["status"].get("phase") == "Failed", timeout=30)
    assert terminated(pod)["exitCode"] == code
    assert terminated(pod)["reason"] == reason
    assert job_condition(k8s_cluster, name) == "Failed"
    obj = json.loads(kc(k8s_cluster, "-n", lk.NAMESPACE, "get", "job", name, "-o", "json").stdout)
    failed = next(c for c in obj["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"


def test_waiting_reason_keeps_the_pod_pending(k8s_cluster):
    name = unique("pull")
    create(k8s_cluster, job(name, annotations={lk.WAITING_REASON_ANNOTATION: "ImagePullBackOff",
                                               lk.WAITING_MESSAGE_ANNOTATION: "Back-off pulling image"}))

    def waiting(pod: dict) -> bool:
        st = pod["status"].get("containerStatuses") or [{}]
        return st[0].get("state", {}).get("waiting", {}).get("reason") == "ImagePullBackOff"

    pod = wait_pod(k8s_cluster, name, waiting, timeout=30)
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"] == "Back-off pulling image"
    time.sleep(2)
    assert [p["status"]["phase"] for p in pods_of(k8s_cluster, name)] == ["Pending"]
    kc(k8s_cluster, "-n", lk.NAMESPACE, "delete", "job", name, "--wait=false")


def test_init_containers_complete_before_the_main_container_runs(k8s_cluster):
    """Storage tier C fetches in an initContainer: the fake pod must walk through it."""
    name = unique("init")
    obj = job(name, annotations={lk.RUN_DURATION_ANNOTATION: "2s"})
    obj["spec"]["template"]["spec"]["initContainers"] = [{"name": "fetch", "image": BUSYBOX}]
    create(k8s_cluster, obj)
    running = wait_pod(k8s_cluster, name, lambda p: p["status"].get("phase") == "Running", timeout=30)
    assert running["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert job_condition(k8s_cluster, name) == "Complete"


def test_keep_running_pod_stays_running_until_the_job_is_deleted(k8s_cluster):
    name = unique("hold")
    create(k8s_cluster, job(name, annotations={lk.KEEP_RUNNING_ANNOTATION: "true", lk.RUN_DURATION_ANNOTATION: "1s"}))
    wait_pod(k8s_cluster, name, lambda p: p["status"].get("phase") == "Running", timeout=30)
    time.sleep(3)
    assert [p["status"]["phase"] for p in pods_of(k8s_cluster, name)] == ["Running"]
    kc(k8s_cluster, "-n", lk.NAMESPACE, "delete", "job", name, "--cascade=foreground", "--timeout=60s")
    assert pods_of(k8s_cluster, name) == []


def test_restricted_user_can_run_jobs_only_in_its_namespace(k8s_cluster):
    user = k8s_cluster[lk.USER_KUBECONFIG_ENV]

    def can(*args: str) -> bool:
        proc = kc(k8s_cluster, "auth", "can-i", *args, kubeconfig=user, check=False)
        return proc.stdout.strip() == "yes"

    for verb_res in (("create", "jobs.batch"), ("delete", "jobs.batch"), ("create", "secrets"),
                     ("create", "services"), ("get", "pods/log"), ("watch", "pods")):
        assert can(*verb_res, "-n", lk.NAMESPACE), verb_res
    assert can("list", "nodes")
    assert not can("create", "jobs.batch", "-n", "default")
    assert not can("create", "secrets", "-n", "kube-system")
    assert not can("delete", "nodes")
    assert not can("create", "namespaces")
    # The admin kubeconfig carries the restricted context too (what TAO_K8S_CONTEXT selects).
    via_context = kc(k8s_cluster, "--context", lk.USER_CONTEXT, "auth", "can-i", "create", "jobs.batch",
                     "-n", "default", check=False)
    assert via_context.stdout.strip() == "no"
    assert kc(k8s_cluster, "auth", "can-i", "create", "jobs.batch", "-n", "default").stdout.strip() == "yes"
    name = unique("user")
    create(k8s_cluster, job(name, annotations={lk.RUN_DURATION_ANNOTATION: "1s"}), kubeconfig=user)
    other = kc(k8s_cluster, "apply", "-f", "-", stdin=json.dumps(job(unique("user"), namespace="default")),
               kubeconfig=user, check=False)
    assert other.returncode != 0 and "forbidden" in other.stderr
    assert job_condition(k8s_cluster, name) == "Complete"


def test_tier_a_pvc_is_bound(k8s_cluster):
    phase = kc(k8s_cluster, "-n", lk.NAMESPACE, "get", "pvc", lk.PVC_NAME, "-o", "jsonpath={.status.phase}").stdout
    assert phase == "Bound"
    assert k8s_cluster[lk.PVC_ENV] == lk.PVC_NAME


def test_kubectl_logs_serves_default_and_per_pod_content(k8s_cluster, tmp_path):
    name = unique("logs")
    create(k8s_cluster, job(name, annotations={lk.KEEP_RUNNING_ANNOTATION: "true"}))
    pod = wait_pod(k8s_cluster, name, lambda p: p["status"].get("phase") == "Running", timeout=30)
    pod_name = pod["metadata"]["name"]
    out = kc(k8s_cluster, "-n", lk.NAMESPACE, "logs", pod_name).stdout
    assert "fake container on a kwok node" in out
    log = tmp_path / "train.log"
    log.write_text(lk.cri_log(["epoch 1/2 loss=0.5", "Xid 79: GPU has fallen off the bus"]))
    create(k8s_cluster, lk.pod_logs(pod_name, lk.NAMESPACE, str(log)))
    deadline = time.monotonic() + 20
    while "Xid 79" not in out and time.monotonic() < deadline:
        time.sleep(0.5)
        out = kc(k8s_cluster, "-n", lk.NAMESPACE, "logs", pod_name).stdout
    assert out.splitlines() == ["epoch 1/2 loss=0.5", "Xid 79: GPU has fallen off the bus"]
    kc(k8s_cluster, "-n", lk.NAMESPACE, "delete", "job", name, "--wait=false")


def test_up_again_is_a_no_op(k8s_cluster):
    before = lk.status()
    assert before["ready"]
    t0 = time.monotonic()
    assert lk.up() == k8s_cluster
    assert time.monotonic() - t0 < 10
    assert lk.status()["pids"] == before["pids"]


def test_a_daemon_that_cannot_start_is_named_with_its_log(k8s_cluster, tmp_path, monkeypatch):
    """A broken start fails with one line naming the daemon and its log, and leaves nothing running."""
    monkeypatch.setenv("TAO_LOCAL_CLUSTER_DIR", str(tmp_path))
    real = control_plane._apiserver_argv
    monkeypatch.setattr(control_plane, "_apiserver_argv", lambda exe, ports: real(exe, ports) + ["--no-such-flag"])
    with pytest.raises(lk.TaoError) as err:
        lk.up()
    msg = str(err.value)
    log = tmp_path / "kubernetes" / "logs" / "kube-apiserver.log"
    assert msg.startswith("kube-apiserver ") and str(log) in msg and "\n" not in msg
    assert "unknown flag: --no-such-flag" in log.read_text()
    assert lk.status()["pids"] == dict.fromkeys(lk.all_daemons())  # etcd was stopped again
    lk.down()
    assert not (tmp_path / "kubernetes").exists()


def test_private_cluster_up_noop_down_up_down(k8s_cluster, tmp_path, monkeypatch):
    """A second cluster in its own state dir (the shared one is left alone): the full cycle."""
    shared = lk.status()
    monkeypatch.setenv("TAO_LOCAL_CLUSTER_DIR", str(tmp_path))
    try:
        env = lk.up()
        cluster = cluster_state._load_cluster()
        exes, bridge = cluster["exes"], cluster["net"]["bridge"]
        assert set(exes) == {*lk.all_daemons(), "kueue"}  # Kueue is watched apart from the cluster's daemons
        assert env["KUBECONFIG"] == str(tmp_path / "kubernetes" / "admin.kubeconfig")
        assert env["KUBECONFIG"] != k8s_cluster["KUBECONFIG"]
        first = lk.status()
        assert first["ready"] and first["server"] != shared["server"]
        assert lk.up() == env and lk.status()["pids"] == first["pids"]
        lk.down()
        assert not (tmp_path / "kubernetes").exists()
        assert not any(lk.pid_runs(pid, exes[n]) for n, pid in first["pids"].items())
        # nothing of the real nodes outlives down: no mount below the state dir, no bridge, no cgroup root
        assert str(tmp_path) not in Path("/proc/self/mountinfo").read_text()
        assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0
        assert not any((Path("/sys/fs/cgroup/memory") / n["cgroup"].lstrip("/")).exists()
                       for n in cluster["nodes"].values())
        assert lk.status()["ready"] is False and lk.status()["kueue"]["pid"] is None  # down stopped Kueue too
        restarted = lk.up()
        # the same env, except the S3 port (picked free at every start, on the same bridge address)
        assert restarted.pop(lk.S3_ENDPOINT_ENV).rsplit(":", 1)[0] == env[lk.S3_ENDPOINT_ENV].rsplit(":", 1)[0]
        assert restarted == {k: v for k, v in env.items() if k != lk.S3_ENDPOINT_ENV}
        again = lk.status()
        assert again["ready"] and set(again["pids"].values()).isdisjoint(first["pids"].values())
        assert kc(env, "-n", lk.NAMESPACE, "get", "serviceaccount", "default").returncode == 0
    finally:
        lk.down()
    assert not (tmp_path / "kubernetes").exists()
    monkeypatch.undo()  # back to the session's cluster (whatever TAO_LOCAL_CLUSTER_DIR it uses)
    assert lk.status()["pids"] == shared["pids"]  # the shared cluster was never touched
