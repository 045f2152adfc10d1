"""continue, submit --parent and sweeps on a real Docker engine (local_cluster.py up docker), with the stand-in
trainer testclusters/fake_tao_train.sh bind-mounted read-only at /fake: it writes TAO's status.json and a
checkpoint per epoch, and resumes from train.resume_training_checkpoint_path (it fails if it cannot read it)."""
from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from docker_support import BANK, Docker, terminal

pytestmark = pytest.mark.e2e

FAKE = f"{BANK / 'testclusters'}:/fake"
#: the trainer, with whatever the bank appends (a trial's KEY=VALUE, continue's resume override) as "$@"
TRAIN = 'exec sh /fake/fake_tao_train.sh --results "$RESULTS_DIR" --epochs "$EPOCHS" --sleep "$SLEEP" "$@"'


@pytest.fixture()
def dk(docker_cluster, tmp_path) -> Docker:
    return Docker(docker_cluster, tmp_path)


def train(dk: Docker, *flags: str, epochs: int = 3, sleep: int = 1) -> dict:
    return dk.submit("--network-arch", "dino", "--action", "train", "--mount", FAKE, "--env", f"EPOCHS={epochs}",
                     "--env", f"SLEEP={sleep}", "--stop-grace", "2", *flags, "--", "sh", "-c", TRAIN, "tao")


def name(epoch: int) -> str:
    """The stand-in's checkpoint of an epoch (TAO's names: 0-based epoch, 10 steps an epoch)."""
    return f"model_epoch_{epoch:03d}_step_{(epoch + 1) * 10:05d}.pth"


def engine_calls(dk: Docker, since: int) -> list[list[str]]:
    lines = dk.call_log.read_text().splitlines() if dk.call_log.exists() else []
    return [c for c in (json.loads(x) for x in lines[since:] if x.strip()) if c and c[0] == "docker"]


def log_length(dk: Docker) -> int:
    return len(dk.call_log.read_text().splitlines()) if dk.call_log.exists() else 0


def test_continue_of_a_canceled_training_resumes_from_its_checkpoint(dk):
    old = train(dk, epochs=8)["id"]
    folder = dk.results / old
    end = time.time() + 60
    while not (folder / "train" / "model_epoch_001_step_00020.pth").exists():
        assert time.time() < end, "the training never wrote its second checkpoint"
        time.sleep(0.3)
    (view,) = json.loads(dk.ok("cancel", old, "--json").stdout)
    assert view["state"] == "CANCELED", view
    last = max(int(p.name[12:15]) for p in folder.glob("train/model_epoch_*.pth"))

    new = json.loads(dk.ok("continue", old, "--json", drop=("DOCKER_HOST",)).stdout)  # the record knows the engine
    ckpt = f"{folder}/train/{name(last)}"  # the target of TAO's latest link
    assert new["continues"] == old and new["continues_from"] == ckpt, new
    done = dk.wait(new["id"], terminal, timeout=90)
    assert done["state"] == "COMPLETE", done
    assert f"resumed from checkpoint {ckpt} at epoch {last}" in dk.ok("logs", new["id"]).stdout
    mine = sorted(p.name for p in (dk.results / new["id"]).glob("train/model_epoch_*.pth"))
    assert mine == [name(e) for e in range(last + 1, 8)]  # it went on, it did not start over
    assert done["progress"]["epoch"] == 7 and "epoch 8/8" in done["progress"]["line"]
    assert sorted(p.name for p in folder.glob("train/model_epoch_*.pth"))[-1] == name(last)  # read-only
    chain = json.loads(dk.run("tao_jobs.py", "status", new["id"], "--json").stdout)[0]
    assert chain["continues"] == old


