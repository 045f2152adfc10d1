"""The skill's Jobs on the real nodes: a kubelet, containerd and runc run the container.

No annotation steers these pods: the output, exit codes, OOM kills, deadlines,
image pulls and rendezvous below all come from real processes.
"""
from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from k8s_verbs_support import BANK, ON_REAL, gloo_probe_on_real_nodes, k8s  # noqa: F401  (k8s is a fixture)

import testclusters.kubernetes as lk
from taobank import pins

pytestmark = pytest.mark.e2e

BUSYBOX = str(pins.resolve("images.busybox"))
#: Served only by the local registry, which demands the $oauthtoken credentials.
TAO_IMAGE = str(pins.resolve("images.tao_toolkit.pyt"))
BASE = ["--network-arch", "deformable_detr", "--action", "train", "--pvc-mount", f"{lk.PVC_NAME}:/results", *ON_REAL]


def terminal(st: dict) -> bool:
    return st["state"] in ("COMPLETE", "ERROR", "CANCELED")


def pods_of(k8s, job_id: str) -> list[dict]:
    return k8s.kjson("get", "pods", "-l", f"tao-job-id={job_id}")["items"]


def run_to_end(k8s, *args: str, env: dict | None = None, timeout: float = 150) -> tuple[dict, dict]:
    out = k8s.submit("--image", BUSYBOX, *BASE, *args, env=env)
    return out, k8s.wait(out["id"], terminal, timeout=timeout)


def test_command_output_reaches_logs_and_the_pvc(k8s):
    marker = secrets.token_hex(4)
    out, st = run_to_end(k8s, "--gpus", "1", "--command",
                         f'echo "sum=$((40+2)) job=$TAO_JOB_ID"; echo "{marker}" > "/results/real-{marker}.txt"')
    assert st["state"] == "COMPLETE", st
    (pod,) = pods_of(k8s, out["id"])
    assert pod["spec"]["nodeName"] in lk.REAL_NODES
    logs = k8s.tao("logs", out["id"]).stdout
    assert f"sum=42 job={out['id']}" in logs  # computed by the shell in the container
    assert (lk.state_root() / "pv" / f"real-{marker}.txt").read_text().strip() == marker


def test_dev_shm_is_a_memory_backed_mount_of_the_pinned_size(k8s):
    want_kib = {"8Gi": 8 * 1024 * 1024, "16Gi": 16 * 1024 * 1024}[str(pins.resolve("kubernetes.shm_size_single"))]
    out, st = run_to_end(k8s, "--gpus", "1", "--command", "grep ' /dev/shm ' /proc/mounts; df -k /dev/shm")
    assert st["state"] == "COMPLETE", st
    logs = k8s.tao("logs", out["id"]).stdout
    assert "tmpfs /dev/shm tmpfs" in logs and str(want_kib) in logs, logs


def test_nonzero_exit_is_err_program_with_its_code(k8s):
    out, st = run_to_end(k8s, "--gpus", "1", "--command", "echo about to fail; exit 3")
    assert (st["state"], st["err_class"], st["reason"], st["exit_code"]) == ("ERROR", "ERR_PROGRAM", "NonZeroExit", 3), st
    assert "exited with code 3" in st["message"]
    assert "about to fail" in k8s.tao("logs", out["id"]).stdout


def test_memory_limit_exceeded_is_a_real_oom_kill_and_err_infra(k8s, tmp_path):
    spec = tmp_path / "oom.yaml"
    spec.write_text(yaml.safe_dump({
        "image": BUSYBOX, "network_arch": "deformable_detr", "action": "train", "no_results": True,
        "gpus": 1, "memory_limit": "32Mi", "node_selector": {lk.REAL_NODE_LABEL: "true"},
        # holds ~300 MB in one shell variable: far past the 32 MiB cgroup limit
        "command": "echo allocating; x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived",
    }))
    out = k8s.submit("--spec", str(spec))
    st = k8s.wait(out["id"], terminal, timeout=150)
    assert (st["state"], st["err_class"], st["reason"], st["exit_code"]) == ("ERROR", "ERR_INFRA", "OOMKilled", 137), st
    assert k8s.record(out["id"])["err_class"] == "ERR_INFRA"


