"""The SLURM skill's verbs against the local SLURM cluster over real SSH."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from taobank.core import platform
from taobank import records
from taobank.errors import TaoError
from taobank.platforms.slurm import remote, ssh, storage
from taobank.platforms.slurm import facts as slurm_facts, logs as slurm_logs, submit as slurm_submit
from taobank.platforms.slurm.ssh import Connection
from testclusters.slurm_conf import Layout, default_state_dir
from tests.support.results_cli import tao_jobs as jobs

sys.path.insert(0, os.path.dirname(__file__))
from slurm_helpers import ArgvWatcher, base_spec, call_log, probe_gloo_ok, wait_state  # noqa: E402
from slurm_helpers import cancel as slurm_helpers_cancel, status as slurm_helpers_status  # noqa: E402

#: the local cluster's accounts: the one jobs name, and the default one that may submit nothing
SLURM_LAYOUT = Layout(state=default_state_dir())

SECRET = "tao-e2e-secret-7f3a9c1d5e"
BANK = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def test_submit_status_logs_complete_with_secret_kept_out_of_everything(slurm_env, monkeypatch):
    monkeypatch.setenv("NGC_KEY", SECRET)
    spec = base_spec(secrets=["NGC_KEY"], env={"EPOCHS": "3"}, command=[
        "bash", "-c", 'echo "hello epochs=$EPOCHS keylen=${#NGC_KEY}"; echo "a traceback line" >&2; '
        'echo "results in $RESULTS_DIR"; test -d "$RESULTS_DIR"'])
    with ArgvWatcher(SECRET) as watcher:
        rec = slurm_submit.submit(spec)
    assert watcher.scans > 0 and watcher.hits == []
    b = rec["backend"]
    assert rec["state"] == "PENDING" and b["slurm_job_id"].isdigit() and rec["backend_ref"] == f"slurm:{b['slurm_job_id']}"
    assert b["log_dir"] == f"{b['job_dir']}/slurm-logs/{rec['id']}-{b['slurm_job_id']}"
    assert rec["results_dir"] == b["results_dir"] and rec["results_dir"].endswith("/" + rec["id"])  # its own folder
    done = wait_state(rec["id"])
    assert done["state"] == "COMPLETE", done
    out = slurm_logs.logs(rec["id"])
    assert f"hello epochs=3 keylen={len(SECRET)}" in out["main.out"]
    assert "a traceback line" in out["main.err"]
    assert f"results in {rec['results_dir']}\n" in out["main.out"]  # issue 37: the one results variable
    conn = Connection()
    # The needle goes on stdin (grep -f -): the test must not put the secret on argv either.
    listing = conn.script('cd "$1" && find . -type f | sort && grep -rlF -f - . || true', [b["job_dir"]],
                          stdin=SECRET + "\n").stdout
    assert "./sbatch/job_%s.sbatch" % rec["id"] in listing
    for f in ("./specs/spec.json", "./env/env.json", "./meta/meta.json", "./meta/exit.json"):
        assert f in listing
    assert storage.CREDS_FILE not in listing  # removed after success
    assert SECRET not in listing  # grep found the secret in no file
    calls = call_log(slurm_env["call_log"])
    assert calls and not any(SECRET in " ".join(c) for c in calls)
    # What `ps` showed for our child processes is exactly what the call log says we ran.
    seen_ssh = [c for c in watcher.children if c and c[0] == "ssh"]
    assert seen_ssh and all(list(c) in calls for c in seen_ssh)
    assert SECRET not in json.dumps(records.load(rec["id"]))


def test_cli_outputs_never_print_the_secret(slurm_env, tmp_path):
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(base_spec(secrets=["NGC_KEY"], command=["bash", "-c", "echo keylen=${#NGC_KEY}"])))
    env = dict(os.environ, NGC_KEY=SECRET)
    cli = [sys.executable, os.path.join(BANK, "scripts", "tao_slurm.py")]
    sub = subprocess.run(cli + ["submit", "--spec", str(spec), "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert sub.returncode == 0, sub.stderr
    job = json.loads(sub.stdout)["id"]
    wait_state(job)
    outs = [sub.stdout + sub.stderr]
    for args in (["status", job, "--json"], ["logs", job], ["logs", job, "--json"], ["status", job]):
        r = subprocess.run(cli + args, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout + r.stderr)
    assert f"keylen={len(SECRET)}" in outs[2]
    assert not any(SECRET in o for o in outs)
    assert not any(SECRET in " ".join(c) for c in call_log(slurm_env["call_log"]))


def test_cli_text_and_json_carry_the_same_data_and_name_the_real_results_dir(slurm_env, tmp_path):
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(base_spec(command=["bash", "-c", 'echo "out-line writes=$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID"; echo err-line >&2; sleep 2'])))
    cli = [sys.executable, os.path.join(BANK, "scripts", "tao_slurm.py")]

    def call(*args):
        r = subprocess.run(cli + list(args), capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr
        return r.stdout

    text = call("submit", "--spec", str(spec))
    job = text.split()[0]
    rec = records.load(job)
    b = rec["backend"]
    results = rec["results_dir"]
    assert b["results_dir"] == results and results.endswith("/" + job)  # the job's own folder
    assert b["backend_type"] == "slurm" and b["partition"] == slurm_env["env"]["SLURM_PARTITION"]
    assert "cluster_name" not in b  # not given: absent (show printed "None")
    assert f"results: {results} ($RESULTS_DIR in the job; a TAO command gets results_dir= it)" in text
    assert f"SLURM job {b['slurm_job_id']} on {b['login_host']}" in text and f"job_dir: {b['job_dir']}" in text
    watched = json.loads(call("status", "--watch", "--json", job))  # progress lines must not spoil the JSON
    (done,) = [r for r in watched if r["id"] == job]
    assert done["state"] == "COMPLETE" and done["results_dir"] == results
    line = call("status", job).strip()
    assert line.startswith(f"{job} COMPLETE ref=slurm:{b['slurm_job_id']} ") and f"results={results}" in line
    as_json = json.loads(call("logs", job, "--json"))
    as_text = call("logs", job)
    out_name, err_name = f"{b['log_dir']}/main.out", f"{b['log_dir']}/main.err"
    assert sorted(as_json["sections"]) == [err_name, out_name]
    assert f"out-line writes={results}\n" in as_json["sections"][out_name]
    assert "err-line" in as_json["sections"][err_name]
    assert Path(results).is_dir()  # where the container writes: id appended once, by the container
    assert as_text == (f"==> {out_name} <==\n{as_json['sections'][out_name]}"
                       f"==> {err_name} <==\n{as_json['sections'][err_name]}")


def test_failed_job_reports_exit_code_as_program_error(slurm_env):
    rec = slurm_submit.submit(base_spec(command=["bash", "-c", "echo 'ValueError: bad spec' >&2; exit 3"]))
    done = wait_state(rec["id"])
    assert done["state"] == "ERROR" and done["err_class"] == "ERR_PROGRAM"
    assert done["backend"]["slurm_state"] == "FAILED" and done["backend"]["exit_code"] == "3:0"
    assert "exit code 3" in done["message"]
    assert not records.list_records(platform="slurm", active=True)  # no retry for a program error


def test_cancel_running_job_then_cancel_again(slurm_env):
    rec = slurm_submit.submit(base_spec(command=["sleep", "300"]))
    wait_state(rec["id"], ("RUNNING",), timeout=60)
    done = slurm_helpers_cancel(rec["id"])
    assert done["state"] == "CANCELED" and "scancel" in done["message"]
    conn = Connection()
    jid = rec["backend"]["slurm_job_id"]
    for _ in range(30):
        state = conn.remote(["sacct", "-n", "-X", "-P", "-o", "State", "-j", jid]).stdout.strip()
        if state.startswith("CANCELLED"):
            break
        time.sleep(1)
    assert state.startswith("CANCELLED")
    assert slurm_helpers_cancel(rec["id"])["state"] == "CANCELED"  # idempotent


def test_cancel_of_a_job_that_already_ended_counts_as_cancelled(slurm_env):
    rec = slurm_submit.submit(base_spec(command=["true"]))
    jid = rec["backend"]["slurm_job_id"]
    conn = Connection()
    for _ in range(60):
        if not conn.remote(["squeue", "-h", "-j", jid], check=False).stdout.strip():
            break
        time.sleep(0.5)
    done = slurm_helpers_cancel(rec["id"])  # the record is still PENDING: nobody polled
    assert done["state"] == "CANCELED"


def test_memory_kill_is_reported_as_program_error(slurm_env):
    """A program past its --memory: the status line says OUT_OF_MEMORY, the request and the flag (issue 49: it
    read `FAILED (exit code 1)`: SLURM's job line says FAILED 1:0, only the srun step says OUT_OF_MEMORY)."""
    from testclusters import slurm as local_slurm

    rec = slurm_submit.submit(base_spec(memory="100M", command=[
        "python3", "-c", "import time; a = bytearray(600 * 1024 * 1024); time.sleep(5)"]))
    done = wait_state(rec["id"], timeout=90)
    assert done["state"] == "ERROR" and done["err_class"] == "ERR_PROGRAM", done
    kill = local_slurm.status().get("memory_kill")  # OUT_OF_MEMORY with cgroup v1, "FAILED 0:9" with OverMemoryKill
    assert kill in ("OUT_OF_MEMORY", "FAILED 0:9")
    assert done["backend"]["slurm_state"] == "OUT_OF_MEMORY", done
    assert done["message"].startswith("OUT_OF_MEMORY: the job used more than the 100M of memory it asked for; ask "
                                      "for more with --memory"), done["message"]
    marker = json.loads((Path(done["backend"]["job_dir"]) / "meta" / "exit.json").read_text())
    assert marker["oom"] is True and marker["exit_code"] != 0
    line = jobs("status", rec["id"]).stdout  # the one line a user reads
    assert "ERROR (ERR_PROGRAM)" in line and "OUT_OF_MEMORY: the job used more than the 100M" in line, line


def test_gres_over_capacity_refused_at_submit_with_a_clear_line(slurm_env):
    """The partition's node sizes are read in the submit's one preflight command: a job no node holds is refused
    before anything is written."""
    with pytest.raises(TaoError) as exc:
        slurm_submit.submit(base_spec(num_gpus=64, max_num_gpus_per_node=64))
    msg = str(exc.value)
    assert "64 GPUs per node" in msg and "largest node of partition local" in msg and "nothing was submitted" in msg
    assert "\n" not in msg
    assert records.list_records(platform="slurm") == []


def test_refused_sbatch_leaves_nothing_behind(slurm_env, monkeypatch):
    """A submit that sbatch refuses after staging takes back what it staged: the job folder with the
    secret, and the empty results folder; the ERROR record says why."""
    monkeypatch.setenv("NGC_KEY", SECRET)
    # the default account may submit nothing (MaxSubmitJobs=0): only sbatch itself knows, after the staging
    with pytest.raises(TaoError, match="sbatch.*its staged folder was removed"):
        slurm_submit.submit(base_spec(account=SLURM_LAYOUT.default_account, secrets=["NGC_KEY"]))
    (rec,) = records.list_records(platform="slurm")
    assert rec["state"] == "ERROR" and "sbatch" in rec["message"]
    # Runtime metadata (slurm_job_id, job_dir) is written only after sbatch answered: none here.
    assert "job_dir" not in rec["backend"] and "slurm_job_id" not in rec["backend"]
    job_dir = Path(rec["backend"]["staged_dir"])  # the local cluster's Lustre is this machine's /srv
    assert job_dir.name == rec["id"] and job_dir.parent.is_dir()  # it was staged where its parent still is...
    assert not job_dir.exists() and not Path(rec["results_dir"]).exists()  # ...and taken back, secret and all


def test_missing_dataset_stops_before_anything_is_written(slurm_env):
    lustre = slurm_env["env"]["TAO_LOCAL_LUSTRE_ROOT"]
    spec = base_spec(dataset={"root": f"lustre://{lustre}/datasets/nope", "required": ["annotations.json"]})
    with pytest.raises(TaoError, match="missing on the cluster.*datasets/nope.*annotations.json"):
        slurm_submit.submit(spec)
    assert records.list_records() == []


def test_dry_run_check_refuses_what_submit_refuses_and_the_plain_dry_run_says_it_did_not_check(slurm_env, tmp_path):
    """Issue 49: ``--dry-run --check`` runs submit's read-only checks over ssh (a dataset path that is not there
    is refused as submit refuses it); ``--dry-run`` alone passes but its first line says it checked nothing."""
    lustre = slurm_env["env"]["TAO_LOCAL_LUSTRE_ROOT"]
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(base_spec(dataset={"root": f"lustre://{lustre}/datasets/nope-{uuid.uuid4().hex[:6]}",
                                                  "required": ["annotations.json"]})))
    cli = [sys.executable, os.path.join(BANK, "scripts", "tao_slurm.py"), "submit", "--spec", str(spec), "--dry-run"]
    plain = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and plain.stderr.startswith("dry run: nothing was contacted"), plain.stderr
    checked = subprocess.run(cli + ["--check"], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 1 and "missing on the cluster" in checked.stderr, checked.stderr
    assert records.list_records() == []
    spec.write_text(json.dumps(base_spec()))
    good = subprocess.run(cli + ["--check"], capture_output=True, text=True, timeout=120)
    assert good.returncode == 0 and good.stderr.startswith("dry run: the submit's read-only checks passed"), good.stderr
    assert good.stdout.startswith("#!") and records.list_records() == []


def test_missing_sqsh_image_stops_before_anything_is_written(slurm_env):
    """A /path/image.sqsh that is not on the cluster would fail inside the GPU allocation."""
    lustre = slurm_env["env"]["TAO_LOCAL_LUSTRE_ROOT"]
    spec = base_spec(container_runtime="pyxis", image=f"{lustre}/images/absent.sqsh")
    with pytest.raises(TaoError, match=f"missing on the cluster.*{lustre}/images/absent.sqsh"):
        slurm_submit.submit(spec)
    assert records.list_records() == []


def test_local_dataset_path_refused_with_reason(slurm_env):
    with pytest.raises(TaoError, match="local path"):
        slurm_submit.submit(base_spec(dataset={"root": "/home/me/data"}))
    with pytest.raises(TaoError, match="local path"):
        slurm_submit.submit(base_spec(dataset={"root": "file:///home/me/data"}))


def test_dataset_present_in_root_and_spec_key_modes(slurm_env):
    lustre = slurm_env["env"]["TAO_LOCAL_LUSTRE_ROOT"]
    conn = Connection()
    ds = f"{slurm_env['env']['SLURM_BASE_RESULTS_DIR']}/datasets/coco-mini"
    conn.script('mkdir -p "$1/images" && : > "$1/annotations.json"', [ds])
    spec = base_spec(dataset={"root": f"lustre://{ds}", "required": ["annotations.json", "images"],
                              "spec_keys": {"custom.train_dataset.annotation_path": f"lustre://{ds}/annotations.json"}},
                     command=["bash", "-c", 'echo "root=$TAO_DATASET_ROOT args=$*"', "tao"])
    rec = slurm_submit.submit(spec)
    assert wait_state(rec["id"])["state"] == "COMPLETE"
    out = slurm_logs.logs(rec["id"])["main.out"]
    assert f"root={ds} args=custom.train_dataset.annotation_path={ds}/annotations.json" in out
    assert lustre


def test_two_node_job_distinct_node_rank_same_master_addr(slurm_env):
    # The rendezvous variables are the bank's: a spec may not set them (a Pyxis PyTorch hook that injects
    # them into the container is overridden inside each task, see the multi-node template).
    injected = {"MASTER_ADDR": "injected-host", "WORLD_SIZE": "16", "NODE_RANK": "0", "MASTER_PORT": "1"}
    for key, value in injected.items():
        with pytest.raises(TaoError, match=f"env {key} is set by the bank itself"):
            slurm_submit.plan(base_spec(num_gpus=16, max_num_gpus_per_node=8, env={key: value}, command=["true"]))
    probe_gloo_ok()  # the gate passes for real: no --skip-nccl-probe
    rec = slurm_submit.submit(spec=base_spec(num_gpus=16, max_num_gpus_per_node=8, command=[
        "bash", "-c", 'echo "task rank=$NODE_RANK master=$MASTER_ADDR:$MASTER_PORT world=$WORLD_SIZE '
                      'gpus=$NUM_GPU_PER_NODE host=$SLURMD_NODENAME"']))
    done = wait_state(rec["id"], timeout=90)
    assert done["state"] == "COMPLETE", done
    lines = [line for line in slurm_logs.logs(rec["id"])["main.out"].splitlines() if line.startswith("task ")]
    assert len(lines) == 2, lines
    fields = [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in lines]
    assert sorted(f["rank"] for f in fields) == ["0", "1"]
    # no master_port in the spec: the pinned base plus the job id modulo 1000 (two jobs on a node never collide)
    assert len({f["master"] for f in fields}) == 1
    port = int(fields[0]["master"].rsplit(":", 1)[1])
    assert port == 29500 + int(records.load(rec["id"])["backend"]["slurm_job_id"]) % 1000, fields
    assert {f["world"] for f in fields} == {"2"} and {f["gpus"] for f in fields} == {"8"}
    assert sorted(f["host"] for f in fields) == ["node1", "node2"]
    assert fields[0]["master"].split(":")[0] in ("node1", "node2")


def test_requeued_job_still_finds_its_credentials(slurm_env, monkeypatch):
    monkeypatch.setenv("NGC_KEY", SECRET)
    rec = slurm_submit.submit(base_spec(secrets=["NGC_KEY"], command=["bash", "-c",
        'echo "run restart=${SLURM_RESTART_COUNT:-0} keylen=${#NGC_KEY}"; '
        'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 120; fi']))
    wait_state(rec["id"], ("RUNNING",), timeout=60)
    conn = Connection()
    jid = rec["backend"]["slurm_job_id"]
    import time
    time.sleep(2)  # let the first run print
    # While it runs, the secret is in exactly one file: the mode-600 credentials file.
    holders = conn.script('cd "$1" && grep -rlF -f - . | while read -r f; do printf "%s %s\\n" "$f" "$(stat -c %a "$f")"; done',
                          [rec["backend"]["job_dir"]], stdin=SECRET + "\n").stdout.split("\n")
    assert [h for h in holders if h] == [f"./{storage.CREDS_FILE} 600"]
    conn.remote(["scontrol", "requeue", jid])
    seen_pending = False
    deadline = time.time() + 120
    while time.time() < deadline:
        r = slurm_helpers_status([rec["id"]], retry=False)[0]
        seen_pending |= r["state"] == "PENDING" and r["backend"].get("slurm_state") in ("PENDING", "REQUEUED", "REQUEUE_HOLD")
        if r["state"] in ("COMPLETE", "ERROR", "CANCELED"):
            break
        time.sleep(1)
    assert r["state"] == "COMPLETE", r
    out = slurm_logs.logs(rec["id"])["main.out"]
    assert f"run restart=0 keylen={len(SECRET)}" in out
    assert f"run restart=1 keylen={len(SECRET)}" in out, out
    listing = conn.script('ls -A "$1/env"', [rec["backend"]["job_dir"]]).stdout
    assert "credentials" not in listing  # removed once really finished
    assert seen_pending or "restart=1" in out


def test_status_of_many_jobs_is_one_squeue_and_one_sacct(slurm_env):
    conn = Connection()
    ids = [slurm_submit.submit(base_spec(command=["sleep", "1"]), conn=conn)["id"] for _ in range(6)]
    log = slurm_env["call_log"]
    log.write_text("")
    recs = slurm_helpers_status(ids, conn=conn, retry=False)
    assert {r["id"] for r in recs} == set(ids)
    remote_cmds = [c[-1] for c in call_log(log) if ssh.classify_argv(c) == "command"]
    joined = "\n".join(remote_cmds)
    assert len(remote_cmds) == 1, remote_cmds
    assert joined.count("squeue -h") == 1 and joined.count("sacct -n") == 1
    for jid in (records.load(i)["backend"]["slurm_job_id"] for i in ids):
        assert jid in joined


def test_lost_sbatch_answer_is_reconciled_without_a_duplicate(slurm_env, monkeypatch):
    # The sbatch runs, but its answer never reaches us (as if the connection dropped).
    lost = remote.SBATCH.replace('echo "$jid"', "true")
    monkeypatch.setattr(remote, "SBATCH", lost)
    rec = slurm_submit.submit(base_spec(command=["sleep", "2"]))
    jid = rec["backend"]["slurm_job_id"]
    assert "reconciled" in rec["message"]
    conn = Connection()
    assert slurm_submit.find_by_name(conn, rec["id"]) == [jid]
    import time
    for _ in range(30):  # accounting is written a moment later
        names = conn.remote(["sacct", "-n", "-X", "-P", "-o", "JobIDRaw", f"--name={rec['id']}", "-S", "now-1hours"]).stdout.split()
        if names:
            break
        time.sleep(0.5)
    assert names == [jid]
    # Calling the submit step again (e.g. after a crash) adopts, never resubmits.
    view = platform.get("slurm").resume(rec["id"])
    assert view.message == "already submitted: nothing to resume"
    assert records.load(rec["id"])["backend"]["slurm_job_id"] == jid
    assert wait_state(rec["id"])["state"] == "COMPLETE"


def test_resume_adopts_a_job_submitted_before_the_crash(slurm_env):
    conn = Connection()
    rec = slurm_submit.submit(base_spec(command=["sleep", "1"]), conn=conn)
    # A second record whose sbatch happened but was never recorded:
    other = records.open_record("slurm", "none", "dino", "train", "A", rec["results_dir"])
    b = dict(rec["backend"])
    b["job_name"] = other["id"]
    records.mark(other["id"], "PENDING", backend={k: b[k] for k in ("job_dir", "script", "job_name")})
    res = conn.script(remote.SBATCH, [b["script"], b["job_dir"] + "/slurm-logs", other["id"]])
    jid = res.stdout.strip()
    platform.get("slurm").resume(other["id"])  # the core binds the record to the job the adapter found
    adopted = records.load(other["id"])
    assert adopted["backend"]["slurm_job_id"] == jid and "adopted" in adopted["message"]


def test_failover_when_the_first_address_refuses(slurm_env, tmp_path, monkeypatch):
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "fresh"))
    hosts = slurm_env["env"]["SLURM_HOSTNAME"].split(",")
    conn = Connection()
    assert [h.entry for h in conn.hosts] == hosts and len(hosts) == 2
    assert conn.remote(["hostname"]).ok
    assert conn.host.entry == hosts[1] and "refused" in conn.errors[hosts[0]]
    assert ssh.remembered_host() == hosts[1]
    # Next connection tries the remembered host first: no second refusal.
    conn2 = Connection()
    conn2.connect()
    assert conn2.errors == {}
    monkeypatch.setenv("SLURM_HOSTNAME", hosts[0])
    with pytest.raises(TaoError, match="no SLURM login host answered.*refused"):
        Connection().connect()


