"""artifacts, fetch and prune on the local cluster: a real reader pod on the job's PVC (tier A), and S3 (tier C).

The job is testclusters/fake_tao_train.sh run by busybox on a real kubelet
node: it writes TAO's status.json and one checkpoint per epoch into the
job's folder on the PVC. The trainer reaches the pod through that PVC (its
host folder), so the test needs no image of its own.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
import k8s_verbs_support
from k8s_verbs_support import BANK, ON_REAL

import testclusters.kubernetes as lk
from taobank import pins, results_shell
from tests.support.results_cli import TAO_JOBS, big_files, fetch_killed_half_way, tao_jobs, tree

pytestmark = pytest.mark.e2e
k8s = k8s_verbs_support.k8s  # the fixtures the tests take (pytest collects them under these names)
trainer_on_pvc = k8s_verbs_support.trainer_on_pvc

BUSYBOX = str(pins.resolve("images.busybox"))
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"
EPOCHS = 5
BEST_EPOCH = (2 * EPOCHS + 2) // 3 - 1  # where the fake trainer's val_loss is lowest (TAO's 0-based epoch)


def ckpt(epoch: int) -> str:
    """The stand-in's checkpoint of an epoch, as TAO names it (10 steps an epoch)."""
    return f"train/model_epoch_{epoch:03d}_step_{(epoch + 1) * 10:05d}.pth"


BEST = ckpt(BEST_EPOCH)


def jobs(k8s, *args: str, env: dict | None = None, check: bool = True):
    return tao_jobs(*args, env={**k8s.env, **(env or {})}, check=check)


def test_artifacts_fetch_and_prune_through_a_reader_pod_on_the_pvc(k8s, trainer_on_pvc, tmp_path):
    out = k8s.submit("--image", BUSYBOX, "--network-arch", "deformable_detr", "--action", "train", "--pvc-mount",
                     f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "1", "--command",
                     f'sh {trainer_on_pvc} --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs {EPOCHS}')
    jid = out["id"]
    st = k8s.wait(jid, lambda s: s["state"] in ("COMPLETE", "ERROR", "CANCELED"), timeout=180)
    assert st["state"] == "COMPLETE", json.dumps(st) + k8s.tao("logs", jid, check=False).stdout
    on_pvc = lk.state_root() / "pv" / jid  # the same folder, seen from the host

    listed = json.loads(jobs(k8s, "artifacts", jid, "--kpi", "val_loss", "--json").stdout)
    assert listed["folder"] == f"/results/{jid}" and listed["exists"] is True
    paths = {f["path"]: f for f in listed["files"]}
    assert set(paths) == set(tree(on_pvc)), (sorted(paths), sorted(tree(on_pvc)))
    assert {p for p, f in paths.items() if f["checkpoint"]} == {ckpt(e) for e in range(EPOCHS)}
    assert all(paths[p]["size"] == (on_pvc / p).stat().st_size for p in paths)
    assert listed["best"]["epoch"] == BEST_EPOCH and listed["best"]["checkpoints"] == [BEST]
    text = jobs(k8s, "artifacts", jid, "--kpi", "val_loss").stdout
    assert f"at epoch {BEST_EPOCH}: {BEST}" in text

    dest = tmp_path / "all"
    got = json.loads(jobs(k8s, "fetch", jid, "--to", str(dest), "--json").stdout)
    files = [g for g in got if not g.get("link_to")]
    assert tree(dest) == tree(on_pvc) and len({g["verified"] for g in files}) == 1
    assert files[0]["verified"] in results_shell.VERIFIED.values()  # a digest computed in the reader pod as it read
    latest = {g["path"]: g["link_to"] for g in got if g.get("link_to")}  # TAO's latest link: a link here too
    assert latest == {p: str(Path(p).parent / os.readlink(on_pvc / p)) for p in latest} and len(latest) == 1
    assert all((dest / p).is_symlink() and (dest / p).read_bytes() == (on_pvc / p).read_bytes() for p in latest)
    one = tmp_path / "one"
    jobs(k8s, "fetch", jid, BEST, "logs", "--to", str(one))
    assert set(tree(one)) == {BEST} | {p for p in paths if p.startswith("logs/")}
    (one / BEST).write_bytes(b"mine")
    again = jobs(k8s, "fetch", jid, BEST, "--to", str(one), check=False)
    assert again.returncode == 1 and "exists: pass --force" in again.stderr
    outside = jobs(k8s, "fetch", jid, "../" + trainer_on_pvc.split("/")[2], "--to", str(one), check=False)
    assert outside.returncode == 2 and "is not a path inside the folder" in outside.stderr

    refused = jobs(k8s, "prune", jid, check=False)  # no terminal, no --yes
    assert refused.returncode == 2 and on_pvc.is_dir()
    # issue 37: keep the two newest checkpoints, delete the rest, in a writable reader pod on the PVC
    (kept,) = json.loads(jobs(k8s, "prune", jid, "--keep", "2", "--yes", "--json").stdout)
    assert sorted(k["path"] for k in kept["kept"]) == [ckpt(EPOCHS - 2), ckpt(EPOCHS - 1)]
    assert all(k["sha256"] == tree(on_pvc)[k["path"]] for k in kept["kept"])
    assert {p for p in tree(on_pvc) if p.endswith(".pth") and "latest" not in p} == {ckpt(EPOCHS - 2), ckpt(EPOCHS - 1)}
    assert (on_pvc / "train" / "status.json").is_file()
    pruned = jobs(k8s, "prune", jid, "--yes")
    assert f"deleted /results/{jid}" in pruned.stdout and not on_pvc.exists()
    assert Path(trainer_on_pvc.replace("/results", str(lk.state_root() / "pv"))).is_file()  # the rest is kept
    gone = jobs(k8s, "artifacts", jid)
    assert "does not exist (pruned" in gone.stderr
    # this job's readers only (other tests read their own jobs' results at the same time)
    readers = k8s.kjson("get", "jobs", "-l", f"tao-skill-bank/volume-job=true,tao-skill-bank/for-job={jid}")["items"]
    assert not [r for r in readers if r["metadata"]["name"].startswith("tao-read-")
                and not r["metadata"].get("deletionTimestamp")], "a reader pod was left behind"