def test_active_deadline_stops_a_command_that_runs_too_long(k8s):
    out, st = run_to_end(k8s, "--gpus", "1", "--active-deadline", "5", "--command", "echo started; exec sleep 600")
    assert (st["state"], st["err_class"], st["reason"]) == ("ERROR", "ERR_PROGRAM", "DeadlineExceeded"), st


def test_secret_reaches_the_process_and_nowhere_else(k8s):
    value = "hf_" + secrets.token_hex(16)
    out, st = run_to_end(k8s, "--gpus", "1", "--secret-env", "HF_TOKEN", "--command",
                         'printf %s "$HF_TOKEN" | sha256sum', env={"HF_TOKEN": value})
    assert st["state"] == "COMPLETE", st
    logs = k8s.tao("logs", out["id"]).stdout
    assert hashlib.sha256(value.encode()).hexdigest() in logs  # the process saw the exact value
    assert value not in logs
    assert value not in k8s.call_log.read_text()
    assert value not in json.dumps(k8s.record(out["id"]))
    for kind, name in (("job", out["name"]), ("pods", "-l")):
        args = ("get", kind, name, f"tao-job-id={out['id']}") if name == "-l" else ("get", kind, name)
        assert value not in k8s.kubectl(*args, "-o", "yaml").stdout


def test_logs_are_saved_and_still_shown_after_the_ttl_deleted_the_job(k8s):
    # a TTL a poll on a loaded machine still beats (3 s was not: the pod went between "get pods" and "logs")
    out, st = run_to_end(k8s, "--gpus", "1", "--ttl", "20", "--command", 'echo "kept line $((2*21))"')
    assert st["state"] == "COMPLETE" and st["saved_logs"], st
    end = time.time() + 120
    while k8s.kubectl("get", "job", out["name"], "--ignore-not-found", "-o", "name").stdout.strip():
        assert time.time() < end, "TTL controller did not delete the Job"
        time.sleep(1)
    logs = k8s.tao("logs", out["id"])
    assert "kept line 42" in logs.stdout and "logs saved when it ended" in logs.stderr


def test_cancel_kills_the_running_container(k8s):
    out = k8s.submit("--image", BUSYBOX, *BASE, "--gpus", "1", "--command", "echo started; exec sleep 600")
    k8s.wait(out["id"], lambda s: s["state"] == "RUNNING", timeout=90)
    end = time.time() + 30
    while "started" not in k8s.tao("logs", out["id"], check=False).stdout:
        assert time.time() < end, "the running container printed nothing"
        time.sleep(1)
    (pod,) = pods_of(k8s, out["id"])
    container = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    assert container in lk.running_containers()
    (res,) = json.loads(k8s.tao("cancel", out["id"], "--json").stdout)
    assert res["state"] == "CANCELED" and res["deleted"] is True
    end = time.time() + 60
    while pods_of(k8s, out["id"]) or container in lk.running_containers():
        assert time.time() < end, "the canceled job's container still runs"
        time.sleep(1)


def test_image_pull_needs_the_ngc_pull_secret(k8s):
    lk.forget_image(TAO_IMAGE)
    args = ["--image", TAO_IMAGE, *BASE, "--gpus", "1", "--command", 'echo "pulled and ran"']
    denied = k8s.submit(*args)
    st = k8s.wait(denied["id"], lambda s: s["reason"] in ("ErrImagePull", "ImagePullBackOff"), timeout=90)
    assert st["state"] == "PENDING" and "401 Unauthorized" in st["message"], st
    k8s.tao("cancel", denied["id"])
    key = Path(k8s.env[lk.NGC_KEY_FILE_ENV]).read_text().strip()
    allowed = k8s.submit(*args, "--ngc-pull-secret", env={"NGC_KEY": key})
    st = k8s.wait(allowed["id"], terminal, timeout=150)
    assert st["state"] == "COMPLETE", st
    assert "pulled and ran" in k8s.tao("logs", allowed["id"]).stdout
    assert key not in k8s.call_log.read_text()


RENDEZVOUS = r'''
echo "rank $NODE_RANK of $WORLD_SIZE, master $MASTER_ADDR:$MASTER_PORT"
if [ "$NODE_RANK" = 0 ]; then
  msg=$(nc -l -p "$MASTER_PORT")
  echo "rank 0 received: $msg"
  [ "$msg" = "rank 1 of $WORLD_SIZE" ]
else
  i=0
  until echo "rank $NODE_RANK of $WORLD_SIZE" | nc "$MASTER_ADDR" "$MASTER_PORT"; do
    i=$((i+1)); [ "$i" -lt 270 ] || exit 7; sleep 1  # rank 0's pod may wait for a node other tests hold
  done
  echo "rank $NODE_RANK sent"
fi
'''


