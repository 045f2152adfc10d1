"""A Kubernetes job's verdict outlives its Job: the wrapper's exit marker, read back once TTL deleted the Job."""
from __future__ import annotations

import concurrent.futures
import json
import re
import subprocess

import pytest

from fakeproc import echo_applied, items, k8s_record, ok
from taobank import records
from taobank.platforms.kubernetes import verdicts
from taobank.platforms.kubernetes.logs import SPEC_FILE
from taobank.platforms.kubernetes.render import find, render_manifests
from taobank.states import State

WS = {"pvc": "ws", "mount_path": "/results"}


def run_wrapper(tmp_path, script: str, host: str = "p-0") -> int:
    """The rendered main container's command, run by a real sh as the kubelet passes it."""
    spec = {"image": "i", "args": ["sh", "-c", script], "mounts": [WS]}
    job = find(render_manifests(spec, job_id="job-1", namespace="default"), "Job")
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    argv = [a.replace("$$", "$") for a in command[:4]] + command[4:]
    env = {"PATH": "/usr/bin:/bin", "TAO_API_RESULTS_DIR": str(tmp_path), "TAO_API_JOB_ID": "job-1", "HOSTNAME": host}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30).returncode


def read_back(folders: list[str]) -> str:
    """What the helper Job prints: READ_SH run by a real sh over real folders."""
    return subprocess.run(["/bin/sh", "-c", verdicts.READ_SH, "tao-verdict", "50", *folders], capture_output=True,
                          text=True, timeout=30, check=True).stdout


def test_the_wrapper_leaves_the_exit_code_and_end_time_beside_the_log_copy_and_status_reads_them(tmp_path):
    assert run_wrapper(tmp_path, 'echo "line $((6*7))"; exit 3') == 3  # the code is still the command's
    logs = tmp_path / "job-1" / "logs"
    code, ended = (logs / "p-0.exit").read_text().split()
    assert code == "3" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", ended)
    assert not list(logs.glob("*.tmp"))  # written whole by a rename
    kept = verdicts.parse(read_back([str(logs), str(tmp_path / "absent")]))
    assert kept[str(logs)].markers == [verdicts.Marker("p-0", 3, ended)]
    assert kept[str(logs)].log_text() == "line 42\n"
    assert kept[str(tmp_path / "absent")].markers == []
    obs = verdicts.verdict(kept[str(logs)], 1)
    assert (obs.state, obs.err_class, obs.exit_code) == (State.ERROR, "ERR_PROGRAM", 3)
    assert f"exited with code 3 at {ended}" in obs.message and "last log lines: line 42" in obs.message


def test_wrappers_sharing_a_host_name_and_dev_shm_each_leave_their_marker(tmp_path):
    """Two containers with one host name over one /dev/shm (a restart, parallel tests) keep their own fifo."""
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda i: run_wrapper(tmp_path / str(i), f"echo {i}; exit {i}"), range(8)))
    assert codes == list(range(8))
    for i in range(8):
        logs = tmp_path / str(i) / "job-1" / "logs"
        assert (logs / "p-0.exit").read_text().split()[0] == str(i) and (logs / "p-0.log").read_text() == f"{i}\n"


def test_one_pod_the_last_marker_decides_a_disrupted_pod_was_replaced():
    kept = verdicts.Kept("/r/j/logs", [verdicts.Marker("j-abcde", 143, "2026-01-01T00:00:05Z"),
                                       verdicts.Marker("j-fghij", 0, "2026-01-01T00:01:00Z")], {})
    obs = verdicts.verdict(kept, 1)
    assert (obs.state, obs.exit_code) == (State.COMPLETE, 0) and "2026-01-01T00:01:00Z" in obs.message


def test_several_ranks_any_failure_fails_all_zero_completes_missing_ranks_stay_unknown():
    m = verdicts.Marker
    assert verdicts.verdict(verdicts.Kept("/f", [m("j-0", 0, "t1"), m("j-1", 2, "t2")], {}), 2).exit_code == 2
    assert verdicts.verdict(verdicts.Kept("/f", [m("j-0", 0, "t1"), m("j-1", 0, "t2")], {}), 2).state == State.COMPLETE
    partial = verdicts.verdict(verdicts.Kept("/f", [m("j-0", 0, "t1")], {}), 2)
    assert partial.state == State.UNKNOWN and "1 of 2 ranks left an exit marker" in partial.message