def readers_of(k8s, jid: str) -> list[str]:
    """This job's reader Jobs and pods still there (not being deleted): other tests read their own jobs."""
    sel = f"tao-skill-bank/volume-job=true,tao-skill-bank/for-job={jid}"
    return [f"{kind} {o['metadata']['name']}" for kind in ("jobs", "pods")
            for o in k8s.kjson("get", kind, "-l", sel)["items"] if not o["metadata"].get("deletionTimestamp")]


def test_a_fetch_killed_half_way_leaves_no_reader_and_resumes(k8s, trainer_on_pvc, tmp_path):
    """SIGTERM to the client while 512 MiB stream out of the reader pod: its reader is deleted, the rerun
    completes with identical bytes and moves less; two fetches of the job at once both work."""
    out = k8s.submit("--image", BUSYBOX, "--network-arch", "deformable_detr", "--action", "train", "--pvc-mount",
                     f"{lk.PVC_NAME}:/results", *ON_REAL, "--gpus", "1", "--command",
                     f'sh {trainer_on_pvc} --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs 1')
    jid = out["id"]
    st = k8s.wait(jid, lambda s: s["state"] in ("COMPLETE", "ERROR", "CANCELED"), timeout=180)
    assert st["state"] == "COMPLETE", json.dumps(st)
    on_pvc = lk.state_root() / "pv" / jid
    big_files(on_pvc)
    dest = tmp_path / "dl"
    err = fetch_killed_half_way(jid, dest, k8s.env, timeout=300)
    assert "interrupted" in err, err
    have, want = tree(dest), tree(on_pvc)
    placed = [p for p in have if p.startswith("big-")]
    assert placed and all(have[p] == want[p] for p in placed) and len(placed) < 4
    deadline = time.monotonic() + 60  # the Job is deleted at once; its pod terminates (1 s grace) and goes
    while readers_of(k8s, jid) and time.monotonic() < deadline:
        time.sleep(1)
    assert readers_of(k8s, jid) == [], "a reader pod was left behind"

    got = json.loads(jobs(k8s, "fetch", jid, "--to", str(dest), "--json").stdout)
    assert tree(dest) == want
    total, moved = sum(g["size"] for g in got), sum(g["moved"] for g in got)
    assert 0 < moved < total, (moved, total)

    both = [subprocess.Popen([sys.executable, str(TAO_JOBS), "fetch", jid, "big-0.pth", "--to", str(tmp_path / d),
                              "--json"], env=k8s.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for d in ("a", "b")]
    for proc in both:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert tree(tmp_path / "a") == tree(tmp_path / "b") == {"big-0.pth": want["big-0.pth"]}
    deadline = time.monotonic() + 60
    while readers_of(k8s, jid) and time.monotonic() < deadline:
        time.sleep(1)
    assert readers_of(k8s, jid) == []


#: A tier C job writing two checkpoints and an action's status file, uploaded to S3 at the end.
TIER_C = {"image": BUSYBOX, "network_arch": "deformable_detr", "action": "train", "storage_tier": "C", "gpus": 1,
          "node_selector": {lk.REAL_NODE_LABEL: "true"},
          "command": 'd="$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" && mkdir -p "$d/train" && '
                     'echo "epoch 1" > "$d/model_epoch_001.pth" && echo "epoch 2" > "$d/model_epoch_002.pth" && '
                     'printf \'{"epoch": 1, "kpi": {"mAP": 0.5}}\\n{"epoch": 2, "kpi": {"mAP": 0.7}}\\n\' '
                     '> "$d/train/status.json"'}
S3_SETTINGS = {"AWS_ACCESS_KEY_ID": lk.s3.ACCESS_KEY_ID, "AWS_DEFAULT_REGION": lk.s3.REGION}


def test_tier_c_results_are_listed_fetched_and_pruned_in_s3(k8s, tmp_path):
    if not shutil.which("aws"):
        pytest.fail("the AWS CLI is needed on this machine for tier C results (pip install awscli)")
    bucket = "tao-" + secrets.token_hex(4)
    lk.s3_make_bucket(bucket)
    spec = tmp_path / "tier-c.yaml"
    spec.write_text(yaml.safe_dump({**TIER_C, "results_dir": f"s3://{bucket}/results"}))
    secret = secrets.token_hex(20)
    creds = {**S3_SETTINGS, "AWS_SECRET_ACCESS_KEY": secret, "S3_ENDPOINT_URL": lk.s3_endpoint()}
    out = k8s.submit("--spec", str(spec), *[a for name in creds for a in ("--secret-env", name)], env=creds)
    jid = out["id"]
    st = k8s.wait(jid, lambda s: s["state"] in ("COMPLETE", "ERROR", "CANCELED"), timeout=180)
    assert st["state"] == "COMPLETE", json.dumps(st)

    listed = json.loads(jobs(k8s, "artifacts", jid, "--kpi", "mAP", "--mode", "max", "--json", env=creds).stdout)
    assert listed["folder"] == f"s3://{bucket}/results/{jid}"
    assert sorted(f["path"] for f in listed["files"]) == ["model_epoch_001.pth", "model_epoch_002.pth",
                                                          "train/status.json"]
    assert listed["best"]["checkpoints"] == ["model_epoch_002.pth"] and listed["best"]["status_file"] == "train/status.json"
    got = json.loads(jobs(k8s, "fetch", jid, "--to", str(tmp_path / "dl"), "--json", env=creds).stdout)
    assert (tmp_path / "dl" / "model_epoch_002.pth").read_text() == "epoch 2\n"
    assert {g["verified"] for g in got} == {"size+md5 (ETag)"}
    jobs(k8s, "prune", jid, "--yes", env=creds)
    assert lk.s3_keys(bucket, f"results/{jid}/") == []
    assert secret not in k8s.call_log.read_text()


#: A tier C train job as argv: not resumed, it writes epochs 1-2 and fails; resumed (TAO's override as an
#: argument), it prints the checkpoint it was handed, writes epoch 3 and succeeds.
RESUMABLE = ('d="$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" && mkdir -p "$d" && '
             'for a; do case "$a" in train.resume_training_checkpoint_path=*) '
             'echo "resumed from $(cat "${a#*=}")"; echo "epoch 3" > "$d/model_epoch_003.pth"; exit 0;; esac; done; '
             'echo "epoch 1" > "$d/model_epoch_001.pth" && echo "epoch 2" > "$d/model_epoch_002.pth" && exit 3')


def test_a_tier_c_job_is_continued_and_its_checkpoint_evaluated_from_s3(k8s, tmp_path):
    """Results in S3 are never mounted: continue and --parent download the checkpoint in the new job's
    fetch step (s3_inputs into its staging folder), then hand it over as a path."""
    if not shutil.which("aws"):
        pytest.fail("the AWS CLI is needed on this machine for tier C results (pip install awscli)")
    bucket = "tao-" + secrets.token_hex(4)
    lk.s3_make_bucket(bucket)
    creds = {**S3_SETTINGS, "AWS_SECRET_ACCESS_KEY": secrets.token_hex(20), "S3_ENDPOINT_URL": lk.s3_endpoint()}
    cred_args = [a for name in creds for a in ("--secret-env", name)]
    base = {k: v for k, v in TIER_C.items() if k != "command"}
    train = tmp_path / "train.yaml"
    train.write_text(yaml.safe_dump({**base, "results_dir": f"s3://{bucket}/runs",
                                     "args": ["sh", "-c", RESUMABLE, "tao"]}))
    first = k8s.submit("--spec", str(train), *cred_args, env=creds)["id"]
    assert k8s.wait(first, lambda s: s["state"] in ("COMPLETE", "ERROR", "CANCELED"), timeout=180)["state"] == "ERROR"
    assert lk.s3_keys(bucket, f"runs/{first}/model_epoch_002.pth") != []  # uploaded although it failed

    cont = json.loads(k8s.tao("continue", first, "--json", env=creds).stdout)
    k8s.ids.append(cont["id"])
    assert cont["continues_from"] == f"/tao-staging/from-{first}/model_epoch_002.pth"
    done = k8s.wait(cont["id"], lambda s: s["state"] in ("COMPLETE", "ERROR", "CANCELED"), timeout=180)
    assert done["state"] == "COMPLETE", json.dumps(done)
    assert "resumed from epoch 2" in k8s.tao("logs", cont["id"]).stdout

    evaluate = tmp_path / "evaluate.yaml"
    evaluate.write_text(yaml.safe_dump({**base, "action": "evaluate", "results_dir": f"s3://{bucket}/evals",
                                        "args": ["sh", "-c", 'echo "evaluating $(cat "$1")"', "tao",
                                                 "{parent.checkpoint}"]}))
    child = k8s.submit("--spec", str(evaluate), "--parent", cont["id"], *cred_args, env=creds)["id"]
    st = k8s.wait(child, lambda s: s["state"] in ("COMPLETE", "ERROR", "CANCELED"), timeout=180)
    assert st["state"] == "COMPLETE", json.dumps(st)
    assert "evaluating epoch 3" in k8s.tao("logs", child).stdout
    assert k8s.record(child)["parent"] == cont["id"]
    # a tier A child cannot reach an S3 parent: one line, nothing submitted
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({"image": BUSYBOX, "action": "evaluate", "network_arch": "deformable_detr",
                                     "gpus": 0, "args": ["cat", "{parent.checkpoint}"]}))
    refused = k8s.tao("submit", "--spec", str(plain), "--parent", cont["id"], "--no-results", check=False)
    assert refused.returncode == 1 and "only as a tier C job" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