def test_two_ranks_meet_over_tcp_at_master_addr_on_two_real_nodes(k8s):
    gloo_probe_on_real_nodes(k8s)  # the gate passes for real (gloo on CPU between the nodes): no --skip-nccl-probe
    # all 8 fake GPUs per pod: each rank needs a node of its own
    out, st = run_to_end(k8s, "--gpus", str(lk.GPUS_PER_NODE), "--nodes", "2", "--command", RENDEZVOUS, timeout=360)
    assert k8s.record(out["id"])["backend"]["nccl_probe_backend"] == "gloo-cpu"
    assert st["state"] == "COMPLETE", st
    pods = pods_of(k8s, out["id"])
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(lk.REAL_NODES)
    logs = k8s.tao("logs", out["id"]).stdout
    assert "rank 0 received: rank 1 of 2" in logs and "rank 1 sent" in logs


def test_tier_c_fetches_its_input_from_s3_and_uploads_its_results(k8s, tmp_path):
    bucket = "tao-" + secrets.token_hex(4)
    lk.s3_make_bucket(bucket)
    lk.s3_put(bucket, "inputs/numbers.txt", "20 22\n")
    spec = tmp_path / "tier-c.yaml"
    spec.write_text(yaml.safe_dump({
        "image": BUSYBOX, "network_arch": "deformable_detr", "action": "train",
        "results_dir": f"s3://{bucket}/results",  # one folder per job under it, uploaded at the end
        "storage_tier": "C", "gpus": 1, "node_selector": {lk.REAL_NODE_LABEL: "true"},
        "s3_inputs": [{"uri": f"s3://{bucket}/inputs/numbers.txt", "path": "/tao-staging/in/numbers.txt"}],
        "command": 'read a b < /tao-staging/in/numbers.txt && '
                   'echo "sum=$((a + b))" > "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID/result.txt" && echo "computed"',
    }))
    secret = secrets.token_hex(20)
    # the fetch and upload containers read S3 settings from the per-job Secret only
    creds = {"AWS_ACCESS_KEY_ID": lk.s3.ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": secret,
             "AWS_DEFAULT_REGION": lk.s3.REGION, "S3_ENDPOINT_URL": lk.s3_endpoint()}
    out = k8s.submit("--spec", str(spec), *[a for name in creds for a in ("--secret-env", name)], env=creds)
    st = k8s.wait(out["id"], terminal, timeout=180)
    assert st["state"] == "COMPLETE", json.dumps(st) + k8s.tao("logs", out["id"], check=False).stdout
    # the initContainer fetched the object, the command read it, the sidecar uploaded what it wrote
    assert lk.s3_get(bucket, f"results/{out['id']}/result.txt").strip() == "sum=42"
    assert k8s.record(out["id"])["results_dir"] == f"s3://{bucket}/results/{out['id']}"  # the record agrees
    assert secret not in k8s.call_log.read_text() and secret not in json.dumps(k8s.record(out["id"]))


def test_tier_c_uploader_waits_for_a_slow_command_whose_pid_file_is_its_real_pid(k8s, tmp_path):
    """The kubelet turns $$ into $: the wrapper's pid file must still hold the wrapper's pid, or the
    uploader's `kill -0` fails at once and it uploads before the command has written anything."""
    bucket = "tao-" + secrets.token_hex(4)
    lk.s3_make_bucket(bucket)
    spec = tmp_path / "tier-c-slow.yaml"
    spec.write_text(yaml.safe_dump({
        "image": BUSYBOX, "network_arch": "deformable_detr", "action": "train",
        "results_dir": f"s3://{bucket}/results", "storage_tier": "C", "gpus": 1,
        "node_selector": {lk.REAL_NODE_LABEL: "true"},
        "command": 'echo "pidfile=$(cat "$TAO_STAGING_DIR/.tao-main-pid") parent=$PPID"; sleep 12; '
                   'echo late > "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID/late.txt"',
    }))
    creds = {"AWS_ACCESS_KEY_ID": lk.s3.ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": secrets.token_hex(20),
             "AWS_DEFAULT_REGION": lk.s3.REGION, "S3_ENDPOINT_URL": lk.s3_endpoint()}
    out = k8s.submit("--spec", str(spec), *[a for name in creds for a in ("--secret-env", name)], env=creds)
    st = k8s.wait(out["id"], terminal, timeout=180)
    logs = k8s.tao("logs", out["id"], check=False).stdout
    assert st["state"] == "COMPLETE", json.dumps(st) + logs
    line = next(ln for ln in logs.splitlines() if "pidfile=" in ln)
    pid, parent = line.split("pidfile=")[1].split(" parent=")
    assert pid.strip().isdigit() and pid.strip() == parent.strip(), line  # the wrapper's own pid, not "$"
    assert lk.s3_get(bucket, f"results/{out['id']}/late.txt").strip() == "late"  # uploaded after the command