def _short_control_dir(monkeypatch) -> None:
    """A control-socket folder of this test alone (other tests' masters share the default one), short enough
    for a unix socket path (under xdist tmp_path is too long)."""
    import tempfile

    monkeypatch.setenv("TAO_SSH_CONTROL_DIR", tempfile.mkdtemp(prefix="tao-ctl-", dir="/tmp"))


def test_one_connection_reused_and_stale_socket_replaced(slurm_env, monkeypatch):
    import socket
    import time

    _short_control_dir(monkeypatch)
    conn = Connection()
    conn.close()
    ssh.STATS.update(connections=0, commands=0)
    conn = Connection()
    for _ in range(3):
        conn.remote(["true"])
    assert ssh.STATS["connections"] == 1 and ssh.STATS["commands"] == 3
    # A second Connection (the next verb) reuses the live master: no new connection.
    Connection().remote(["true"])
    assert ssh.STATS["connections"] == 1
    # Kill the master and leave a dead socket file where it listened.
    path = conn._effective(conn.host)["controlpath"]
    conn.close()
    time.sleep(0.2)
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()
    assert os.path.exists(path)
    fresh = Connection()
    assert fresh.remote(["echo", "ok"]).stdout.strip() == "ok"
    assert ssh.STATS["connections"] == 2