def test_an_infrastructure_failure_in_the_log_copy_is_err_infra():
    kept = verdicts.Kept("/f", [verdicts.Marker("p", 1, "t")],
                         {"p.log": "RuntimeError: NCCL error in: x, unhandled system error\n"})
    obs = verdicts.verdict(kept, 1)
    assert obs.state == State.ERROR and obs.err_class == "ERR_INFRA", obs


@pytest.mark.parametrize("name,content", [("p.exit", ""), ("p.exit", "x 2026"), ("p.exit", "3 a b"), ("p.log", "3")])
def test_a_garbled_marker_is_no_marker(name, content):
    assert verdicts.parse_marker(name, content) is None


def test_nothing_survived_is_unknown_and_says_why():
    obs = verdicts.verdict(verdicts.Kept("/r/j/logs", [], {"p.log": "hi\n"}), 1)
    assert obs.state == State.UNKNOWN and "left no exit marker in /r/j/logs" in obs.message
    assert "its log copy is kept" in obs.message


# ------------------------------------------------------------------ status, with the fake kubectl
def gone_job(*, spec: dict | None = None) -> dict:
    """A RUNNING record whose Job the cluster no longer has, with its spec saved beside it."""
    rec = k8s_record()
    (records.artifact_dir(rec["id"]) / SPEC_FILE).write_text(json.dumps(
        spec if spec is not None else {"image": "i", "command": "c", "mounts": [WS]}))
    return rec


def helper_answers(fake, output) -> None:
    """The helper Job: created, its pod Succeeded with exit 0, its log ``output`` (a str or a function of the call)."""
    fake.kubectl("create", answer=echo_applied())
    done = {"metadata": {"name": "tao-vol-x-abcde"}, "status": {"phase": "Succeeded", "containerStatuses": [
        {"name": "check", "state": {"terminated": {"exitCode": 0}}}]}}
    fake.kubectl("get", "pods", "-l", answer=items([done]), where=lambda c: any("job-name=" in w for w in c.words))
    fake.kubectl("logs", answer=output)


def marker_output(folders: dict[str, str]) -> str:
    """READ_SH's output for ``{logs folder: "<code> <time>"}`` with one log line each."""
    return "".join(f"#folder {f}\n#exit p-0.exit {m}\n#log p-0.log\n|line of {f}\n" for f, m in folders.items())