def test_the_output_copy_wrapper_on_a_real_pod_ends_with_the_command_despite_a_lingering_child(k8s):
    """`sleep & exit 3`: the background child holds the pipe, yet the container ends with the command
    (not at the deadline), the exit code is 3 and the copy on the volume has the output."""
    t0 = time.time()
    out, st = run_to_end(k8s, "--gpus", "1", "--active-deadline", "100", "--command",
                         'echo "lingering $((40+2))"; sleep 300 & exit 3')
    assert (st["state"], st["err_class"], st.get("exit_code")) == ("ERROR", "ERR_PROGRAM", 3), st
    assert time.time() - t0 < 90, "the wrapper waited for the background child"
    kept = (lk.state_root() / "pv" / out["id"] / "logs").glob("*.log")
    assert any("lingering 42" in p.read_text() for p in kept)


def test_a_failed_s3_fetch_shows_the_fetch_containers_error(k8s, tmp_path):
    bucket = "tao-" + secrets.token_hex(4)
    lk.s3_make_bucket(bucket)
    spec = tmp_path / "tier-c-missing.yaml"
    spec.write_text(yaml.safe_dump({
        "image": BUSYBOX, "network_arch": "deformable_detr", "action": "train", "results_dir": f"s3://{bucket}/r",
        "storage_tier": "C", "gpus": 1, "node_selector": {lk.REAL_NODE_LABEL: "true"},
        "s3_inputs": [{"uri": f"s3://{bucket}/inputs/absent.txt", "path": "/tao-staging/in/absent.txt"}],
        "command": "echo never runs",
    }))
    creds = {"AWS_ACCESS_KEY_ID": lk.s3.ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": secrets.token_hex(20),
             "AWS_DEFAULT_REGION": lk.s3.REGION, "S3_ENDPOINT_URL": lk.s3_endpoint()}
    out = k8s.submit("--spec", str(spec), *[a for name in creds for a in ("--secret-env", name)], env=creds)
    st = k8s.wait(out["id"], terminal, timeout=180)
    assert (st["state"], st["err_class"], st["reason"]) == ("ERROR", "ERR_INFRA", "FetchFailed"), st
    logs = k8s.tao("logs", out["id"], check=False).stdout
    assert "404" in logs or "Not Found" in logs, logs  # aws s3 cp's own message about the missing object


def test_results_go_to_one_folder_per_job_on_the_volume_and_the_record_agrees(k8s):
    """The container writes where TAO_API_RESULTS_DIR/TAO_API_JOB_ID say; that is the record's results_dir."""
    outs = [run_to_end(k8s, "--gpus", "0", "--command",
                       'echo "$TAO_API_JOB_ID" > "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID/who.txt" || '
                       '{ mkdir -p "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" && '
                       'echo "$TAO_API_JOB_ID" > "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID/who.txt"; }')
            for _ in range(2)]
    folders = set()
    for out, st in outs:
        assert st["state"] == "COMPLETE", st
        rec = k8s.record(out["id"])
        assert rec["results_dir"] == f"/results/{out['id']}"
        folders.add(rec["results_dir"])
        assert (lk.state_root() / "pv" / out["id"] / "who.txt").read_text().strip() == out["id"]
    assert len(folders) == 2  # two jobs of the same command, two folders