def test_host_key_mismatch_is_never_accepted(slurm_env, tmp_path, monkeypatch):
    bad = tmp_path / "known_hosts"
    kh = open(slurm_env["env"]["TAO_SSH_KNOWN_HOSTS"]).read().split()
    bad.write_text(f"{kh[0]} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
    monkeypatch.setenv("TAO_SSH_KNOWN_HOSTS", str(bad))
    _short_control_dir(monkeypatch)
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "fresh"))
    with pytest.raises(TaoError, match="Host key verification failed|REMOTE HOST IDENTIFICATION"):
        Connection().connect()


def test_infrastructure_failure_is_resubmitted_and_linked(slurm_env):
    """Without --requeue the job does not resubmit itself: the status verb does, as a linked record."""
    once = '"$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID/failed-once"'
    rec = slurm_submit.submit(base_spec(use_requeue=False, command=["bash", "-c",
        f'if [ -e {once} ]; then echo recovered; else : > {once}; '
        'echo "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus." >&2; exit 1; fi']))
    lines: list[str] = []
    final = [v.to_dict() for v in platform.watch("slurm", [rec["id"]], on_line=lines.append, first=1, cap=2)]
    first = records.load(rec["id"])
    assert first["state"] == "ERROR" and first["err_class"] == "ERR_INFRA" and "xid" in first["message"]
    (retry,) = [r for r in final if r.get("retry_of") == rec["id"]]
    assert retry["state"] == "COMPLETE" and retry["attempt"] == 2
    assert retry["backend"]["job_dir"] == first["backend"]["job_dir"]
    assert retry["backend"]["slurm_job_id"] != first["backend"]["slurm_job_id"]
    assert "recovered" in slurm_logs.logs(retry["id"])["main.out"]
    assert lines  # one progress line per change


