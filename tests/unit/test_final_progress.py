"""Issue 37: a finished job keeps its last ``[epoch ...]`` and KPIs, on every platform from one rule
(``jobstatus.keep_progress``): the status line after the end, and the sweep table's PROGRESS and KPIS of finished
trials (a Kubernetes trial's folder read through a running sibling's pod); ``status --sweep --watch`` lines go to
stdout."""
from __future__ import annotations

import json

from fakeproc import items, job, k8s_record, pod
from test_sweep_call_counts import K8S_SPEC, Cluster, kubectl_calls
from taobank.campaign import jobstatus, sweeps
from taobank import records
from taobank.contract import SubmitOptions


def status_text(epoch: int, loss: float, max_epoch: int = 9) -> str:
    line = json.dumps({"date": "3/7/2025", "time": "9:0:1", "status": "RUNNING", "epoch": epoch,
                       "max_epoch": max_epoch, "kpi": {"val_loss": loss}})
    return f"#status-file {len(line) + 1} status.json\n|{line}\n"


def test_kubernetes_sweep_table_keeps_the_kpis_of_finished_trials(fake):
    cluster = Cluster(fake)
    done = sweeps.submit("kubernetes", K8S_SPEC, SubmitOptions(), [{"train.optim.lr": "0.1"}, {"train.optim.lr": "0.2"}], 2)
    a, b = (v.id for v in done.views)
    cluster.done.add(0)  # a (index 0) ended before any status saw it; b runs: its pod reads both folders on the volume
    fake.kubectl("exec", answer=lambda c: "".join(
        f"#trial-folder /results/{jid}\n" + status_text(e, loss) for jid, e, loss in ((a, 9, 0.25), (b, 3, 0.5))))
    rows = {r.id: r for r in sweeps.status(done.sweep)}
    assert rows[a].state == "COMPLETE" and rows[a].progress == "10/10" and rows[a].kpis == {"val_loss": 0.25}
    assert rows[b].progress == "4/10" and rows[b].kpis == {"val_loss": 0.5}
    assert "val_loss=0.25" in sweeps.table(list(rows.values()))
    assert jobstatus.remembered(a) == ({**jobstatus.remembered(a)[0]}, True)  # final: never read again
    cluster.done.add(1)  # b (index 1) ends: no trial runs, no pod to ask; its last seen progress stays
    since = len(fake.calls)
    rows = {r.id: r for r in sweeps.status(done.sweep)}
    assert [c for c in kubectl_calls(fake, since) if c.startswith("exec")] == []
    assert (rows[a].progress, rows[a].kpis) == ("10/10", {"val_loss": 0.25})
    assert (rows[b].state, rows[b].progress, rows[b].kpis) == ("COMPLETE", "4/10", {"val_loss": 0.5})


def test_a_finished_kubernetes_job_keeps_its_epoch_on_the_status_line(fake, cli):
    rec = k8s_record()
    finished = {"now": False}
    fake.kubectl("get", "jobs,pods", answer=lambda c: items([
        job(rec["id"], f"uid-{rec['id']}", condition="Complete" if finished["now"] else None),
        pod(rec["id"], f"uid-{rec['id']}", "Succeeded" if finished["now"] else "Running")]))
    records.artifact_dir(rec["id"]).joinpath("spec.json").write_text(json.dumps(K8S_SPEC))
    fake.kubectl("exec", answer=status_text(6, 0.3))
    fake.kubectl("logs", answer="last words\n")
    out = cli("tao_k8s.py", "status", rec["id"])
    assert "RUNNING" in out.out and "[epoch 7/10" in out.out, out
    finished["now"] = True
    fake.kubectl("exec", rc=1, stderr="cannot exec into a container in a completed pod")
    out = cli("tao_k8s.py", "status", rec["id"])
    assert "COMPLETE" in out.out and "[epoch 7/10" in out.out, out
    # its end printed no status lines (a pod killed, say): what status saw, said so (issue 49)
    assert "(last seen running)]" in out.out, out
    again = cli("tao_jobs.py", "status", rec["id"], "--json")
    assert json.loads(again.out)[0]["progress"]["epoch"] == 6


def test_sweep_watch_lines_go_to_stdout(fake, cli):
    cluster = Cluster(fake)
    done = sweeps.submit("kubernetes", K8S_SPEC, SubmitOptions(), [{"train.optim.lr": "0.1"}], 1)
    cluster.done.add(0)
    out = cli("tao_jobs.py", "status", "--sweep", done.sweep, "--watch", "--interval", "0.5")
    assert out.rc == 0, out
    assert done.views[0].id in out.out.splitlines()[0] and "COMPLETE" in out.out.splitlines()[0]
    assert out.err == ""


def test_docker_sweep_table_reads_a_trial_that_ended_unseen_once_from_its_local_folder(docker_fake, fake):
    from pathlib import Path

    from test_docker_campaigns import SPEC, Engine

    engine = Engine(fake)
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{"train.optim.lr": "0.1"}], 1)
    (jid,) = (v.id for v in done.views)
    folder = Path(records.load(jid)["results_dir"])
    folder.mkdir(parents=True, exist_ok=True)
    folder.joinpath("status.json").write_text(status_text(2, 0.125, max_epoch=2).split("|", 1)[1])
    records.mark(jid, "COMPLETE", message="finished (marked by the sweep's supervisor)")  # ended unseen by a table
    engine.containers.pop(jid, None)
    rows = sweeps.status(done.sweep)
    assert (rows[0].state, rows[0].progress, rows[0].kpis) == ("COMPLETE", "3/3", {"val_loss": 0.125})
    folder.joinpath("status.json").unlink()  # final: the table never reads it again
    assert sweeps.status(done.sweep)[0].kpis == {"val_loss": 0.125}


def test_a_job_another_poller_saw_end_shows_its_final_epoch_not_the_one_last_seen_running(fake, cli):
    """Issue 49: a Kubernetes job seen at epoch 1/6, then marked COMPLETE by another poller (a sweep's supervisor,
    a watch in another shell, an MCP status), showed a stale `epoch 1/6` for good: the status line now reads its
    final lines once (from the log saved at its end: no call) and keeps them as final."""
    from taobank.core import jobfiles
    from taobank.platforms.kubernetes import render

    rec = k8s_record()
    records.artifact_dir(rec["id"]).joinpath("spec.json").write_text(json.dumps(K8S_SPEC))
    fake.kubectl("get", "jobs,pods", answer=items([job(rec["id"], f"uid-{rec['id']}", condition="Complete"),
                                                    pod(rec["id"], f"uid-{rec['id']}", "Succeeded")]))
    jobstatus._remember(rec["id"], {"epoch": 0, "max_epoch": 5, "line": "epoch 1/6"}, final=False)  # seen running
    last = status_text(5, 0.125, max_epoch=5).split("|", 1)[1]
    jobfiles.save_logs(rec["id"], "logs.txt", f"trained\n{render.FINAL_STATUS_PREFIX}status.json {last}")
    records.mark(rec["id"], "COMPLETE", message="Job complete")  # by another poller
    out = cli("tao_jobs.py", "status", rec["id"])
    assert "COMPLETE" in out.out and "[epoch 6/6 val_loss=0.125]" in out.out, out
    assert jobstatus.remembered(rec["id"])[1] is True
    since = len(fake.calls)
    assert "[epoch 6/6" in cli("tao_jobs.py", "status", rec["id"]).out
    assert not [c for c in kubectl_calls(fake, since) if c.startswith("exec")]