def test_results_dir_on_no_mounted_volume_is_refused_before_anything_exists(k8s):
    proc = k8s.tao("submit", "--image", BUSYBOX, "--network-arch", "dino", "--action", "train", "--gpus", "0",
                   "--results-dir", "/results/run1", "--command", "true", *ON_REAL, check=False)
    assert proc.returncode == 1 and "is on no mounted volume" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not list(Path(k8s.env["TAO_STATE_DIR"]).glob("*.json"))
    render = subprocess.run([sys.executable, str(BANK / "scripts" / "render_k8s_job.py"), "--image", BUSYBOX,
                             "--results-dir", "/results/run1", "--command", "true"], capture_output=True, text=True)
    assert render.returncode == 1 and "is on no mounted volume" in render.stderr and render.stdout == ""


def test_an_evicted_pod_is_replaced_and_the_job_completes_a_bug_is_not_retried(k8s):
    """Eviction API on a real pod: DisruptionTarget -> the Job controller runs it again (podFailurePolicy);
    the second attempt finds the first one's marker on the volume and finishes."""
    script = ('d="$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID"; mkdir -p "$d"; '
              'if [ -e "$d/first" ]; then echo "second attempt done"; exit 0; fi; '
              'touch "$d/first"; echo "first attempt"; trap "exit 143" TERM; sleep 600 & wait')
    out = k8s.submit("--image", BUSYBOX, *BASE, "--gpus", "1", "--command", script)
    assert "retried up to 3 times" in out["gate"], out["gate"]
    k8s.wait(out["id"], lambda s: s["state"] == "RUNNING", timeout=90)
    end = time.time() + 30
    while not (lk.state_root() / "pv" / out["id"] / "first").exists():
        assert time.time() < end, "the first attempt never started its command"
        time.sleep(0.5)
    (pod,) = pods_of(k8s, out["id"])
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"]}}
    k8s.kubectl("create", "--raw", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/"
                f"{pod['metadata']['name']}/eviction", "-f", "-", stdin=json.dumps(eviction))
    st = k8s.wait(out["id"], terminal, timeout=150)
    assert st["state"] == "COMPLETE", st
    assert st["pod_attempts"] == 2 and "1 pod(s) disrupted and replaced" in st["message"], st
    job = k8s.kjson("get", "job", out["name"])
    assert job["status"]["failed"] == 1 and job["status"]["succeeded"] == 1
    assert "second attempt done" in k8s.tao("logs", out["id"]).stdout
    # a bug is not retried: exit 3 fails the Job at once, one pod ever
    bad, st = run_to_end(k8s, "--gpus", "1", "--command", "exit 3")
    assert (st["state"], st["err_class"], st["exit_code"]) == ("ERROR", "ERR_PROGRAM", 3), st
    failed = k8s.kjson("get", "job", bad["name"])
    assert failed["status"].get("failed") == 1 and len(pods_of(k8s, bad["id"])) == 1
    assert any(c["type"] == "Failed" and c["reason"] == "PodFailurePolicy" for c in failed["status"]["conditions"])


def test_logs_survive_the_ttl_with_nobody_polling(k8s):
    """No status call between submit and TTL cleanup: the copy the pod kept on the volume is what logs shows."""
    out = k8s.submit("--image", BUSYBOX, *BASE, "--gpus", "1", "--ttl", "2", "--command",
                     'echo "kept without a poller $((6*7))"; echo "to stderr" >&2; exit 5')
    end = time.time() + 120
    while k8s.kubectl("get", "job", out["name"], "--ignore-not-found", "-o", "name").stdout.strip():
        assert time.time() < end, "TTL controller did not delete the Job"
        time.sleep(1)
    assert not (Path(k8s.env["TAO_STATE_DIR"]) / f"{out['id']}.d" / "logs.txt").exists()  # nobody saved them
    logs = k8s.tao("logs", out["id"])
    assert "kept without a poller 42" in logs.stdout and "to stderr" in logs.stdout, logs.stdout + logs.stderr
    assert "output copy the job kept on its results volume" in logs.stderr
    kept = (lk.state_root() / "pv" / out["id"] / "logs").glob("*.log")
    assert any("kept without a poller 42" in p.read_text() for p in kept)


