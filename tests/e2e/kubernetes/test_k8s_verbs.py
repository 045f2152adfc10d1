"""The four verbs against the local control plane (real apiserver, scheduler, controllers, kwok kubelets)."""
from __future__ import annotations

import base64
import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from k8s_verbs_support import BANK, NAMESPACE, ON_KWOK, k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk

pytestmark = pytest.mark.e2e

BUSYBOX = "docker.io/library/busybox:1.37.0"
BASE = ["--image", BUSYBOX, "--network-arch", "deformable_detr", "--action", "train", "--pvc-mount", f"{lk.PVC_NAME}:/results",
        *ON_KWOK]


def ann(key: str, value: str) -> list[str]:
    return ["--pod-annotation", f"{key}={value}"]


def terminal(st: dict) -> bool:
    return st["state"] in ("COMPLETE", "ERROR", "CANCELED")


def test_single_pod_submit_status_complete_logs(k8s):
    out = k8s.submit(*BASE, "--command", "echo hello", "--gpus", "1",
                     *ann(lk.RUN_DURATION_ANNOTATION, "3s"))
    jid = out["id"]
    assert out["backend_ref"] == f"{NAMESPACE}/{out['name']}" and out["uid"]
    rec = k8s.record(jid)
    assert rec["backend"]["uid"] == out["uid"] and rec["backend"]["namespace"] == NAMESPACE
    job = k8s.kjson("get", "job", out["name"])
    assert job["metadata"]["labels"]["tao-job-id"] == jid
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["/bin/sh", "-c"] and command[3:] == ["tao-main", "/bin/sh", "-c", "echo hello"]
    assert "envFrom" not in job["spec"]["template"]["spec"]["containers"][0]  # no credentials -> no Secret ref
    running = k8s.wait(jid, lambda s: s["state"] in ("RUNNING", "COMPLETE"))
    final = k8s.wait(jid, terminal)
    assert final["state"] == "COMPLETE", final
    assert running["state"] in ("RUNNING", "COMPLETE")
    assert final["saved_logs"]  # saved next to the record at the terminal transition
    k8s.call_log.write_text("")
    logs = k8s.tao("logs", jid)
    assert logs.returncode == 0
    from taobank import pins  # noqa: PLC0415

    from taobank.platforms.kubernetes.logs import FINAL_LINES_MAX  # noqa: PLC0415

    tail = int(pins.resolve("kubernetes.logs_tail"))
    log_calls = [a for a in k8s.calls() if a[:2] == ["kubectl", "-n"] and "logs" in a]
    # room for the final status lines a finished pod prints last (left out: issue 49's empty logs --tail)
    assert log_calls and all(f"--tail={tail + FINAL_LINES_MAX}" in a for a in log_calls) and tail > 10
    # every kubectl call carried the namespace
    for argv in k8s.calls():
        if argv[0] == "kubectl":
            assert "-n" in argv and argv[argv.index("-n") + 1] == NAMESPACE, argv


def test_gate_refuses_too_many_gpus_and_leaves_no_record(k8s):
    proc = k8s.tao("submit", *BASE, "--command", "true", "--gpus", str(lk.GPUS_PER_NODE + 1), check=False)
    assert proc.returncode == 1
    assert "insufficient GPUs" in proc.stderr and "tao-gpu-cordoned" in proc.stderr and "cordoned" in proc.stderr
    state = k8s.env["TAO_STATE_DIR"]
    assert not list(__import__("pathlib").Path(state).glob("*.json"))  # gate ran before the open
    assert not any(a[:1] == ["kubectl"] and ("apply" in a or "create" in a) for a in k8s.calls())