def test_a_parent_child_reads_the_parents_checkpoint_and_cannot_write_its_folder(dk):
    parent = train(dk, epochs=2, sleep=0)["id"]
    assert dk.wait(parent, terminal)["state"] == "COMPLETE"
    child = dk.submit("--action", "evaluate", "--parent", parent, "--", "sh", "-c",
                      'cat "$1"; touch "$2/child-was-here" 2>/dev/null && echo WROTE || echo READ-ONLY', "tao",
                      "{parent.checkpoint}", "{parent.results_dir}")
    assert child["parent"] == parent
    assert dk.wait(child["id"], terminal)["state"] == "COMPLETE"
    out = dk.ok("logs", child["id"]).stdout
    assert "fake checkpoint of epoch 1 step 20" in out and "READ-ONLY" in out and "WROTE" not in out, out
    assert not (dk.results / parent / "child-was-here").exists()


def _times(dk: Docker, ids: list[str]) -> list[tuple[datetime, datetime]]:
    """The containers' own start and end, as the engine reported them; kept on the records, since a finished
    job's container is removed with it."""
    out = []
    for jid in ids:
        backend = json.loads((dk.tmp / "state" / f"{jid}.json").read_text())["backend"]
        assert dk.docker("container", "inspect", jid).returncode != 0  # removed with its job
        out.append(tuple(datetime.fromisoformat(backend[k][:26].rstrip("Z")) for k in ("started_at", "finished_at")))
    return out


def test_a_sweep_runs_at_most_k_at_once_and_names_the_best_trial(dk):
    since = log_length(dk)
    done = json.loads(dk.ok("submit", "--json", "--image", dk.image, "--gpus", "0", "--network-arch", "dino",
                            "--action", "train", "--mount", FAKE, "--env", "EPOCHS=3", "--env", "SLEEP=1",
                            "--sweep", "fake.best_val=300,200,400", "--max-concurrent", "2",
                            "--", "sh", "-c", TRAIN, "tao").stdout)
    ids = [j["id"] for j in done["jobs"]]
    assert len(ids) == 3 and done["max_concurrent"] == 2
    words = [c[1] for c in engine_calls(dk, since)]
    assert words.count("create") == 3 and words.count("start") == 1, words
    assert dk.docker("inspect", "--format", "{{.State.Status}}", ids[2]).stdout.strip() == "created"  # held

    end = time.time() + 120
    while True:  # the sweep's status releases the held trial once a slot is free
        rows = json.loads(dk.ok("status", "--sweep", done["sweep"], "--json").stdout)
        if all(r["state"] == "COMPLETE" for r in rows):
            break
        assert not any(r["state"] in ("ERROR", "CANCELED") for r in rows), rows
        assert time.time() < end, rows
        time.sleep(0.5)
    spans = _times(dk, ids)
    for start, _ in spans:  # at every start, at most 2 containers were running (the containers' own times)
        assert sum(1 for a, b in spans if a <= start < b) <= 2, spans
    assert spans[2][0] >= min(spans[0][1], spans[1][1])  # the third started after one of the first two ended
    assert rows[1]["kpis"]["val_loss"] == pytest.approx(0.2 + 0.02)  # 3 epochs: the last is one past the best

    best = json.loads(dk.run("tao_jobs.py", "sweep", "best", done["sweep"], "--kpi", "val_loss", "--json").stdout)
    assert best["id"] == ids[1] and best["value"] == pytest.approx(0.2) and best["checkpoints"] == ["train/" + name(1)]
    assert best["folder"] == str(dk.results / ids[1])


def test_cancel_sweep_stops_the_running_trials_and_removes_the_held_one_in_one_call_each(dk):
    done = json.loads(dk.ok("submit", "--json", "--image", dk.image, "--gpus", "0", "--network-arch", "dino",
                            "--action", "train", "--mount", FAKE, "--env", "EPOCHS=60", "--env", "SLEEP=1",
                            "--stop-grace", "2", "--sweep", "train.optim.lr=0.1,0.2,0.3", "--max-concurrent", "2",
                            "--", "sh", "-c", TRAIN, "tao").stdout)
    ids = [j["id"] for j in done["jobs"]]
    rows = json.loads(dk.ok("status", "--sweep", done["sweep"], "--json").stdout)
    assert [r["state"] for r in rows][2] == "PENDING" and rows[2]["held"], rows
    since = log_length(dk)
    views = json.loads(dk.ok("cancel", "--sweep", done["sweep"], "--json").stdout)
    assert [v["state"] for v in views] == ["CANCELED"] * 3, views
    words = [c[1] for c in engine_calls(dk, since)]
    assert words.count("stop") == 1 and words.count("rm") == 1, words
    assert dk.docker("inspect", ids[2]).returncode != 0  # the held trial never ran: its container is gone
    for jid in ids[:2]:
        assert dk.docker("inspect", "--format", "{{.State.Running}}", jid).stdout.strip() == "false"
    assert "before it started" in views[2]["message"]
    rows = json.loads(dk.ok("status", "--sweep", done["sweep"], "--json").stdout)
    assert {r["state"] for r in rows} == {"CANCELED"}


