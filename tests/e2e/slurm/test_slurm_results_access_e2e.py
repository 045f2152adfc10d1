"""artifacts, fetch and prune on the local SLURM cluster, over the one SSH connection.

The job runs testclusters/fake_tao_train.sh (sent with the job as a spec
file, container runtime none): TAO's status.json and one checkpoint per
epoch in ``<base>/results/<id>`` on the shared filesystem, which this test
also reads directly to compare.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from slurm_helpers import base_spec, call_log, wait_state
from slurm_helpers import cancel as slurm_helpers_cancel

from taobank import results_shell
from taobank.platforms.slurm import logs as slurm_logs, submit as slurm_submit
from tests.support.results_cli import big_files, fetch_killed_half_way, tao_jobs as jobs, tree

pytestmark = pytest.mark.e2e

BANK = Path(__file__).resolve().parents[3]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"
EPOCHS = 5
BEST_EPOCH = (2 * EPOCHS + 2) // 3 - 1  # where the fake trainer's val_loss is lowest (TAO's 0-based epoch)


def ssh_commands(log: Path) -> int:
    return sum(1 for argv in call_log(log) if Path(argv[0]).name == "ssh" and "-O" not in argv and "-G" not in argv
               and argv[-1] != "true")


def test_artifacts_fetch_and_prune_over_one_connection(slurm_env, tmp_path):
    rec = slurm_submit.submit(base_spec(
        container_runtime="none", spec_files={"fake_tao_train.sh": str(TRAINER)},
        command=["sh", "-c", f'exec sh "$1" --results "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" --epochs {EPOCHS}',
                 "tao", "{specs}/fake_tao_train.sh"]))
    jid = rec["id"]
    done = wait_state(jid)
    assert done["state"] == "COMPLETE", slurm_logs.logs(jid)
    folder = Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"]) / "results" / jid
    assert (folder / "train" / "status.json").is_file()

    before = ssh_commands(slurm_env["call_log"])
    listed = json.loads(jobs("artifacts", jid, "--kpi", "val_loss", "--json").stdout)
    assert ssh_commands(slurm_env["call_log"]) - before == 1  # one remote command for files and status
    assert listed["folder"] == str(folder)
    assert {f["path"] for f in listed["files"]} == set(tree(folder))
    assert listed["best"]["epoch"] == BEST_EPOCH
    assert listed["best"]["checkpoints"] == [f"train/model_epoch_{BEST_EPOCH:03d}_step_{(BEST_EPOCH + 1) * 10:05d}.pth"]

    before = ssh_commands(slurm_env["call_log"])
    got = json.loads(jobs("fetch", jid, "--to", str(tmp_path / "all"), "--json").stdout)
    assert ssh_commands(slurm_env["call_log"]) - before == 2  # facts (sizes), then each file read once
    files = [g for g in got if not g.get("link_to")]
    assert tree(tmp_path / "all") == tree(folder) and {g["verified"] for g in files} == {results_shell.VERIFIED["crc32"]}  # python3 on the login node
    (link,) = [p.relative_to(folder).as_posix() for p in folder.rglob("*_model_latest.pth")]  # TAO's latest link
    latest = [g for g in got if g.get("link_to")]  # made again here (no second copy of its bytes)
    assert [(g["path"], g["link_to"]) for g in latest] == [(link, os.path.join("train", os.readlink(folder / link)))]
    assert (tmp_path / "all" / link).is_symlink() and (tmp_path / "all" / link).read_bytes() == (folder / link).read_bytes()
    before = ssh_commands(slurm_env["call_log"])
    same = json.loads(jobs("fetch", jid, "--to", str(tmp_path / "all"), "--json").stdout)
    assert {g["moved"] for g in same} == {0} and ssh_commands(slurm_env["call_log"]) - before == 1  # all here
    (tmp_path / "all" / "train" / "status.json").write_text("mine\n")
    again = jobs("fetch", jid, "train/status.json", "--to", str(tmp_path / "all"), check=False)
    assert again.returncode == 1 and "exists: pass --force" in again.stderr
    jobs("fetch", jid, "train/status.json", "--to", str(tmp_path / "all"), "--force")
    assert tree(tmp_path / "all") == tree(folder)
    escape = jobs("fetch", jid, "../../jobs", "--to", str(tmp_path / "x"), check=False)
    assert escape.returncode == 2 and not (tmp_path / "x").exists()

    assert jobs("prune", jid, check=False).returncode == 2 and folder.is_dir()  # no terminal, no --yes
    # issue 37: keep the best, delete the rest (one listing, one deletion), the kept file read back intact
    best = f"train/model_epoch_{BEST_EPOCH:03d}_step_{(BEST_EPOCH + 1) * 10:05d}.pth"
    digest = tree(folder)[best]
    before = ssh_commands(slurm_env["call_log"])
    (kept,) = json.loads(jobs("prune", jid, "--keep", "best", "--kpi", "val_loss", "--yes", "--json").stdout)
    assert ssh_commands(slurm_env["call_log"]) - before == 2
    assert kept["kept"] == [{"path": best, "size": (folder / best).stat().st_size, "sha256": digest}]
    assert sorted(p for p in tree(folder) if p.endswith(".pth")) == [best]  # the latest link went with its target
    assert (folder / "train" / "status.json").is_file()
    pruned = jobs("prune", jid, "--yes", "--json")
    assert json.loads(pruned.stdout)[0]["removed"] is True and not folder.exists()
    assert folder.parent.is_dir()  # only the job's own folder went
    assert (Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"]) / "jobs" / jid).is_dir()  # logs and specs stay
    assert "does not exist (pruned" in jobs("artifacts", jid).stderr
    assert "nothing to do" in jobs("prune", jid, "--yes").stdout  # a second prune finds nothing


def test_a_fetch_killed_half_way_resumes_with_identical_bytes_and_less_moved(slurm_env, tmp_path):
    """SIGTERM to the client while 512 MiB stream over the one connection; the rerun sends only the rest."""
    rec = slurm_submit.submit(base_spec(container_runtime="none", command=["true"]))
    jid = rec["id"]
    assert wait_state(jid)["state"] == "COMPLETE", slurm_logs.logs(jid)
    folder = Path(slurm_env["env"]["SLURM_BASE_RESULTS_DIR"]) / "results" / jid
    folder.mkdir(parents=True, exist_ok=True)
    big_files(folder)
    dest = tmp_path / "dl"
    err = fetch_killed_half_way(jid, dest, os.environ)
    assert "interrupted" in err, err
    have, want = tree(dest), tree(folder)
    placed = [p for p in have if p.startswith("big-")]
    assert placed and all(have[p] == want[p] for p in placed)  # what has its final name is whole
    assert len(placed) < 4  # and the rest is not there yet
    before = ssh_commands(slurm_env["call_log"])
    got = json.loads(jobs("fetch", jid, "--to", str(dest), "--json").stdout)
    assert ssh_commands(slurm_env["call_log"]) - before == 2
    assert tree(dest) == tree(folder)  # identical bytes, no staging folder left
    total, moved = sum(g["size"] for g in got), sum(g["moved"] for g in got)
    assert 0 < moved < total, (moved, total)


def test_prune_refuses_an_active_job_without_touching_it(slurm_env):
    rec = slurm_submit.submit(base_spec(container_runtime="none", command=["sleep", "60"]))
    try:
        wait_state(rec["id"], ("RUNNING",), timeout=60)
        out = jobs("prune", rec["id"], "--yes", check=False)
        assert out.returncode == 1 and "record says RUNNING: its results may still be written" in out.stderr
    finally:
        slurm_helpers_cancel(rec["id"])