def test_follow_streams_both_logs_until_the_end(slurm_env):
    rec = slurm_submit.submit(base_spec(command=["bash", "-c", "for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 1; done"]))
    chunks: dict[str, str] = {"main.out": "", "main.err": ""}

    def on_chunk(stream, text):
        chunks[stream] += text

    final = slurm_logs.follow(rec["id"], on_chunk=on_chunk, interval=0.5)
    assert final.state == "COMPLETE"
    assert "out1\nout2\nout3\n" in chunks["main.out"] and "err1\nerr2\nerr3\n" in chunks["main.err"]


def test_enroot_credentials_install_keeps_the_key_off_argv(slurm_env, monkeypatch):
    from taobank.platforms.slurm import preflight

    with ArgvWatcher(SECRET) as watcher:
        host = preflight.install_enroot_credentials("nvcr.io", SECRET)
        preflight.install_enroot_credentials("nvcr.io", SECRET)  # replaces, not duplicates
    assert watcher.hits == [] and host
    conn = Connection()
    res = conn.script('f="$HOME/.config/enroot/.credentials"; stat -c %a "$f"; grep -c "^machine nvcr.io " "$f"; '
                      'grep -c "^machine authn.nvidia.com " "$f"; grep -cF -f - "$f"', stdin=SECRET + "\n")
    mode, count, authn, found = res.stdout.split("\n")[:4]
    assert (mode, count, authn, found) == ("600", "1", "1", "2")  # both NGC lines, each once, with the key
    assert not any(SECRET in " ".join(c) for c in call_log(slurm_env["call_log"]))
    with ArgvWatcher(SECRET) as watcher:
        report = preflight.run_preflight(private_registry=True)
    assert report["ok"] and report["enroot_machines"] == ["nvcr.io", "authn.nvidia.com"]
    assert watcher.hits == [] and SECRET not in json.dumps(report)
    conn.script('f="$HOME/.config/enroot/.credentials"; grep -v "^machine authn" "$f" > "$f.x"; mv "$f.x" "$f"')
    report = preflight.run_preflight(private_registry=True)
    assert not report["ok"] and any("no machine line for authn.nvidia.com" in line for line in report["lines"])
    conn.script('rm -f "$HOME/.config/enroot/.credentials"')
    report = preflight.run_preflight(private_registry=True)
    assert not report["ok"] and any("Could not process JSON input" in line for line in report["lines"])


