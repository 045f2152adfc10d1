"""What real sites need, run on the local SLURM cluster: CPUs, wall-time units, a required account."""
from __future__ import annotations

import os
import sys
import uuid

import pytest

from taobank.errors import TaoError
from taobank.platforms.slurm import logs as slurm_logs, submit as slurm_submit
from taobank.platforms.slurm.ssh import Connection

sys.path.insert(0, os.path.dirname(__file__))
from slurm_helpers import base_spec, wait_state  # noqa: E402

CPUS = "grep Cpus_allowed_list /proc/self/status; echo nproc=$(nproc)"


def _remote(argv: list[str]) -> str:
    return Connection().remote(argv, what="test").stdout


@pytest.mark.parametrize("cpus", [1, 2])
def test_the_step_gets_the_cpus_per_task_asked(slurm_env, cpus):
    """cgroup.conf ConstrainCores: a step bound to fewer CPUs than asked would print fewer."""
    rec = slurm_submit.submit(base_spec(cpus_per_task=cpus, command=["bash", "-c", CPUS]))
    assert wait_state(rec["id"])["state"] == "COMPLETE"
    assert f"nproc={cpus}\n" in slurm_logs.logs(rec["id"])["main.out"]


def test_wall_time_in_minutes_and_timeout_inside_it(slurm_env):
    rec = slurm_submit.submit(base_spec(time_hours=None, time="00:10:00", command=["true"]))
    jid = rec["backend"]["slurm_job_id"]
    shown = _remote(["scontrol", "show", "job", "-o", jid])
    assert " TimeLimit=00:10:00 " in shown, shown  # not 11 minutes
    script = _remote(["cat", "--", rec["backend"]["script"]])
    assert "timeout --signal=TERM --kill-after=57 513 \\" in script  # SIGKILL at 570 s of 600
    assert wait_state(rec["id"])["state"] == "COMPLETE"


def test_a_job_without_the_required_account_is_refused_with_the_fix(slurm_env, monkeypatch):
    monkeypatch.delenv("SLURM_ACCOUNT")
    with pytest.raises(TaoError, match="set SLURM_ACCOUNT to an account you may use"):
        slurm_submit.submit(base_spec())
    monkeypatch.setenv("SLURM_ACCOUNT", "no-such-account")
    with pytest.raises(TaoError, match="Invalid account.*SLURM_ACCOUNT"):
        slurm_submit.submit(base_spec())
    monkeypatch.setenv("SLURM_ACCOUNT", slurm_env["env"]["SLURM_ACCOUNT"])
    rec = slurm_submit.submit(base_spec())
    assert wait_state(rec["id"])["state"] == "COMPLETE"


def _cached_image(env: dict, sub: str) -> tuple[str, str]:
    from taobank.platforms.slurm import images

    cache = env["SLURM_BASE_RESULTS_DIR"] + "/" + sub
    image = "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt"
    sqsh = images.sqsh_path(image, cache)
    # a cached image (squashfs magic first): no conversion
    Connection().script('mkdir -p -- "$(dirname -- "$1")" && printf hsqs > "$1"', [sqsh])
    return image, cache


def _mount_line(rec: dict) -> list[str]:
    script = _remote(["cat", "--", rec["backend"]["script"]])
    return next(w for w in script.split() if w.startswith("--container-mounts=")).split("=", 1)[1].split(",")


def test_container_mounts_cover_the_results_base_and_every_input(slurm_env, monkeypatch):
    env = slurm_env["env"]
    lustre = env["TAO_LOCAL_LUSTRE_ROOT"]
    data = f"{lustre}/datasets/mounts-e2e"
    train = f"{lustre}/other/specs/train.yaml"  # outside the results base: the new-user finding
    Connection().script('mkdir -p -- "$1" "$(dirname -- "$2")" && : > "$1/annotations.json" && : > "$2"', [data, train])
    image, cache = _cached_image(env, "sqsh-cache-mounts")
    spec = base_spec(container_runtime="pyxis", image=image, sqsh_cache_dir=cache, command=["dino", "train", "-e", train],
                     dataset={"root": f"lustre://{data}", "required": ["annotations.json"]})
    rec = slurm_submit.submit(spec)
    assert _mount_line(rec) == ["/" + lustre.strip("/").split("/")[0]]  # the site root: the results base's first folder
    monkeypatch.setenv("SLURM_CONTAINER_MOUNTS", env["SLURM_BASE_RESULTS_DIR"])
    rec = slurm_submit.submit(spec)
    assert sorted(_mount_line(rec)) == sorted([env["SLURM_BASE_RESULTS_DIR"], data, train])
    wait_state(rec["id"])  # Debian's SLURM has no Pyxis: the job ends in ERROR (srun rejects the option)
    err = slurm_logs.logs(rec["id"])["main.err"]
    assert "--container-image=" in err and "unrecognized option" in err