def test_status_of_a_job_gone_by_ttl_reads_its_exit_marker_and_keeps_its_logs(fake, cli):
    rec = gone_job()
    folder = f"/results/{rec['id']}/logs"
    fake.kubectl("get", "jobs,pods", answer=items([]))
    helper_answers(fake, marker_output({folder: "3 2026-12-06T01:02:03Z"}))
    out = cli("tao_k8s.py", "status", rec["id"], "--json")
    assert out.rc == 0, out
    (view,) = json.loads(out.out)
    assert (view["state"], view["err_class"], view["exit_code"]) == ("ERROR", "ERR_PROGRAM", 3), view
    assert "exited with code 3 at 2026-12-06T01:02:03Z" in view["message"]
    assert records.load(rec["id"])["state"] == "ERROR"
    (create,) = fake.kubectl_calls("create")
    helper = json.loads(create.stdin)["items"][0]
    argv = helper["spec"]["template"]["spec"]["containers"][0]["command"]
    assert argv[:3] == ["/bin/sh", "-c", verdicts.READ_SH] and argv[-1] == folder  # the folder is an argument
    assert [m["readOnly"] for m in helper["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
            if m["mountPath"] == "/results"] == [True]
    assert view["saved_logs"] and (records.artifact_dir(rec["id"]) / "logs.txt").read_text() == f"line of {folder}\n"
    # logs now come from the saved copy: no second helper Job
    fake.kubectl("get", "pods", answer=items([]), where=lambda c: any("tao-job-id=" in w for w in c.words))
    shown = cli("tao_k8s.py", "logs", rec["id"])
    assert f"line of {folder}" in shown.out and len(fake.kubectl_calls("create")) == 1


def test_the_gone_jobs_of_one_status_share_one_helper_job(fake, cli):
    recs = [gone_job() for _ in range(3)]
    fake.kubectl("get", "jobs,pods", answer=items([]))
    times = {f"/results/{r['id']}/logs": f"{i} 2026-12-06T01:02:0{i}Z" for i, r in enumerate(recs)}
    helper_answers(fake, marker_output(times))
    out = cli("tao_k8s.py", "status", *[r["id"] for r in recs], "--json")
    assert out.rc == 0, out
    assert [(v["state"], v["exit_code"]) for v in json.loads(out.out)] == [("COMPLETE", 0), ("ERROR", 1),
                                                                           ("ERROR", 2)]
    (create,) = fake.kubectl_calls("create")
    assert json.loads(create.stdin)["items"][0]["spec"]["template"]["spec"]["containers"][0]["command"][-3:] \
        == list(times)


def test_a_gone_job_that_kept_no_results_is_unknown_saying_why_without_a_helper(fake, cli):
    rec = gone_job(spec={"image": "i", "command": "c", "no_results": True})
    fake.kubectl("get", "jobs,pods", answer=items([]))
    (view,) = json.loads(cli("tao_k8s.py", "status", rec["id"], "--json").out)
    assert view["state"] == "UNKNOWN" and "--no-results" in view["message"], view
    assert fake.kubectl_calls("create") == []


def test_a_helper_that_cannot_run_leaves_it_unknown_saying_why(fake, cli):
    rec = gone_job()
    fake.kubectl("get", "jobs,pods", answer=items([]))
    fake.kubectl("create", rc=1, stderr='jobs.batch is forbidden: User "u" cannot create resource "jobs"')
    (view,) = json.loads(cli("tao_k8s.py", "status", rec["id"], "--json").out)
    assert view["state"] == "UNKNOWN" and "could not be read" in view["message"] and "forbidden" in view["message"]


def test_an_unknown_record_gets_its_verdict_once_the_marker_is_read(fake, cli):
    rec = gone_job()
    records.mark(rec["id"], State.UNKNOWN, message="the Job no longer exists")
    fake.kubectl("get", "jobs,pods", answer=items([]))
    helper_answers(fake, lambda c: ok(marker_output({f"/results/{rec['id']}/logs": "0 2026-12-06T01:02:03Z"})))
    (view,) = json.loads(cli("tao_k8s.py", "status", rec["id"], "--json").out)
    assert view["state"] == "COMPLETE" and records.load(rec["id"])["state"] == "COMPLETE"


def test_sweep_trials_whose_jobs_are_gone_get_their_verdicts_in_the_sweep_table(fake):
    from taobank.campaign import sweeps

    spec = {"image": "i", "command": "c", "mounts": [WS]}
    ids = []
    for i, lr in enumerate(("0.1", "0.2")):
        rec = records.open_record("kubernetes", "i", "dino", "train", "A", "/results/{id}",
                                  backend={"namespace": "default", "context": ""}, sweep=("dino-sweep-ab12", i,
                                                                                          {"train.optim.lr": lr}))
        records.mark(rec["id"], "RUNNING", backend_ref=f"default/{rec['id']}",
                     backend={"uid": f"uid-{rec['id']}", "name": rec["id"], "namespace": "default", "nodes": 1})
        (records.artifact_dir(rec["id"]) / SPEC_FILE).write_text(json.dumps(spec))
        ids.append(rec["id"])
    fake.kubectl("get", "jobs,pods", answer=items([]))
    helper_answers(fake, marker_output({f"/results/{ids[0]}/logs": "0 2026-12-06T01:00:00Z",
                                        f"/results/{ids[1]}/logs": "3 2026-12-06T01:00:01Z"}))
    rows = sweeps.status("dino-sweep-ab12")
    assert [(r.id, r.state) for r in rows] == [(ids[0], "COMPLETE"), (ids[1], "ERROR")]
    assert len(fake.kubectl_calls("create")) == 1  # one helper Job for the whole sweep


def test_a_folder_read_without_a_marker_is_not_read_again_by_later_statuses(fake, cli):
    rec = gone_job()
    fake.kubectl("get", "jobs,pods", answer=items([]))
    helper_answers(fake, f"#folder /results/{rec['id']}/logs\n#log p.log\n|half a line\n")
    (first,) = json.loads(cli("tao_k8s.py", "status", rec["id"], "--json").out)
    assert first["state"] == "UNKNOWN" and "left no exit marker" in first["message"] and "log copy is kept" in \
        first["message"], first
    looked = records.load(rec["id"])["backend"][verdicts.LOOKED]
    (again,) = json.loads(cli("tao_k8s.py", "status", rec["id"], "--json").out)
    assert again["state"] == "UNKNOWN" and f"read at {looked}" in again["message"], again
    assert len(fake.kubectl_calls("create")) == 1  # the second status started no helper Job