def test_status_falls_back_to_the_exit_marker_without_accounting(slurm_env, monkeypatch):
    rec = slurm_submit.submit(base_spec(command=["bash", "-c", "exit 4"]))
    import time
    conn = Connection()
    marker = rec["backend"]["job_dir"] + "/meta/exit.json"
    for _ in range(60):
        if conn.remote(["test", "-s", marker], check=False).ok:
            break
        time.sleep(0.5)
    # This site has no accounting: the sweep's sacct is a command that does not exist,
    # and the job is no longer in squeue (or only as a finished line).
    monkeypatch.setattr(remote, "SWEEP", remote.SWEEP.replace("sacct -n", "tao-no-sacct -n")
                        .replace("squeue -h", "squeue --states=PENDING,RUNNING -h"))
    done = slurm_helpers_status([rec["id"]], retry=False)[0]
    assert done["state"] == "ERROR" and "exit marker" in done["message"] and "4" in done["message"]


def test_failed_sqsh_conversion_job_ends_the_record_in_error_and_no_gpu_job_runs(slurm_env):
    # The local cluster has no enroot: the conversion job (its own CPU job) fails on the compute node.
    from taobank.platforms.slurm import images

    cache = slurm_env["env"]["SLURM_BASE_RESULTS_DIR"] + "/sqsh-cache-e2e"
    image = "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt"
    sqsh = images.sqsh_path(image, cache)
    # what an interrupted import left behind: enroot import would refuse to overwrite it; and an empty
    # cached .sqsh (a failed copy): no squashfs magic, so it is converted again, not used
    Connection().script('mkdir -p -- "$(dirname -- "$1")" && echo half > "$1.part" && : > "$1"', [sqsh])
    t0 = time.monotonic()
    rec = slurm_submit.submit(base_spec(container_runtime="pyxis", image=image, sqsh_cache_dir=cache,
                                 conversion_cpus=1, conversion_mem="200M", conversion_time_minutes=5))
    assert time.monotonic() - t0 < 30  # submit does not wait for the conversion
    b = rec["backend"]
    assert b["convert_job_id"].isdigit() and int(b["convert_job_id"]) < int(b["slurm_job_id"])
    done = wait_state(rec["id"])
    assert done["state"] == "ERROR" and done["err_class"] == "ERR_PROGRAM", done
    assert f"image conversion job {b['convert_job_id']} ended FAILED" in done["message"]
    assert "enroot: command not found" in done["message"] and "never started" in done["message"]
    shown = platform.logs("slurm", rec["id"]).sections
    assert "enroot: command not found" in shown[b["convert_log"]]  # logs shows the conversion job's log too
    conv = Connection().remote(["scontrol", "show", "job", "-o", b["convert_job_id"]]).stdout
    assert " Partition=convert " in conv and " JobState=FAILED " in conv  # the CPU partition, not a GPU one
    # SLURM cancels the dependent job (--kill-on-invalid-dep) before it ever starts: no GPU was held
    for _ in range(30):
        train = Connection().remote(["scontrol", "show", "job", "-o", b["slurm_job_id"]]).stdout
        if " JobState=PENDING " not in train:
            break
        time.sleep(1)
    assert " JobState=CANCELLED " in train and " Reason=DependencyNeverSatisfied " in train
    assert preflight_missing([b["log_dir"] + "/main.out"]) == [b["log_dir"] + "/main.out"]  # it never ran
    assert preflight_missing([sqsh + ".part"]) == [sqsh + ".part"]  # stale partial removed
    assert slurm_submit.preflight_paths(Connection(), [], [sqsh]) == [f"{sqsh} (empty or not a squashfs image)"]
    assert "is empty or not a squashfs image: converting it again" in shown[b["convert_log"]]