def test_a_path_the_command_names_is_checked_on_the_cluster_before_anything_is_written(slurm_env, tmp_path):
    from taobank import records

    lustre = slurm_env["env"]["TAO_LOCAL_LUSTRE_ROOT"]
    found = f"{lustre}/other/specs/read-me-{uuid.uuid4().hex[:8]}.yaml"
    absent = f"{lustre}/other/specs/absent.yaml"
    train = tmp_path / "train.yaml"
    train.write_text(f"model:\n  pretrained: {absent}\nresults_dir: {lustre}/not/yet/made\n")
    with pytest.raises(TaoError, match=f"missing on the cluster .*: {absent}; "):
        slurm_submit.submit(base_spec(spec_files={"train.yaml": str(train)}, command=["cat", "{specs}/train.yaml"]))
    with pytest.raises(TaoError, match=f"missing on the cluster .*: {absent}; "):
        slurm_submit.submit(base_spec(command=["cat", absent]))
    assert records.list_records() == []
    Connection().script('mkdir -p -- "$(dirname -- "$1")" && echo spec-on-lustre > "$1"', [found])
    rec = slurm_submit.submit(base_spec(command=["cat", found, f"results_dir={lustre}/not/yet/made"]))  # outputs need not exist
    wait_state(rec["id"])
    assert "spec-on-lustre" in slurm_logs.logs(rec["id"])["main.out"]


def test_a_path_hidden_by_an_extra_mount_is_refused_before_anything_is_written(slurm_env):
    env = slurm_env["env"]
    image, cache = _cached_image(env, "sqsh-cache-mounts")
    with pytest.raises(TaoError, match="results base .* is hidden in the container by the mount"):
        slurm_submit.submit(base_spec(container_runtime="pyxis", image=image, sqsh_cache_dir=cache,
                               container_mounts=f"{env['TAO_LOCAL_LUSTRE_ROOT']}/other:{env['SLURM_BASE_RESULTS_DIR']}"))
    from taobank import records

    assert records.list_records() == []


TAO_WRITES = ('d="$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID"; '
              'echo \'{"status": "STARTED", "message": "Starting"}\' >> "$d/status.json"; '
              'echo "{\\"status\\": \\"$1\\", \\"message\\": \\"$2\\"}" >> "$d/status.json"; exit "$3"')


@pytest.mark.parametrize("tao,rc,want", [("FAILURE", 0, "ERROR"), ("SUCCESS", 0, "COMPLETE"), ("SUCCESS", 3, "COMPLETE")])
def test_tao_status_json_decides_the_end_state(slurm_env, tao, rc, want):
    rec = slurm_submit.submit(base_spec(command=["bash", "-c", TAO_WRITES, "tao", tao, f"said {tao.lower()}", str(rc)]))
    done = wait_state(rec["id"])
    # FAILURE with exit 0 is the core's one rule (track.tao_last_word), worded the same on every platform
    said = ("TAO's status.json ends in FAILURE (said failure) despite exit code 0" if tao == "FAILURE"
            else f"TAO status.json: {tao}: said {tao.lower()}")
    assert done["state"] == want and said in done["message"], done


FLAKY_NODE = ('f="$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID/first-node"; '
              'if [ ! -e "$f" ]; then echo "$SLURMD_NODENAME" > "$f"; '
              'echo "x:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12" >&2; exit 1; fi; '
              'echo "second run on $SLURMD_NODENAME after $(cat "$f")"')