def test_a_sweep_runs_by_itself_with_nobody_calling_the_bank(dk):
    """After submit, only the sweep's detached supervisor acts: the held trials start one at a time as the
    engine frees the slot, every record ends COMPLETE, and the supervisor stops when the last trial ends."""
    done = json.loads(dk.ok("submit", "--json", "--image", dk.image, "--gpus", "0", "--network-arch", "dino",
                            "--action", "train", "--mount", FAKE, "--env", "EPOCHS=2", "--env", "SLEEP=1",
                            "--sweep", "fake.best_val=300,200,400", "--max-concurrent", "1",
                            "--", "sh", "-c", TRAIN, "tao").stdout)
    ids = [j["id"] for j in done["jobs"]]
    log = dk.tmp / "state" / f"{ids[0]}.d" / "sweep-supervisor.log"

    def stored(jid: str) -> str:  # the record file itself: reading it calls nothing
        return json.loads((dk.tmp / "state" / f"{jid}.json").read_text())["state"]

    end = time.time() + 150
    while not all(stored(j) == "COMPLETE" for j in ids):
        assert not any(stored(j) in ("ERROR", "CANCELED", "UNKNOWN") for j in ids), [stored(j) for j in ids]
        assert time.time() < end, ([stored(j) for j in ids], log.read_text() if log.exists() else "no log")
        time.sleep(1)
    for jid in ids:  # each trial trained to its end in its own folder
        assert (dk.results / jid / "train" / name(1)).is_file()
    spans = _times(dk, ids)
    assert spans[1][0] >= spans[0][1] and spans[2][0] >= spans[1][1], spans  # one at a time, in trial order
    started = [c[2:] for c in engine_calls(dk, 0) if c[1] == "start"]
    assert started == [[ids[0]], [ids[1]], [ids[2]]], started  # the supervisor's releases, one each
    end = time.time() + 30
    while "every trial has ended" not in log.read_text():
        assert time.time() < end, log.read_text()
        time.sleep(0.5)
    best = json.loads(dk.run("tao_jobs.py", "sweep", "best", done["sweep"], "--kpi", "val_loss", "--json").stdout)
    assert best["id"] == ids[1] and best["value"] == pytest.approx(0.2)  # the trial with best_val=200
    # the sweep table ranks by the same rule: each trial's best val_loss and its epoch
    rows = json.loads(dk.ok("status", "--sweep", done["sweep"], "--kpi", "val_loss", "--json").stdout)
    assert [r["best"]["value"] for r in rows] == pytest.approx([0.3, 0.2, 0.4])
    table = dk.ok("status", "--sweep", done["sweep"], "--kpi", "val_loss").stdout
    assert "BEST val_loss (min, from the KPI's name)" in table and "val_loss 0.2 @ep" in table, table