def preflight_missing(paths: list[str]) -> list[str]:
    return slurm_submit.preflight_paths(Connection(), paths)


def test_pyxis_launch_line_reaches_srun_with_a_cached_sqsh(slurm_env):
    cache = slurm_env["env"]["SLURM_BASE_RESULTS_DIR"] + "/sqsh-cache-e2e2"
    image = "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt"
    from taobank.platforms.slurm import images

    sqsh = images.sqsh_path(image, cache)
    # a cached image (squashfs magic first): no conversion
    Connection().script('mkdir -p -- "$(dirname -- "$1")" && printf hsqs > "$1"', [sqsh])
    rec = slurm_submit.submit(base_spec(container_runtime="pyxis", image=image, sqsh_cache_dir=cache, command=["true"]))
    assert "convert_job_id" not in rec["backend"]
    done = wait_state(rec["id"])
    # Debian's SLURM has no Pyxis: srun rejects the option, which proves the line was built and run.
    err = slurm_logs.logs(rec["id"])["main.err"]
    assert f"--container-image={sqsh}" in err and "unrecognized option" in err
    assert done["state"] == "ERROR" and "no Pyxis" in done["message"]


def test_plain_host_port_and_user_at_host_entries_without_ssh_config(slurm_env, tmp_path, monkeypatch):
    # The same login node addressed without the ssh_config aliases: host:port and user@host:port.
    monkeypatch.delenv("TAO_SSH_CONFIG")
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "fresh"))
    user = slurm_env["env"]["SLURM_USER"]
    monkeypatch.setenv("SLURM_HOSTNAME", f"127.0.0.2:22022,{user}@127.0.0.1:22022")
    conn = Connection()
    assert conn.remote(["id", "-un"]).stdout.strip() == user
    assert conn.host.port == 22022 and conn.host.user == user and "refused" in conn.errors["127.0.0.2:22022"]
    rec = slurm_submit.submit(base_spec(command=["true"]), conn=conn)
    assert rec["backend"]["login_host"] == f"{user}@127.0.0.1:22022"
    assert wait_state(rec["id"], conn=conn)["state"] == "COMPLETE"