def test_busy_gpus_queue_the_job_with_per_node_figures_require_free_refuses(k8s):
    """A job that fits the fake nodes but finds one busy is submitted and waits; --require-free refuses it;
    one that can never fit (3 nodes of the 2 schedulable, the cordoned one excluded) is refused."""
    busy = lk.busy_pod(lk.GPU_NODES[0], name=f"busy-{secrets.token_hex(3)}")
    k8s.kubectl("create", "-f", "-", stdin=json.dumps(busy))
    state = __import__("pathlib").Path(k8s.env["TAO_STATE_DIR"])
    try:
        strict = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "8", "--nodes", "2", "--require-free",
                         "--skip-nccl-probe", check=False)  # (the NCCL gate comes first)
        assert strict.returncode == 1 and "insufficient free GPUs now (--require-free)" in strict.stderr, strict.stderr
        assert f"{lk.GPU_NODES[0]} 0/8 free" in strict.stderr and "(cordoned)" in strict.stderr
        assert not list(state.glob("*.json"))
        never = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "8", "--nodes", "3", "--skip-nccl-probe",
                        check=False)
        assert never.returncode == 1 and "can never run here: need 3 nodes" in never.stderr, never.stderr
        assert not list(state.glob("*.json"))
        proc = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "8", "--nodes", "2", "--json", "--skip-nccl-probe",
                       *ann(lk.RUN_DURATION_ANNOTATION, "2s"), check=False)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        k8s.ids.append(out["id"])
        assert out["gate"].startswith("queued:") and f"{lk.GPU_NODES[0]} 0/8 free" in out["gate"]
        assert "note:" in proc.stderr and "waits until 2 nodes with 8 nvidia.com/gpu each free up" in proc.stderr
        st = k8s.wait(out["id"], lambda s: s["reason"] == "InsufficientGPU", timeout=60)
        assert st["state"] == "PENDING"  # queued behind the busy node, as the gate said
    finally:
        k8s.kubectl("delete", "pod", busy["metadata"]["name"], "--wait=false", check=False)
    st = k8s.wait(out["id"], terminal, timeout=90)  # the node freed up: the queued job ran
    assert st["state"] == "COMPLETE", st


def test_pending_missing_pvc(k8s):
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "1", "--pvc-mount", "no-such-claim:/data")
    st = k8s.wait(out["id"], lambda s: s["reason"] == "MissingPVC", timeout=60)
    assert st["state"] == "PENDING" and 'persistentvolumeclaim "no-such-claim" not found' in st["message"]


def test_pending_insufficient_gpu_when_capacity_vanished_after_the_gate(k8s):
    """The gate cannot stop a race: render + apply a too-big Job as if GPUs vanished after it."""
    from taobank import records  # noqa: PLC0415

    import os  # noqa: PLC0415
    os.environ["TAO_STATE_DIR"] = k8s.env["TAO_STATE_DIR"]
    rec = records.open_record("kubernetes", BUSYBOX, "dino", "train", "A", "/results")
    k8s.ids.append(rec["id"])
    text = subprocess.run([sys.executable, str(BANK / "scripts" / "render_k8s_job.py"), "--image", BUSYBOX,
                           "--command", "true", "--gpus", str(lk.GPUS_PER_NODE + 4), "--no-results", "--job-id", rec["id"],
                           "--namespace", NAMESPACE], capture_output=True, text=True, check=True, env=k8s.env).stdout
    job = json.loads(k8s.kubectl("create", "-f", "-", "-o", "json", stdin=text).stdout)
    records.mark(rec["id"], "PENDING", backend_ref=f"{NAMESPACE}/{job['metadata']['name']}",
                 backend={"uid": job["metadata"]["uid"], "namespace": NAMESPACE, "name": job["metadata"]["name"]})
    st = k8s.wait(rec["id"], lambda s: s["reason"] == "InsufficientGPU", timeout=60)
    assert st["state"] == "PENDING" and "Insufficient nvidia.com/gpu" in st["message"]


@pytest.mark.parametrize("annotations,err_class,reason,code", [
    ({lk.FAIL_REASON_ANNOTATION: lk.OOM_REASON}, "ERR_INFRA", "OOMKilled", 137),
    ({lk.FAIL_EXIT_CODE_ANNOTATION: "3"}, "ERR_PROGRAM", "NonZeroExit", 3),
])
def test_error_classification(k8s, annotations, err_class, reason, code):
    args = [x for k, v in annotations.items() for x in ann(k, v)]
    out = k8s.submit(*BASE, "--command", "exit 3", "--gpus", "1", *args, *ann(lk.RUN_DURATION_ANNOTATION, "1s"))
    st = k8s.wait(out["id"], terminal)
    assert (st["state"], st["err_class"], st["reason"], st["exit_code"]) == ("ERROR", err_class, reason, code), st
    rec = k8s.record(out["id"])
    assert rec["state"] == "ERROR" and rec["err_class"] == err_class
    if code == 3:
        assert "exited with code 3" in st["message"]