def test_missing_inputs_on_the_volume_are_refused_before_any_gpu_or_record(k8s):
    """A GPU-less pod mounting the same PVC runs test -e on what the command names: a missing input (after -e,
    a dataset key) refuses with the list; a missing path that may be an output (mkdir -p) only warns."""
    here = f"inputs-{secrets.token_hex(3)}"
    (lk.state_root() / "pv" / here).mkdir()
    (lk.state_root() / "pv" / here / "train.yaml").write_text("epochs: 1\n")
    cmd = (f"set -- -e /results/{here}/train.yaml dataset.root=/results/{here}/coco; cat /results/{here}/train.yaml; "
           f"ls /results/{here}/coco; mkdir -p /results/{here}/out")
    proc = k8s.tao("submit", "--image", BUSYBOX, *BASE, "--gpus", "1", "--command", cmd, check=False)
    assert proc.returncode == 1, proc.stdout
    assert f"input path(s) missing on the job's volumes: /results/{here}/coco (checked" in proc.stderr, proc.stderr
    assert not list(Path(k8s.env["TAO_STATE_DIR"]).glob("*.json"))
    (lk.state_root() / "pv" / here / "coco").mkdir()
    proc = k8s.tao("submit", "--json", "--image", BUSYBOX, *BASE, "--gpus", "1", "--command", cmd)
    out = json.loads(proc.stdout)
    k8s.ids.append(out["id"])
    assert f"warning: {out['id']} not found on the volumes: /results/{here}/out (the command names them" \
        in proc.stderr, proc.stderr
    assert "2 other path(s) found" in out["gate"]
    st = k8s.wait(out["id"], terminal, timeout=150)
    assert st["state"] == "COMPLETE", st
    # --no-input-check: no helper pod, the gate says nothing about inputs
    out2, st2 = run_to_end(k8s, "--gpus", "1", "--no-input-check", "--command", f"ls /results/{here}/coco")
    assert "inputs" not in out2["gate"] and st2["state"] == "COMPLETE", (out2, st2)


def test_a_sweeps_dry_run_check_refuses_a_missing_e_file_as_its_submit_does(k8s):
    """Issue 49: the sweeps reference ends the command with -e FILE; --dry-run --check runs the input check the
    submit runs (a GPU-less pod, test -e) and refuses a FILE that is not on the volume, opening no record;
    --dry-run alone says in its first line that it checked nothing."""
    here = f"sweep-inputs-{secrets.token_hex(3)}"
    (lk.state_root() / "pv" / here).mkdir()
    cmd = f"set -- -e /results/{here}/train.yaml; cat /results/{here}/train.yaml"
    args = ("submit", "--image", BUSYBOX, *BASE, "--gpus", "1", "--command", cmd, "--sweep", "train.lr=0.1,0.2",
            "--dry-run")
    plain = k8s.tao(*args)
    assert plain.stdout.startswith("dry run: nothing was contacted"), plain.stdout
    refused = k8s.tao(*args, "--check", check=False)
    assert refused.returncode == 1 and f"input path(s) missing on the job's volumes: /results/{here}/train.yaml" \
        in refused.stderr, refused.stderr
    (lk.state_root() / "pv" / here / "train.yaml").write_text("epochs: 1\n")
    passed = k8s.tao(*args, "--check")
    assert passed.stdout.startswith("dry run: the submit's read-only checks passed"), passed.stdout
    assert not list(Path(k8s.env["TAO_STATE_DIR"]).glob("*.json"))


def test_args_name_the_job_folder_with_kubernetes_var_expansion_as_the_skill_shows(k8s):
    """The documented spec passes results_dir=$(RESULTS_DIR) in native args (issue 37: the one results variable,
    the same folder as TAO's $(TAO_API_RESULTS_DIR)/$(TAO_API_JOB_ID))."""
    argv = ["sh", "-c", 'echo "$1" > "${1#results_dir=}/arg.txt"; mkdir -p "${1#results_dir=}"; '
            'echo "$1" > "${1#results_dir=}/arg.txt"; echo "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" > "$RESULTS_DIR/tao.txt"',
            "x", "results_dir=$(RESULTS_DIR)"]
    out, st = run_to_end(k8s, "--gpus", "0", "--args-json", json.dumps(argv))
    assert st["state"] == "COMPLETE", st
    kept = (lk.state_root() / "pv" / out["id"] / "arg.txt").read_text().strip()
    assert kept == f"results_dir=/results/{out['id']}" == f"results_dir={k8s.record(out['id'])['results_dir']}"
    assert (lk.state_root() / "pv" / out["id"] / "tao.txt").read_text().strip() == f"/results/{out['id']}"
