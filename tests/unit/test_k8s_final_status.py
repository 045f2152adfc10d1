"""A Kubernetes job's final epoch and KPIs once no pod is left to exec in: its wrapper prints the last lines of
TAO's status files as it ends (run here by a real sh), the log saved at the end carries them, status reads them
from there with no call, and logs leaves them out."""
from __future__ import annotations

import os
import subprocess

import pytest

from taobank.core import jobfiles
from taobank import records
from taobank.platforms.kubernetes import logs, render, sweep as sweepmod

EPOCH = ('{"date": "3/7/2025", "time": "9:5:3", "status": "RUNNING", "verbosity": "INFO", "message": "Training loop '
         'in progress", "epoch": 4, "max_epoch": 4, "step": 50, "max_step": 50, "kpi": {"val_loss": 0.25}}')


def test_the_wrapper_prints_the_status_files_last_lines_as_the_pod_ends(tmp_path):
    folder = tmp_path / "results" / "job-1"
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "status.json").write_text("".join(f'{{"n": {i}}}\n' for i in range(30)) + EPOCH)  # no \n
    env = {**os.environ, "TAO_API_RESULTS_DIR": str(tmp_path / "results"), "TAO_API_JOB_ID": "job-1",
           "HOSTNAME": "pod-0"}
    out = subprocess.run(["sh", "-c", render.LOG_WRAPPER, "tao-main", "sh", "-c", "echo trained; exit 3"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 3  # the command's code, whatever the wrapper prints after it
    final = [ln for ln in out.stdout.splitlines() if ln.startswith(render.FINAL_STATUS_PREFIX)]
    assert len(final) == render.FINAL_STATUS_LINES and final[-1] == f"{render.FINAL_STATUS_PREFIX}train/status.json {EPOCH}"
    assert (folder / "logs" / "pod-0.log").read_text() == "trained\n"  # the volume copy is the job's own output


def test_status_reads_an_ended_jobs_final_lines_from_its_saved_log_and_logs_leaves_them_out(state_dir, fake):
    rec = records.Record.of(records.open_record("kubernetes", "img", "dino", "train", "A", "/results/{id}",
                                                backend={"namespace": "ns", "context": ""}))
    multi = "".join(f"[rank {r} pod-{r}] {line}\n" for r in (0, 1) for line in
                    ("trained", f"{render.FINAL_STATUS_PREFIX}train/status.json {EPOCH}"))
    jobfiles.save_logs(rec.id, "logs.txt", multi)
    rec = records.Record.of(records.mark(rec.id, "COMPLETE", message="done"))
    got = sweepmod.read_status_many([rec])  # no pod to exec in, no call
    assert got == {rec.id: {"train/status.json": EPOCH + "\n"}} and fake.calls == []
    assert logs._without_final(multi) == "[rank 0 pod-0] trained\n[rank 1 pod-1] trained\n"


def _step(n: int) -> str:
    return ('{"date": "3/7/2025", "time": "9:6:%d", "status": "RUNNING", "verbosity": "INFO", "message": "Training '
            'loop in progress", "step": %d, "max_step": 100, "kpi": {"loss": 0.%03d}}' % (n % 60, n, 999 - n))


def _shells() -> list[list[str]]:
    import shutil

    return [["sh"]] + ([["busybox", "sh"]] if shutil.which("busybox") else [])


@pytest.mark.parametrize("shell", _shells(), ids=lambda s: " ".join(s))
def test_per_step_lines_after_the_last_epoch_line_leave_it_printed_first_and_status_shows_that_epoch(
        shell, tmp_path, state_dir):
    """TAO writing a line per step pushes the last epoch line out of the last 12: the wrapper prints it first
    (the file's order kept), and the status read from the saved log shows that epoch and the latest step."""
    folder = tmp_path / "results" / "job-1"
    (folder / "train").mkdir(parents=True)
    epochs = [EPOCH.replace('"epoch": 4', f'"epoch": {e}').replace('"step": 50', f'"step": {10 * e}') for e in range(4)]
    steps = [_step(n) for n in range(31, 71)]  # 40 per-step lines, no "epoch" key, after the last epoch line
    (folder / "train" / "status.json").write_text("\n".join(epochs + steps) + "\n")
    (folder / "status.json").write_text(EPOCH + "\n" + "\n".join(_step(n) for n in range(3)))  # no \n at the end
    env = {**os.environ, "TAO_API_RESULTS_DIR": str(tmp_path / "results"), "TAO_API_JOB_ID": "job-1",
           "HOSTNAME": "pod-0"}
    out = subprocess.run([*shell, "-c", render.LOG_WRAPPER, "tao-main", "sh", "-c", "echo trained"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    final = [ln for ln in out.stdout.splitlines() if ln.startswith(render.FINAL_STATUS_PREFIX)]
    top = [ln.split(" ", 2)[2] for ln in final if ln.split(" ", 2)[1] == "status.json"]
    assert top == [EPOCH] + [_step(n) for n in range(3)]  # its epoch line is among its last 12: not twice
    train = [ln.split(" ", 2)[2] for ln in final if ln.split(" ", 2)[1] == "train/status.json"]
    assert train == [epochs[-1]] + steps[-render.FINAL_STATUS_LINES:]

    rec = records.Record.of(records.open_record("kubernetes", "img", "dino", "train", "A", "/results/{id}",
                                                backend={"namespace": "ns", "context": ""}))
    jobfiles.save_logs(rec.id, "logs.txt", out.stdout)
    from taobank.core import training

    got = training.progress_of(logs.final_status(rec.id), "train")
    assert (got["epoch"], got["max_epoch"], got["step"]) == (3, 4, 70), got
    assert got["kpis"] == {"val_loss": 0.25, "loss": 0.929} and got["line"].startswith("epoch 4/5")


def test_a_status_file_without_any_epoch_line_prints_only_its_last_lines(tmp_path):
    folder = tmp_path / "results" / "job-1"
    folder.mkdir(parents=True)
    (folder / "status.json").write_text("".join(_step(n) + "\n" for n in range(30)))
    env = {**os.environ, "TAO_API_RESULTS_DIR": str(tmp_path / "results"), "TAO_API_JOB_ID": "job-1"}
    out = subprocess.run(["sh", "-c", render.FINAL_STATUS_SH], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.splitlines() == [f"{render.FINAL_STATUS_PREFIX}status.json {_step(n)}" for n in range(18, 30)]


def test_logs_tail_of_a_finished_pod_shows_the_jobs_last_lines_not_nothing(state_dir, fake, cli):
    """Issue 49: a finished pod's last lines are the bank's final status lines; ``logs --tail 2`` asked kubectl for
    2 lines and left both out. Now it asks for room for them and shows the job's own last 2 (live and saved)."""
    from fakeproc import items, job, k8s_record, pod

    rec = k8s_record(state="COMPLETE")
    written = "".join(f"epoch {i} done\n" for i in range(5))
    final = "".join(f"{render.FINAL_STATUS_PREFIX}train/status.json {EPOCH}\n" for _ in range(3))
    fake.kubectl("get", "pods", answer=items([pod(rec["id"], f"uid-{rec['id']}", "Succeeded")]))
    fake.kubectl("logs", answer=lambda c: "".join((written + final).splitlines(keepends=True)[-int(
        next(a for a in c.argv if a.startswith("--tail=")).split("=")[1]):]))
    out = cli("tao_jobs.py", "logs", rec["id"], "--tail", "2")
    assert out.rc == 0 and out.out == "epoch 3 done\nepoch 4 done\n", out
    asked = [a for c in fake.calls for a in c.argv if a.startswith("--tail=")]
    assert asked == [f"--tail={2 + logs.FINAL_LINES_MAX}"]
    out = cli("tao_jobs.py", "logs", rec["id"], "--tail", "2", "--follow")  # nothing more will come: no stream
    assert out.rc == 0 and out.out == "epoch 3 done\nepoch 4 done\n", out
    fake.kubectl("get", "pods", answer=items([]))  # the pods are gone: the log saved at the end
    jobfiles.save_logs(rec["id"], "logs.txt", written + final)
    out = cli("tao_jobs.py", "logs", rec["id"], "--tail", "2")
    assert out.rc == 0 and out.out.endswith("epoch 3 done\nepoch 4 done\n") and "@@tao-final" not in out.out, out


def test_a_tier_c_pod_prints_its_final_lines_too(tmp_path):
    """The staged-results wrapper (tier C) ends as LOG_WRAPPER does: the final epoch survives the pod."""
    stage = tmp_path / "stage"
    (stage / "job-1" / "train").mkdir(parents=True)
    (stage / "job-1" / "train" / "status.json").write_text(EPOCH + "\n")
    env = {**os.environ, "TAO_STAGING_DIR": str(stage), "TAO_API_RESULTS_DIR": str(stage), "TAO_API_JOB_ID": "job-1"}
    out = subprocess.run(["sh", "-c", render.MAIN_WRAPPER, "tao-main", "sh", "-c", "echo run; exit 3"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 3 and (stage / ".tao-exit").read_text().strip() == "3"
    assert out.stdout == f"run\n{render.FINAL_STATUS_PREFIX}train/status.json {EPOCH}\n"
    assert logs.final_lines(out.stdout) == {"train/status.json": EPOCH + "\n"}


def test_pods_deleted_between_the_listing_and_their_logs_leave_no_false_saved_log(state_dir, fake, cli):
    """A short TTL can delete a finished Job's pods between ``get pods`` and ``logs``: kubectl's NotFound is not
    the job's output, so nothing is saved as its logs (status would show it as "the logs saved when it ended"),
    and ``logs`` goes on to what is left (here: nothing, said in one line)."""
    from fakeproc import items, k8s_record, pod

    from taobank.platforms.kubernetes.kubectl import Kubectl

    rec = k8s_record(state="COMPLETE")
    pods = [pod(rec["id"], f"uid-{rec['id']}", "Succeeded")]
    fake.kubectl("get", "pods", answer=items(pods))
    fake.kubectl("logs", rc=1, stderr=f'Error from server (NotFound): pods "{pods[0]["metadata"]["name"]}" not found')
    record = records.Record.of(records.get(rec["id"]))
    assert logs.final_logs(Kubectl.for_record(record), pods) is None
    assert logs.save_final_logs(Kubectl.for_record(record), record, pods) is None
    assert jobfiles.saved_logs(rec["id"], "logs.txt") is None
    out = cli("tao_jobs.py", "logs", rec["id"])
    assert out.rc == 1 and "no saved logs" in out.err and "NotFound" not in out.out, out