def test_cancel_running_job_deletes_job_and_secret(k8s):
    token = "tok-" + secrets.token_hex(12)
    out = k8s.submit(*BASE, "--command", "sleep 1000", "--gpus", "1", "--secret-env", "HF_TOKEN",
                     *ann(lk.KEEP_RUNNING_ANNOTATION, "true"), env={"HF_TOKEN": token})
    jid = out["id"]
    k8s.wait(jid, lambda s: s["state"] == "RUNNING")
    (res,) = json.loads(k8s.tao("cancel", jid, "--json").stdout)
    assert res["state"] == "CANCELED" and res["deleted"] is True
    assert k8s.record(jid)["state"] == "CANCELED"
    sec = k8s.kubectl("get", "secret", f"tao-creds-{out['name']}", "--ignore-not-found", "-o", "name").stdout
    assert sec.strip() == ""
    end = time.time() + 30
    while k8s.kubectl("get", "job", out["name"], "--ignore-not-found", "-o", "name").stdout.strip():
        assert time.time() < end, "Job not deleted"
        time.sleep(1)
    (again,) = json.loads(k8s.tao("cancel", jid, "--json").stdout)
    assert again["deleted"] is False and "already CANCELED" in again["message"]
    # the delete carried the UID precondition, on stdin, and foreground propagation
    deletes = [a for a in k8s.calls() if a[:1] == ["kubectl"] and "--raw" in a]
    assert deletes and deletes[0][-2:] == ["-f", "-"]


def test_cancel_never_touches_same_name_job_with_other_uid(k8s):
    out = k8s.submit(*BASE, "--command", "sleep 1000", "--gpus", "1", *ann(lk.KEEP_RUNNING_ANNOTATION, "true"))
    jid, name = out["id"], out["name"]
    job = k8s.kjson("get", "job", name)
    k8s.kubectl("delete", "job", name, "--wait=true", "--cascade=foreground", "--timeout=60s")
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        job["metadata"].pop(key, None)
    job.pop("status", None)
    tmpl = job["spec"]["template"]
    tmpl["metadata"]["labels"] = {"tao-job-id": jid, "impostor": "true"}
    job["spec"].pop("selector", None)
    newjob = json.loads(k8s.kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps(job)).stdout)
    assert newjob["metadata"]["uid"] != out["uid"]
    (res,) = json.loads(k8s.tao("cancel", jid, "--json").stdout)
    assert res["deleted"] is False and "another UID" in res["message"]
    still = k8s.kjson("get", "job", name)
    assert still["metadata"]["uid"] == newjob["metadata"]["uid"] and not still["metadata"].get("deletionTimestamp")
    # the server-side precondition itself: a delete naming the old UID is refused
    body = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": out["uid"]}})
    refused = k8s.kubectl("delete", "--raw", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{name}", "-f", "-",
                          stdin=body, check=False)
    assert refused.returncode != 0
    assert k8s.kjson("get", "job", name)["metadata"]["uid"] == newjob["metadata"]["uid"]


def test_cancel_finished_job_is_success_that_says_so(k8s):
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "1", *ann(lk.RUN_DURATION_ANNOTATION, "1s"))
    end = time.time() + 60
    while k8s.kjson("get", "job", out["name"]).get("status", {}).get("succeeded") != 1:
        assert time.time() < end
        time.sleep(1)
    (res,) = json.loads(k8s.tao("cancel", out["id"], "--json").stdout)
    assert res["deleted"] is False and "already finished (COMPLETE)" in res["message"]
    assert k8s.record(out["id"])["state"] == "COMPLETE"