def test_a_canceled_trial_stops_alone_and_the_supervisor_runs_the_others_to_their_end(dk):
    """Cancel one running trial of a sweep (K=2 of 3): it stops, its slot goes to the held trial, and the others
    finish with nobody calling the bank again (only the sweep's supervisor acts)."""
    done = json.loads(dk.ok("submit", "--json", "--image", dk.image, "--gpus", "0", "--network-arch", "dino",
                            "--action", "train", "--mount", FAKE, "--env", "EPOCHS=4", "--env", "SLEEP=1",
                            "--stop-grace", "2", "--sweep", "fake.best_val=300,200,400", "--max-concurrent", "2",
                            "--", "sh", "-c", TRAIN, "tao").stdout)
    ids = [j["id"] for j in done["jobs"]]
    end = time.time() + 60
    while not (dk.results / ids[0] / "train" / name(0)).exists():
        assert time.time() < end, "the first trial never wrote a checkpoint"
        time.sleep(0.3)
    (view,) = json.loads(dk.ok("cancel", ids[0], "--json").stdout)
    assert view["state"] == "CANCELED", view
    # untouched: still running, or (a loaded machine's slow cancel) already ended by itself with 0
    running, code = dk.docker("inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", ids[1]).stdout.split()
    assert running == "true" or code == "0", (running, code)

    def stored(jid: str) -> str:  # the record file itself: reading it calls nothing
        return json.loads((dk.tmp / "state" / f"{jid}.json").read_text())["state"]

    end = time.time() + 150
    while not (stored(ids[1]) == stored(ids[2]) == "COMPLETE"):
        assert not any(stored(j) in ("ERROR", "UNKNOWN") for j in ids), [stored(j) for j in ids]
        assert time.time() < end, [stored(j) for j in ids]
        time.sleep(1)
    assert stored(ids[0]) == "CANCELED"
    assert not (dk.results / ids[0] / "train" / name(3)).exists()  # it stopped before its end
    for jid in ids[1:]:
        assert (dk.results / jid / "train" / name(3)).is_file()


def test_prune_keep_last_of_a_canceled_training_keeps_its_resume_point_and_removes_its_container(dk):
    """Issue 37: a canceled job's exited container stays until prune removes it; --keep last keeps the checkpoint
    continue would resume from (the latest link's target) and deletes the others."""
    jid = train(dk, epochs=8)["id"]
    folder = dk.results / jid / "train"
    end = time.time() + 60
    while not (folder / name(2)).exists():
        assert time.time() < end, "the trainer never wrote its third checkpoint"
        time.sleep(0.3)
    dk.ok("cancel", jid)
    assert dk.docker("ps", "-aq", "--filter", f"name=^{jid}$").stdout.split()  # the exited container stays
    ckpts = sorted(p.name for p in folder.glob("model_epoch_*.pth"))
    link = folder / "dino_model_latest.pth"
    last = link.resolve().name
    assert len(ckpts) >= 3 and last == ckpts[-1]
    (done,) = json.loads(dk.run("tao_jobs.py", "prune", jid, "--keep", "last", "--yes", "--json").stdout)
    assert [k["path"] for k in done["kept"]] == [f"train/{last}"] and "removed its container" in done["message"]
    assert sorted(p.name for p in folder.glob("model_epoch_*.pth")) == [last] and link.is_symlink()
    assert dk.docker("ps", "-aq", "--filter", f"name=^{jid}$").stdout.split() == []
    assert dk.run("tao_jobs.py", "logs", jid).returncode == 0  # its logs were saved before


def under_pty(dk: Docker, *args: str, answer: str, timeout: float = 120) -> tuple[int, str]:
    """``tao_jobs.py ARGS`` with stdin, stdout and stderr a pseudo-terminal (as an agent's terminal tool runs it):
    ``answer`` is typed once the first question's line has appeared; (exit code, everything it printed)."""
    import os
    import pty
    import select
    import subprocess
    import sys

    from docker_support import SCRIPTS

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / "tao_jobs.py"), *args], stdin=slave, stdout=slave,
                            stderr=slave, env=dk.env, close_fds=True)
    os.close(slave)
    seen, typed = b"", False
    end = time.time() + timeout
    try:
        while time.time() < end:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if not typed and b"[y/N]" in seen and seen.rstrip(b" ").endswith(b"\n"):
                os.write(master, answer.encode())
                typed = True
            if proc.poll() is not None and not select.select([master], [], [], 0.2)[0]:
                break
        assert proc.poll() is not None or proc.wait(timeout=5) is not None, f"prune hung: {seen.decode()[-2000:]}"
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return proc.returncode, seen.decode().replace("\r\n", "\n")