def test_infrastructure_retries_stop_at_the_limit(slurm_env, monkeypatch):
    monkeypatch.setattr(slurm_facts, "max_retries", lambda: 1)  # rendered into the job's own retry check
    rec = slurm_submit.submit(base_spec(command=["bash", "-c",
        'echo "NCCL WARN NET/IB : Got completion from peer 10.0.0.2 with error 12" >&2; exit 1']))
    final = [v.to_dict() for v in platform.watch("slurm", [rec["id"]], on_line=lambda line: None, first=1, cap=2)]
    (done,) = final  # one record: the job resubmitted itself once, under the same record
    assert done["state"] == "ERROR" and done["err_class"] == "ERR_INFRA" and done["backend"]["self_retries"] == 1
    assert "did not resubmit itself" in done["message"]
    assert "retry limit 1 reached" in slurm_logs.logs(rec["id"])["main.out"]


def test_infrastructure_retries_of_a_job_without_requeue_stop_at_the_limit(slurm_env, monkeypatch):
    monkeypatch.setattr(slurm_facts, "max_retries", lambda: 1)
    rec = slurm_submit.submit(base_spec(use_requeue=False, command=["bash", "-c",
        'echo "NCCL WARN NET/IB : Got completion from peer 10.0.0.2 with error 12" >&2; exit 1']))
    final = [v.to_dict() for v in platform.watch("slurm", [rec["id"]], on_line=lambda line: None, first=1, cap=2)]
    chain = sorted(final, key=lambda r: r["attempt"])
    assert [r["attempt"] for r in chain] == [1, 2]
    assert all(r["state"] == "ERROR" and r["err_class"] == "ERR_INFRA" for r in chain)
    assert "retry limit 1 reached" in chain[-1]["message"]
    assert chain[1]["retry_of"] == chain[0]["id"]


def test_connection_dropped_during_sbatch_is_reconciled_without_a_duplicate(slurm_env, monkeypatch):
    # sbatch runs, then the SSH connection dies before the answer comes back
    # (the remote script kills its own sshd session: a real dropped connection).
    kill_session = ('p=$PPID; while [ "$p" -gt 1 ]; do '
                    'if [ "$(cat /proc/$p/comm)" = sshd ]; then kill -9 "$p"; break; fi; '
                    "p=$(awk '{print $4}' /proc/$p/stat); done; sleep 5")
    dropped = remote.SBATCH.replace('echo "$jid"', kill_session)
    monkeypatch.setattr(remote, "SBATCH", dropped)
    # its own ControlMaster (a short socket path): the sshd it kills carries every session multiplexed on the
    # master, and other tests on this machine share the default one
    control = tempfile.mkdtemp(prefix="tao-ssh-drop-", dir="/tmp")
    monkeypatch.setenv("TAO_SSH_CONTROL_DIR", control)
    ssh.STATS.update(connections=0, commands=0)
    conn = Connection()
    rec = slurm_submit.submit(base_spec(command=["sleep", "1"]), conn=conn)
    assert "reconciled" in rec["message"]
    assert ssh.STATS["connections"] >= 1  # a fresh connection after the drop
    assert slurm_submit.find_by_name(conn, rec["id"]) == [rec["backend"]["slurm_job_id"]]
    assert wait_state(rec["id"], conn=conn)["state"] == "COMPLETE"
    conn.close()
    shutil.rmtree(control, ignore_errors=True)