def test_ttl_deleted_job_reads_unknown_record_kept_logs_saved(k8s):
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "1", "--ttl", "3", *ann(lk.RUN_DURATION_ANNOTATION, "1s"),
                     "--secret-env", "HF_TOKEN", env={"HF_TOKEN": "hf_" + secrets.token_hex(8)})
    jid = out["id"]
    st = k8s.wait(jid, terminal)
    assert st["state"] == "COMPLETE" and st["saved_logs"]
    end = time.time() + 60
    while k8s.kubectl("get", "job", out["name"], "--ignore-not-found", "-o", "name").stdout.strip():
        assert time.time() < end, "TTL controller did not delete the Job"
        time.sleep(1)
    # the credential Secret is owned by the Job: the garbage collector removes it with the Job
    while k8s.kubectl("get", "secret", f"tao-creds-{out['name']}", "--ignore-not-found", "-o", "name").stdout.strip():
        assert time.time() < end + 30, "owned Secret outlived its Job"
        time.sleep(1)
    calls = len(k8s.calls())
    st = k8s.status(jid)  # a terminal record is the source of truth: shown as stored, no cluster call
    assert st["state"] == "COMPLETE" and st["observed"] is None and st["saved_logs"]
    assert len(k8s.calls()) == calls
    logs = k8s.tao("logs", jid)
    assert "logs saved when it ended" in logs.stderr and logs.stdout.strip()


def test_secret_never_on_argv_manifest_or_record(k8s):
    value = "AKIA" + secrets.token_hex(16)
    hf = "hf_" + secrets.token_hex(16)
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "1", "--secret-env", "AWS_SECRET_ACCESS_KEY",
                     "--secret-env", "HF_TOKEN", *ann(lk.KEEP_RUNNING_ANNOTATION, "true"),
                     env={"AWS_SECRET_ACCESS_KEY": value, "HF_TOKEN": hf})
    calls = k8s.call_log.read_text()
    assert value not in calls and hf not in calls
    job_yaml = k8s.kubectl("get", "job", out["name"], "-o", "yaml").stdout
    assert value not in job_yaml and hf not in job_yaml
    pod = k8s.kjson("get", "job", out["name"])["spec"]["template"]["spec"]
    assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": f"tao-creds-{out['name']}"}}]
    record_text = (k8s.record(out["id"]) and json.dumps(k8s.record(out["id"])))
    assert value not in record_text
    sec = k8s.kjson("get", "secret", f"tao-creds-{out['name']}")
    assert base64.b64decode(sec["data"]["AWS_SECRET_ACCESS_KEY"]).decode() == value
    assert "kubectl.kubernetes.io/last-applied-configuration" not in (sec["metadata"].get("annotations") or {})
    owners = sec["metadata"].get("ownerReferences") or []
    assert owners and owners[0]["uid"] == out["uid"] and owners[0]["kind"] == "Job"
    st = k8s.tao("status", out["id"])
    assert value not in st.stdout + st.stderr


def test_resubmit_with_same_id_reconciles_instead_of_second_job(k8s):
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "1", *ann(lk.KEEP_RUNNING_ANNOTATION, "true"))
    again = k8s.submit(*BASE, "--command", "true", "--gpus", "1", "--job-id", out["id"])
    assert again["reconciled"] is True and again["uid"] == out["uid"]
    jobs = k8s.kjson("get", "jobs", "-l", f"tao-job-id={out['id']}")["items"]
    assert len(jobs) == 1


def test_resubmit_creates_the_service_a_dead_submit_never_made_owned_by_the_job(k8s):
    """The first submit died between the Job and its headless Service (deleted here to stand for it)."""
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "1", "--nodes", "2", "--skip-nccl-probe",
                     *ann(lk.KEEP_RUNNING_ANNOTATION, "true"))
    k8s.kubectl("delete", "service", out["name"], "--wait=true")
    again = k8s.submit(*BASE, "--command", "true", "--gpus", "1", "--nodes", "2", "--skip-nccl-probe",
                       "--job-id", out["id"])
    assert again["reconciled"] is True and again["uid"] == out["uid"]
    assert f"Service {out['name']}" in again["gate"]
    svc = k8s.kjson("get", "service", out["name"])
    assert [o["uid"] for o in svc["metadata"]["ownerReferences"]] == [out["uid"]]
    assert len(k8s.kjson("get", "jobs", "-l", f"tao-job-id={out['id']}")["items"]) == 1