def test_prune_of_three_jobs_under_a_pty_lists_then_asks_once(dk):
    """Issue 49: prune with three ids on a pseudo-terminal lists every file that would go, asks ONE question that
    ends its line, and deletes all three on one "y"; --dry-run lists the same and deletes nothing."""
    ids = [train(dk, epochs=2, sleep=0)["id"] for _ in range(3)]
    for jid in ids:
        dk.wait(jid, terminal, timeout=90)
    dry = json.loads(dk.run("tao_jobs.py", "prune", *ids, "--dry-run", "--json").stdout)
    assert [p["id"] for p in dry] == ids
    for p, jid in zip(dry, ids):
        on_disk = {f.relative_to(dk.results / jid).as_posix(): f.stat().st_size
                   for f in (dk.results / jid).rglob("*") if f.is_file() and not f.is_symlink()}
        assert {f["path"]: f["size"] for f in p["files"]} == on_disk and p["bytes"] == sum(on_disk.values())
    rc, seen = under_pty(dk, "prune", *ids, answer="y\n")
    assert rc == 0, seen
    assert seen.count("[y/N]") == 1 and f"in all: {sum(len(p['files']) for p in dry)} file(s)" in seen, seen
    for jid in ids:
        assert f"{jid}: deleted {dk.results / jid}" in seen and not (dk.results / jid).exists()
        assert dk.docker("ps", "-aq", "--filter", f"name=^{jid}$").stdout.split() == []


def test_prune_keep_best_over_a_sweeps_trials_keeps_the_winners_best_only(dk):
    done = dk.submit("--network-arch", "dino", "--action", "train", "--mount", FAKE, "--env", "EPOCHS=3",
                     "--env", "SLEEP=0", "--sweep", "fake.best_val=300,200,400", "--max-concurrent", "3",
                     "--", "sh", "-c", TRAIN, "tao")
    ids = [j["id"] for j in done["jobs"]]
    for jid in ids:
        dk.wait(jid, terminal, timeout=120)
    best = json.loads(dk.run("tao_jobs.py", "sweep", "best", done["sweep"], "--kpi", "val_loss", "--json").stdout)
    rc, seen = under_pty(dk, "prune", *ids, "--keep", "best", "--kpi", "val_loss", answer="y\n")
    assert rc == 0 and seen.count("[y/N]") == 1, seen
    for jid in ids:
        left = sorted(p.name for p in (dk.results / jid).rglob("*.pth"))
        want = [Path(c).name for c in best["checkpoints"][:1]] if jid == best["id"] else []
        assert left == want, (jid, left, seen)


def test_dry_run_check_runs_the_submits_checks_on_the_engine(dk):
    """Issue 49: --dry-run --check asks the real engine what submit asks (a mount path that is not there is refused
    as submit refuses it; the image is looked up, never pulled); --dry-run alone says it checked nothing."""
    args = ("submit", "--image", dk.image, "--gpus", "0", "--dry-run", "--", "true")
    plain = dk.tao(*args)
    assert plain.returncode == 0 and plain.stderr.startswith("dry run: nothing was contacted"), plain.stderr
    since = log_length(dk)
    missing = dk.tao("submit", "--image", dk.image, "--gpus", "0", "--mount", f"{dk.tmp}/absent:/data", "--dry-run",
                     "--check", "--", "true")
    assert missing.returncode == 1 and "bind-mount path" in missing.stderr, missing.stderr
    good = dk.tao("submit", "--image", dk.image, "--gpus", "0", "--dry-run", "--check", "--", "true")
    assert good.returncode == 0, good.stderr
    assert good.stderr.startswith(f"dry run: the submit's read-only checks passed (docker engine ") and \
        f"image {dk.image} present" in good.stderr and "nothing was skipped" in good.stderr, good.stderr
    words = [c[1] for c in engine_calls(dk, since)]
    assert not {"create", "run", "start", "pull", "login"} & set(words) and dk.records() == [], words