def test_agent_socket_instead_of_a_key_file(slurm_env, monkeypatch):
    """SSH_AUTH_SOCK (advanced alternative): no SSH_KEY_PATH, the key only in an agent."""
    import signal
    import tempfile

    short = tempfile.mkdtemp(prefix="tao-agent-", dir="/tmp")  # socket paths are limited to ~104 chars
    os.chmod(short, 0o700)
    sock = os.path.join(short, "agent")
    out = subprocess.run(["ssh-agent", "-a", sock], capture_output=True, text=True, check=True).stdout
    pid = int(out.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        monkeypatch.delenv("TAO_SSH_CONFIG")  # its IdentityFile would log in without the agent
        monkeypatch.delenv("SSH_KEY_PATH")
        monkeypatch.setenv("TAO_SSH_CONTROL_DIR", os.path.join(short, "ctl"))  # no master to reuse
        user = slurm_env["env"]["SLURM_USER"]
        monkeypatch.setenv("SLURM_HOSTNAME", f"{user}@127.0.0.1:22022")
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        with pytest.raises(TaoError, match="no SLURM login host answered"):
            Connection().remote(["true"])  # the agent is empty: nothing else can log in
        env = dict(os.environ, SSH_AUTH_SOCK=sock)
        subprocess.run(["ssh-add", slurm_env["env"]["SSH_KEY_PATH"]], env=env, capture_output=True, check=True)
        conn = Connection()
        assert conn.remote(["id", "-un"]).stdout.strip() == user
        conn.close()
    finally:
        os.kill(pid, signal.SIGTERM)
        import shutil
        shutil.rmtree(short, ignore_errors=True)


def test_bad_inputs_are_one_line_and_leave_nothing_behind(slurm_env, tmp_path):
    """What a careless user gets from the CLI: one 'error:' line naming the fix,
    no record, no job folder on the cluster, nothing in squeue."""
    # a results base of this test alone (owned like the shared one): other tests' job folders never land in it
    shared = Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"])
    base = shared / f"bad-inputs-{uuid.uuid4().hex[:8]}"
    base.mkdir()
    os.chown(base, shared.stat().st_uid, shared.stat().st_gid)
    env0 = dict(os.environ, NGC_KEY=SECRET, SLURM_BASE_RESULTS_DIR=str(base))
    lustre = slurm_env["env"]["TAO_LOCAL_LUSTRE_ROOT"]
    jobs = base / "jobs"
    before = set(os.listdir(jobs)) if jobs.exists() else set()
    cli = [sys.executable, os.path.join(BANK, "scripts", "tao_slurm.py"), "submit", "--spec"]

    def spec(**kw):
        p = tmp_path / f"s{len(list(tmp_path.iterdir()))}.json"
        p.write_text(json.dumps(base_spec(secrets=["NGC_KEY"], **kw)))
        return str(p)

    no_user = {k: v for k, v in env0.items() if k != "SLURM_USER"}
    no_part = {k: v for k, v in env0.items() if k != "SLURM_PARTITION"}
    no_key = {k: v for k, v in env0.items() if k != "NGC_KEY"}
    refused = dict(env0, SLURM_HOSTNAME="tao-slurm-refused")
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({**base_spec(), "num_gpu": 2}))
    cases = [
        (no_user, spec(), "SLURM_USER is not set: export SLURM_USER="),
        (refused, spec(), "no SLURM login host answered over passwordless SSH (tao-slurm-refused: "),
        (env0, spec(dataset={"root": f"lustre://{lustre}/datasets/absent"}), "missing on the cluster"),
        (env0, spec(dataset={"root": "/home/me/data"}), "is a local path"),
        (no_part, spec(time_hours=6), "exceeds the 4 h limit of the packaged default partitions"),
        (env0, str(typo), "unknown field 'num_gpu' (did you mean 'num_gpus'?)"),
        (no_key, spec(), "secret NGC_KEY is listed but not set in your environment"),
    ]
    for env, path, fragment in cases:
        r = subprocess.run(cli + [path], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 1 and r.stdout == "", (fragment, r.stdout, r.stderr)
        assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1 and fragment in r.stderr, r.stderr
        assert SECRET not in r.stderr
    assert records.list_records() == []
    assert (set(os.listdir(jobs)) if jobs.exists() else set()) == before
    base.rmdir()  # empty: nothing was left behind


def test_argv_that_looks_like_srun_options_reaches_the_program(slurm_env):
    """`command: ["--version"]` once made srun print its version and the job 'succeed'."""
    rec = slurm_submit.submit(base_spec(command=["--version"]))
    done = wait_state(rec["id"])
    assert done["state"] == "ERROR", done  # srun exec'd a program named --version: it does not exist
    err = slurm_logs.logs(rec["id"])["main.err"]
    assert "--version" in err and "slurm 22" not in slurm_logs.logs(rec["id"])["main.out"].lower()


def test_follow_with_tail_starts_at_the_last_lines(slurm_env):
    """logs -f --tail N (the one grammar): the last N lines of what is there, then what comes."""
    rec = slurm_submit.submit(base_spec(command=["bash", "-c", "for i in 1 2 3 4 5 6; do echo line$i; done; sleep 3; "
                                         "echo late"]))
    wait_state(rec["id"], states=("RUNNING", "COMPLETE"))
    time.sleep(1.5)  # the six lines are written
    chunks: dict[str, str] = {"main.out": "", "main.err": ""}
    final = slurm_logs.follow(rec["id"], on_chunk=lambda s, t: chunks.__setitem__(s, chunks[s] + t), interval=0.5, tail=2)
    assert final.state == "COMPLETE"
    assert chunks["main.out"].startswith("line5\nline6\n") and "line4" not in chunks["main.out"], chunks
    assert "\nlate\n" in chunks["main.out"]  # what came after the first read is streamed too


def test_a_refused_training_sbatch_cancels_its_held_conversion_job(slurm_env):
    from taobank.platforms.slurm import images

    cache = slurm_env["env"]["SLURM_BASE_RESULTS_DIR"] + "/sqsh-cache-e2e-refused"
    image = "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt"
    Connection().script('rm -f -- "$1"', [images.sqsh_path(image, cache)])
    with pytest.raises(TaoError, match=r"image conversion job (\d+) cancelled") as err:
        slurm_submit.submit(base_spec(container_runtime="pyxis", image=image, sqsh_cache_dir=cache,
                               account=SLURM_LAYOUT.default_account, conversion_account=SLURM_LAYOUT.account,
                               conversion_cpus=1, conversion_mem="200M", conversion_time_minutes=5))
    cid = re.search(r"image conversion job (\d+) cancelled", str(err.value)).group(1)
    conv = Connection().remote(["scontrol", "show", "job", "-o", cid]).stdout
    # it never ran: submitted held, cancelled when the training sbatch was refused
    assert " JobState=CANCELLED " in conv and " RunTime=00:00:00 " in conv, conv
    (rec,) = [r for r in records.list_records("slurm") if r["backend"].get("convert_job_id") == cid]
    assert rec["state"] == "ERROR" and not rec["backend"].get("slurm_job_id")


def test_a_failed_job_removes_its_credentials_itself_before_any_status(slurm_env, monkeypatch):
    """No poller needed: the job's own exit path takes the secret off the shared filesystem."""
    monkeypatch.setenv("NGC_KEY", SECRET)
    rec = slurm_submit.submit(base_spec(secrets=["NGC_KEY"], command=["bash", "-c", "echo keylen=${#NGC_KEY}; exit 3"]))
    jdir = rec["backend"]["job_dir"]
    conn = Connection()
    probe = 'for f in "$1/meta/exit.json" "$1/env/credentials.sh"; do if [ -e "$f" ]; then echo yes; else echo no; fi; done'
    deadline = time.time() + 120
    while time.time() < deadline:
        marker, creds = conn.script(probe, [jdir]).stdout.split()
        if marker == "yes":
            break
        time.sleep(1)
    assert (marker, creds) == ("yes", "no")
    assert records.load(rec["id"])["state"] == "PENDING"  # no status ran: the job did it itself
    assert wait_state(rec["id"])["state"] == "ERROR"