def test_namespace_and_context_variables_honoured(k8s):
    ns = "tao-k8s-ns-" + secrets.token_hex(3)
    k8s.kubectl("create", "namespace", ns, ns="default")
    try:
        out = k8s.submit(*BASE, "--command", "true", "--gpus", "0",
                         env={"TAO_K8S_NAMESPACE": ns, "TAO_K8S_CONTEXT": lk.ADMIN_CONTEXT})
        assert out["backend_ref"].startswith(ns + "/") and out["context"] == lk.ADMIN_CONTEXT
        assert k8s.kjson("get", "job", out["name"], ns=ns)["metadata"]["namespace"] == ns
        (st,) = json.loads(k8s.tao("status", out["id"], "--json", env={"TAO_K8S_NAMESPACE": "default"}).stdout)
        assert st["state"] in ("PENDING", "RUNNING", "COMPLETE")  # found via the record, not the env
        for argv in k8s.calls():
            if argv[:1] == ["kubectl"]:
                assert argv[1:5] == ["--context", lk.ADMIN_CONTEXT, "-n", ns], argv
        # an unknown context is refused by kubectl itself: proof the flag is passed
        bad = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "0", check=False,
                      env={"TAO_K8S_NAMESPACE": ns, "TAO_K8S_CONTEXT": "no-such-context"})
        assert bad.returncode != 0 and "no-such-context" in bad.stderr
    finally:
        k8s.kubectl("delete", "namespace", ns, "--wait=false", ns="default", check=False)


def test_restricted_user_context_can_submit_in_its_namespace(k8s):
    env = {"KUBECONFIG": k8s.env[lk.USER_KUBECONFIG_ENV]}
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "1", env=env)
    assert out["uid"]
    bad = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "0", check=False,
                  env={**env, "TAO_K8S_NAMESPACE": "default"})
    assert bad.returncode == 1 and "may not create jobs in namespace default" in bad.stderr


def test_server_rejection_leaves_no_record_and_no_objects(k8s):
    """The server dry-run of the spec runs before the record opens: a rejected spec costs nothing."""
    token = "tok-" + secrets.token_hex(8)
    proc = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "1", "--secret-env", "HF_TOKEN",
                   "--pod-annotation", "not a valid key!=x", check=False, env={"HF_TOKEN": token})
    assert proc.returncode == 1 and "dry-run" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not list(__import__("pathlib").Path(k8s.env["TAO_STATE_DIR"]).glob("*.json"))
    writes = [a for a in k8s.calls() if a[:1] == ["kubectl"] and "--dry-run=server" not in a
              and "auth" not in a and ("apply" in a or "create" in a)]
    assert k8s.calls() and not writes  # no Secret, no Job
    assert token not in proc.stderr + proc.stdout


def test_missing_namespace_is_one_actionable_line_and_no_record(k8s):
    proc = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "0", check=False,
                   env={"TAO_K8S_NAMESPACE": "no-such-ns"})
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "namespace no-such-ns does not exist" in proc.stderr and "TAO_K8S_NAMESPACE" in proc.stderr
    assert not list(__import__("pathlib").Path(k8s.env["TAO_STATE_DIR"]).glob("*.json"))


def test_job_deleted_outside_the_bank_reads_unknown(k8s):
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "1", *ann(lk.KEEP_RUNNING_ANNOTATION, "true"))
    k8s.wait(out["id"], lambda s: s["state"] == "RUNNING")
    k8s.kubectl("delete", "job", out["name"], "--cascade=background", "--wait=true", "--timeout=60s")
    st = k8s.wait(out["id"], lambda s: s["observed"] == "UNKNOWN")
    assert st["state"] == "UNKNOWN" and k8s.record(out["id"])["state"] == "UNKNOWN"