def test_infrastructure_failure_resubmits_itself_on_another_node_without_a_poller(slurm_env):
    rec = slurm_submit.submit(base_spec(command=["bash", "-c", FLAKY_NODE]))
    first = rec["backend"]["slurm_job_id"]
    # nobody polls: wait on the cluster until the job has resubmitted itself and the retry finished
    shown = ""
    for _ in range(90):
        shown = _remote(["sh", "-c", 'cat -- "$1" 2>/dev/null; true', "tao",
                         rec["backend"]["job_dir"] + "/meta/retries.jsonl"])
        if shown.strip():
            break
        import time

        time.sleep(1)
    assert f'"from":"{first}"' in shown and '"attempt":1' in shown, shown
    # the first status after that follows the new SLURM job (it waits for the one node it may use)
    done = wait_state(rec["id"], timeout=300)
    b = done["backend"]
    assert done["state"] == "COMPLETE" and b["slurm_job_id"] != first and b["self_retries"] == 1, done
    failed_on = _remote(["cat", "--", done["results_dir"] + "/first-node"]).strip()
    assert b["excluded_nodes"] == failed_on
    out = slurm_logs.logs(rec["id"])["main.out"]
    assert "second run on " in out and f"second run on {failed_on}" not in out  # the failing node was excluded
    job = _remote(["scontrol", "show", "job", "-o", b["slurm_job_id"]])
    assert f" ExcNodeList={failed_on} " in job


def test_quota_and_shm_errors_are_program_errors_never_retried(slurm_env):
    rec = slurm_submit.submit(base_spec(command=["bash", "-c", "echo 'OSError: [Errno 122] Disk quota exceeded' >&2; exit 1"]))
    done = wait_state(rec["id"])
    assert done["state"] == "ERROR" and done["err_class"] == "ERR_PROGRAM"
    assert "resubmitted" not in slurm_logs.logs(rec["id"])["main.out"]


def test_spec_files_reach_the_job_under_specs_checked_and_private(slurm_env, tmp_path):
    train = tmp_path / "train.yaml"
    train.write_text("train:\n  num_epochs: 3\n")
    rec = slurm_submit.submit(base_spec(spec_files={"train.yaml": str(train)},
                                 command=["bash", "-c", 'echo "read: $(cat "$1")"; stat -c %a "$1"', "tao",
                                          "{specs}/train.yaml"]))
    assert wait_state(rec["id"])["state"] == "COMPLETE"
    out = slurm_logs.logs(rec["id"])["main.out"]
    assert "read: train:\n  num_epochs: 3\n600\n" in out


def test_a_spec_file_changed_in_transit_is_refused_on_the_cluster(slurm_env, tmp_path, monkeypatch):
    from taobank import records
    from taobank.platforms.slurm import uploads

    train = tmp_path / "train.yaml"
    train.write_text("a: 1\n")
    monkeypatch.setattr(uploads, "checksums", lambda ups: [f"{'0' * 64}  {u.name}" for u in ups])
    with pytest.raises(TaoError, match="stage job dir failed"):
        slurm_submit.submit(base_spec(spec_files={"train.yaml": str(train)}, command=["cat", "{specs}/train.yaml"]))
    (rec,) = records.list_records()
    assert rec["state"] == "ERROR" and not rec["backend"].get("slurm_job_id")


def test_stage_copies_small_inputs_refuses_overwrite_and_traversal(slurm_env, tmp_path, monkeypatch):
    import subprocess

    ckpt = tmp_path / "model.pth"
    ckpt.write_bytes(b"\x00\x01weights")
    dest = slurm_env["env"]["SLURM_BASE_RESULTS_DIR"] + f"/inputs-{uuid.uuid4().hex[:12]}"
    bank = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    run = lambda *a: subprocess.run([f"{bank}/scripts/tao_slurm.py", "stage", *a], capture_output=True, text=True)  # noqa: E731
    first = run(str(ckpt), "--dest", f"lustre://{dest}", "--json")
    assert first.returncode == 0, first.stderr
    assert _remote(["sh", "-c", 'od -c "$1" | head -1; stat -c %a "$1"', "tao", f"{dest}/model.pth"]).split("\n")[1] == "600"
    again = run(str(ckpt), "--dest", f"lustre://{dest}")
    assert again.returncode == 1 and "exists (use --force" in again.stderr and again.stderr.count("\n") == 1
    assert run(str(ckpt), "--dest", f"lustre://{dest}", "--force").returncode == 0
    bad = run(str(ckpt), "--dest", f"lustre://{dest}/../../etc")
    assert bad.returncode == 1 and "'..'" in bad.stderr
    # a folder keeps its layout and gets a manifest beside it, checked there and usable later
    tree = tmp_path / "labels"
    (tree / "val").mkdir(parents=True)
    (tree / "map.txt").write_text("0 person\n")
    (tree / "val" / "a.json").write_text("{}")
    assert run(str(tree), "--dest", f"lustre://{dest}").returncode == 0
    check = _remote(["sh", "-c", 'cd "$1" && cat labels/val/a.json && sha256sum -c labels.sha256', "tao", dest])
    assert check.startswith("{}") and "labels/map.txt: OK" in check and "labels/val/a.json: OK" in check
    twice = run(str(tree), "--dest", f"lustre://{dest}")
    assert twice.returncode == 1 and "/labels" in twice.stderr and "exists (use --force" in twice.stderr