def test_tier_c_job_lifecycle_with_fetch_and_upload_containers(k8s):
    out = k8s.submit(*BASE, "--command", "train", "--gpus", "1", "--storage-tier", "C",
                     "--secret-env", "AWS_ACCESS_KEY_ID", "--secret-env", "AWS_SECRET_ACCESS_KEY",
                     *ann(lk.RUN_DURATION_ANNOTATION, "2s"),
                     env={"AWS_ACCESS_KEY_ID": "AKIA" + secrets.token_hex(8), "AWS_SECRET_ACCESS_KEY": secrets.token_hex(20)})
    pod = k8s.kjson("get", "job", out["name"])["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["fetch"]
    assert [c["name"] for c in pod["containers"]] == ["main", "upload"]
    st = k8s.wait(out["id"], terminal)
    assert st["state"] == "COMPLETE", st


def test_sweep_is_one_list_call_per_namespace_and_survives_a_bad_context(k8s):
    ids = [k8s.submit(*BASE, "--command", "true", "--gpus", "0", *ann(lk.KEEP_RUNNING_ANNOTATION, "true"))["id"]
           for _ in range(3)]
    import os  # noqa: PLC0415

    from taobank import records  # noqa: PLC0415

    os.environ["TAO_STATE_DIR"] = k8s.env["TAO_STATE_DIR"]
    lost = records.open_record("kubernetes", "busybox", "dino", "train", "A", "/results")
    records.mark(lost["id"], "PENDING", backend_ref=f"{NAMESPACE}/gone",
                 backend={"uid": "0b5c7a4e-0000-4000-8000-000000000001", "namespace": NAMESPACE, "name": "gone",
                          "context": "no-such-context"})
    damaged = records.open_record("kubernetes", "busybox", "dino", "train", "A", "/results")
    records.mark(damaged["id"], "PENDING", backend_ref=f"{NAMESPACE}/x", backend={"name": "--all-namespaces"})
    k8s.call_log.write_text("")
    res = json.loads(k8s.tao("status", "--json").stdout)
    by_id = {r["id"]: r for r in res}
    assert set(ids) | {lost["id"], damaged["id"]} <= set(by_id)
    assert by_id[lost["id"]]["reason"] == "QueryFailed" and by_id[lost["id"]]["state"] == "PENDING"
    assert by_id[damaged["id"]]["reason"] == "BadRecord" and "--all-namespaces" not in by_id[damaged["id"]]["message"]
    assert not any("--all-namespaces" in a for a in k8s.calls())
    lists = [a for a in k8s.calls() if a[:1] == ["kubectl"] and "jobs,pods" in a]
    assert len(lists) == 2  # one per (context, namespace) group, not one per job


def test_ngc_pull_secret_from_env_on_stdin(k8s):
    key = "nvapi-" + secrets.token_hex(16)
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "0", "--ngc-pull-secret", env={"NGC_KEY": key})
    pod = k8s.kjson("get", "job", out["name"])["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": f"tao-pull-{out['name']}"}]
    assert "envFrom" not in pod["containers"][0]  # a pull secret is not an env credential
    sec = k8s.kjson("get", "secret", f"tao-pull-{out['name']}")
    assert sec["type"] == "kubernetes.io/dockerconfigjson"
    cfg = json.loads(base64.b64decode(sec["data"][".dockerconfigjson"]))
    assert cfg["auths"]["nvcr.io"]["password"] == key and cfg["auths"]["nvcr.io"]["username"] == "$oauthtoken"
    assert sec["metadata"]["ownerReferences"][0]["uid"] == out["uid"]
    assert key not in k8s.call_log.read_text()
    missing = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "0", "--ngc-pull-secret", check=False,
                      env={"NGC_KEY": ""})
    assert missing.returncode == 1 and "NGC_KEY" in missing.stderr


def _token_kubeconfig(k8s, tmp_path, sa: str, rules: list[dict], read_nodes: bool = True) -> str:
    """A kubeconfig for a ServiceAccount bound to a Role with exactly ``rules`` in the jobs namespace
    (plus, with ``read_nodes``, a ClusterRole to list nodes, as the capacity gate needs)."""
    rbac = "rbac.authorization.k8s.io"
    subject = [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
    role = {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": {"name": sa}, "rules": rules}
    binding = {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": {"name": sa},
               "roleRef": {"apiGroup": rbac, "kind": "Role", "name": sa}, "subjects": subject}
    objs = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}}, role, binding]
    if read_nodes:
        objs += [{"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": f"{sa}-nodes"},
                  "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]},
                 {"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": f"{sa}-nodes"},
                  "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": f"{sa}-nodes"}, "subjects": subject}]
    k8s.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    token = k8s.kubectl("create", "token", sa, "--duration=10m").stdout.strip()
    cfg = json.loads(k8s.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    cluster = cfg["clusters"][0]
    kc = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
          "users": [{"name": sa, "user": {"token": token}}],
          "contexts": [{"name": sa, "context": {"cluster": cluster["name"], "user": sa, "namespace": NAMESPACE}}],
          "current-context": sa}
    path = tmp_path / f"{sa}.kubeconfig"
    path.write_text(json.dumps(kc))
    path.chmod(0o600)
    return str(path)


def test_user_who_may_only_create_gets_a_job_whose_secret_and_service_are_owned_from_the_start(k8s, tmp_path):
    """create is the only write verb: the Secret and Service are created already owned by the Job."""
    rules = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
             {"apiGroups": [""], "resources": ["secrets", "services"], "verbs": ["create"]}]
    kc = _token_kubeconfig(k8s, tmp_path, "tao-createonly", rules)
    proc = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "0", "--nodes", "2", "--skip-nccl-probe", "--secret-env", "HF_TOKEN",
                   "--json", check=False, env={"KUBECONFIG": kc, "HF_TOKEN": "hf_" + secrets.token_hex(8)})
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = json.loads(proc.stdout)
    k8s.ids.append(out["id"])
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": out["name"], "uid": out["uid"]}]
    for kind, name in (("secret", f"tao-creds-{out['name']}"), ("service", out["name"])):
        refs = k8s.kjson("get", kind, name)["metadata"]["ownerReferences"]
        assert [{k: r[k] for k in ("apiVersion", "kind", "name", "uid")} for r in refs] == owner, kind
    assert not [a for a in k8s.calls() if a[:1] == ["kubectl"] and ("patch" in a or "apply" in a)]
    # the server dry run authorized the Job and Service; can-i asked only for the Secret (never dry-run)
    asked = sorted(a[a.index("can-i") + 1] + " " + a[a.index("can-i") + 2] for a in k8s.calls() if "can-i" in a)
    assert asked == ["create secrets"]


@pytest.mark.parametrize("missing", ["services", "secrets"])
def test_a_create_the_role_lacks_is_refused_before_the_record_by_name(k8s, tmp_path, missing):
    """The Service is in the server dry run (its Forbidden is named); the Secret is asked with can-i."""
    granted = [r for r in ("secrets", "services") if r != missing]
    rules = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
             {"apiGroups": [""], "resources": granted, "verbs": ["create"]}]
    kc = _token_kubeconfig(k8s, tmp_path, f"tao-no-{missing}", rules)
    state = Path(k8s.env["TAO_STATE_DIR"])
    before = sorted(state.glob("*.json"))
    proc = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "0", "--nodes", "2", "--skip-nccl-probe",
                   "--secret-env", "HF_TOKEN", check=False,
                   env={"KUBECONFIG": kc, "HF_TOKEN": "hf_" + secrets.token_hex(8)})
    assert proc.returncode == 1 and f"you may not create {missing} in namespace {NAMESPACE}" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(state.glob("*.json")) == before  # no record opened


def test_user_who_may_not_list_nodes_is_warned_and_the_job_goes_on(k8s, tmp_path):
    rules = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "create", "delete"]}]
    kc = _token_kubeconfig(k8s, tmp_path, "tao-nonodes", rules, read_nodes=False)
    proc = k8s.tao("submit", *BASE, "--command", "true", "--gpus", "0", "--quiet", check=False,
                   env={"KUBECONFIG": kc})
    assert proc.returncode == 0, proc.stderr + proc.stdout
    k8s.ids.append(proc.stdout.strip())
    assert "warning:" in proc.stderr and "may not list nodes" in proc.stderr, proc.stderr
    assert k8s.record(proc.stdout.strip())["backend"]["uid"]  # launched