def _probe_cli(*args: str):
    import json
    import subprocess

    bank = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    res = subprocess.run([f"{bank}/scripts/tao_slurm.py", "nccl-probe", "--runtime", "none", "--cpus-per-task", "1",
                          "--interval", "1", "--json", *args], capture_output=True, text=True, timeout=300)
    return res, (json.loads(res.stdout) if res.stdout.strip() else None)


def test_nccl_probe_lifecycle_and_the_multi_node_gate(slurm_env):
    """The local nodes have PyTorch on CPU (Debian) and no GPU: the NCCL probe runs for real on both nodes and
    stops before torchrun (exit 3), cached as 'no-gpu' (advice: GPU nodes, or --backend gloo-cpu; never NCCL
    variables), keeps the gate closed, and is never resubmitted as an infrastructure failure. Then the gloo-cpu
    probe all-reduces over TCP between the two nodes for real, and a two-node submit passes the gate with no
    --skip-nccl-probe, its record and gate saying what gloo proved and that NCCL over GPUs was not."""
    from taobank import records

    res, out = _probe_cli("--timeout", "60")
    assert res.returncode == 1 and out["verdict"] == "no-gpu" and out["cluster"].endswith("/local"), res.stderr
    assert "error: NCCL probe (nccl) no-gpu" in res.stderr and "exit code 3" in res.stderr
    assert "--backend gloo-cpu" in res.stderr and "--nccl-env" not in res.stderr  # the cause is no GPU
    rec = records.load(out["job_id"])
    assert rec["state"] == "ERROR" and rec["backend"]["infra_retries"] is False
    assert "PyTorch sees no CUDA GPU here" in slurm_logs.logs(out["job_id"])["main.err"]  # it ran on the nodes
    two_nodes = base_spec(num_gpus=2, num_nodes=2)
    with pytest.raises(TaoError, match="the last probe said no-gpu"):
        slurm_submit.submit(two_nodes)

    res, out = _probe_cli("--timeout", "60", "--backend", "gloo-cpu")
    assert res.returncode == 0 and out["verdict"] == "ok" and out["backend"] == "gloo-cpu", res.stderr
    assert out["proves"] == "gloo on CPU: the network path between nodes; NCCL over GPUs not proven"
    lines = [ln for ln in slurm_logs.logs(out["job_id"])["main.out"].splitlines() if "gloo-cpu probe rank" in ln]
    assert sorted(lines) == ["gloo-cpu probe rank 0/2 on node1: all_reduce sum=2 ok",
                             "gloo-cpu probe rank 1/2 on node2: all_reduce sum=2 ok"], lines
    probe_rec = records.load(out["job_id"])
    assert probe_rec["backend"].get("nccl_probe") is None  # the probe itself needs no verdict
    done = wait_state(slurm_submit.submit(two_nodes)["id"])  # no --skip-nccl-probe
    assert done["state"] == "COMPLETE" and done["backend"]["nccl_probe"] == "ok", done
    assert done["backend"]["nccl_probe_backend"] == "gloo-cpu" and done["backend"]["nccl_probe_job"] == out["job_id"]


def test_nccl_probe_that_cannot_start_is_cancelled_at_max_wait_as_not_run(slurm_env):
    from taobank import records

    # both nodes taken by another job: the probe stays PENDING (Resources) past its wait
    acct = slurm_env["env"]["SLURM_ACCOUNT"]
    blocker = _remote(["sbatch", "--parsable", "--exclusive", "-N2", f"--account={acct}", "--time=5",
                       "--output=/dev/null", "--wrap", "sleep 120"]).strip()
    try:
        import time

        deadline = time.monotonic() + 240  # other tests' jobs may hold the nodes first: the blocker must run
        while _remote(["squeue", "-h", "-j", blocker, "-o", "%t"]).strip() != "R":
            assert time.monotonic() < deadline, "the blocking job never started"
            time.sleep(1)
        res, out = _probe_cli("--max-wait", "4", "--force")
    finally:
        _remote(["scancel", blocker])
    assert res.returncode == 1 and out["verdict"] == "not-run", res.stderr
    assert records.load(out["job_id"])["state"] == "CANCELED"
    assert "never started" in out["advice"]