def test_resubmit_with_job_id_recreates_a_missing_credential_secret(k8s):
    """troubleshooting.md: CreateContainerConfigError (the Secret is gone) -> re-run submit with --job-id."""
    token = "hf_" + secrets.token_hex(8)
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "0", "--secret-env", "HF_TOKEN",
                     *ann(lk.KEEP_RUNNING_ANNOTATION, "true"), env={"HF_TOKEN": token})
    name = f"tao-creds-{out['name']}"
    k8s.kubectl("delete", "secret", name, "--wait=true")
    again = k8s.submit(*BASE, "--command", "true", "--gpus", "0", "--secret-env", "HF_TOKEN", "--job-id", out["id"],
                       env={"HF_TOKEN": token})
    assert again["reconciled"] is True and again["uid"] == out["uid"]
    sec = k8s.kjson("get", "secret", name)
    assert base64.b64decode(sec["data"]["HF_TOKEN"]).decode() == token
    assert sec["metadata"]["ownerReferences"][0]["uid"] == out["uid"]
    assert token not in k8s.call_log.read_text()
    assert len(k8s.kjson("get", "jobs", "-l", f"tao-job-id={out['id']}")["items"]) == 1


def test_cancel_of_an_interrupted_submit_deletes_its_job_and_secret(k8s):
    """Submit killed after apply but before the record was bound (no backend_ref/uid): cancel must still find
    the Job and Secret by the job-id label, not just mark the record and leave the GPUs held."""
    opened = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_job_record.py"), "open", "--platform",
                             "kubernetes", "--image", BUSYBOX, "--network-arch", "dino", "--action", "train",
                             "--storage-tier", "A", "--results-dir", "/results", "--meta", f"namespace={NAMESPACE}"],
                            capture_output=True, text=True, env=k8s.env, check=True)
    jid = opened.stdout.strip()
    k8s.ids.append(jid)
    rendered = subprocess.run([sys.executable, str(BANK / "scripts" / "render_k8s_job.py"), "--image", BUSYBOX,
                               "--command", "sleep 1000", "--gpus", "0", "--no-results", "--job-id", jid, "--namespace", NAMESPACE,
                               "--cred-secret", f"tao-creds-{jid}", *ann(lk.KEEP_RUNNING_ANNOTATION, "true")],
                              capture_output=True, text=True, env=k8s.env, check=True).stdout
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"tao-creds-{jid}", "labels": {"tao-job-id": jid}},
              "stringData": {"HF_TOKEN": "x"}}
    k8s.kubectl("create", "-f", "-", stdin=json.dumps(secret))
    k8s.kubectl("create", "-f", "-", stdin=rendered)
    assert not k8s.record(jid).get("backend_ref")
    (res,) = json.loads(k8s.tao("cancel", jid, "--json").stdout)
    assert res["state"] == "CANCELED" and res["deleted"] is True, res
    end = time.time() + 30
    while k8s.kubectl("get", "jobs,secrets", "-l", f"tao-job-id={jid}", "-o", "name").stdout.strip():
        assert time.time() < end, "the interrupted submit's Job/Secret outlived the cancel"
        time.sleep(1)
    assert k8s.record(jid)["state"] == "CANCELED"


def test_status_json_of_an_unlaunched_record_has_the_same_fields(k8s):
    opened = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_job_record.py"), "open", "--platform",
                             "kubernetes", "--image", BUSYBOX, "--network-arch", "dino", "--action", "train",
                             "--storage-tier", "A", "--results-dir", "/results", "--meta", f"namespace={NAMESPACE}"],
                            capture_output=True, text=True, env=k8s.env, check=True)
    jid = opened.stdout.strip()
    out = k8s.submit(*BASE, "--command", "true", "--gpus", "0", *ann(lk.KEEP_RUNNING_ANNOTATION, "true"))
    launched = k8s.status(out["id"])
    unlaunched = k8s.status(jid)
    # a running job's view may add how its progress read went (progress_error / progress_hint): not a field
    launched_fields = {k for k in launched if not k.startswith("progress_")}
    assert set(unlaunched) == launched_fields, (sorted(unlaunched), sorted(launched))
    assert unlaunched["state"] == "PENDING" and f"submit --job-id {jid}" in unlaunched["message"]
    text = k8s.tao("status", jid).stdout.strip()
    assert text == f"{jid} PENDING: {unlaunched['message']}"
