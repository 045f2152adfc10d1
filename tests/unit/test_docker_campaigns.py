"""Docker's side of the campaign features, on the fake process runner: sweeps cost a fixed number of engine
calls for N = 1 and 10 trials (one create per container is the CLI's own limit), held trials are released with
one ``docker start``, cancel --sweep stops/removes them all in one call each; continue and --parent mount the
other job's folder read-only."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from fakeproc import ok
from taobank.campaign import lineage, sweeps
from taobank import records
from taobank.contract import SubmitOptions
from taobank.errors import TaoError
from taobank.platforms.docker.sweep import LABEL_SWEEP
from taobank.states import State

TRAINER = Path(__file__).resolve().parents[2] / "testclusters" / "fake_tao_train.sh"
K = 2


class Engine:
    """A fake docker engine: containers by name with a status; every call the bank makes is answered here."""

    def __init__(self, fake) -> None:
        self.fake = fake
        self.containers: dict[str, dict] = {}
        fake.on("docker", lambda c: c.argv[1] == "info", '{"ServerVersion": "20.10.24", "SecurityOptions": []}')
        fake.on("docker", lambda c: c.argv[1:3] == ["image", "inspect"], "sha256:1")
        fake.on("docker", lambda c: c.argv[1] == "create", self.create)
        fake.on("docker", lambda c: c.argv[1] == "run", self.run)
        fake.on("docker", lambda c: c.argv[1] == "start", self.start)
        fake.on("docker", lambda c: c.argv[1:3] == ["container", "inspect"], self.inspect)
        fake.on("docker", lambda c: c.argv[1] == "stop", self.stop)
        fake.on("docker", lambda c: c.argv[1] == "kill", "")
        fake.on("docker", lambda c: c.argv[1] == "rm", self.rm)
        fake.on("docker", lambda c: c.argv[1] == "logs", "last words\n")
        fake.on("sh", lambda c: True, self.local_sh)  # the local results folders: the real scripts

    def create(self, call):
        name = call.argv[call.argv.index("--name") + 1]
        self.containers[name] = {"Status": "created", "argv": call.argv}
        return ok(f"{name}-cid\n")

    def run(self, call):
        out = self.create(call)
        self.containers[call.argv[call.argv.index("--name") + 1]]["Status"] = "running"
        return out

    def start(self, call):
        for name in call.argv[2:]:
            self.containers[name]["Status"] = "running"
        return ok("\n".join(call.argv[2:]) + "\n")

    def stop(self, call):
        for name in call.argv[4:]:
            if self.containers[name]["Status"] == "running":
                self.containers[name].update(Status="exited", ExitCode=143)
        return ok("")

    def rm(self, call):
        for name in [a for a in call.argv[2:] if not a.startswith("-")]:
            self.containers.pop(name, None)
        return ok("")

    def inspect(self, call):
        rows = [{"Name": f"/{n}", "Id": f"{n}-cid", "State": {k: v for k, v in self.containers[n].items() if k != "argv"}
                 | {"Running": self.containers[n]["Status"] == "running"}} for n in call.argv[3:] if n in self.containers]
        return ok(json.dumps(rows))

    @staticmethod
    def local_sh(call):  # bytes, as taobank.run reads a real child: a byte that is not UTF-8 stays one
        p = subprocess.run(call.argv, input=None if call.stdin is None else call.stdin.encode(), capture_output=True,
                           timeout=60)
        return ok(p.stdout, p.returncode, p.stderr)

    def calls(self, since: int = 0) -> list[str]:
        """The engine calls after call ``since``, by their first word (inspect for container inspect)."""
        return [c.argv[2] if c.argv[1] == "container" else c.argv[1] for c in self.fake.calls[since:]
                if c.program == "docker"]

    def argvs(self, verb: str, since: int = 0) -> list[list[str]]:
        """The argv of each engine call of one verb (create, start, stop ...) after call ``since``."""
        return [c.argv for c in self.fake.calls[since:] if c.program == "docker" and c.argv[1] == verb]

    def created(self) -> dict[str, list[str]]:
        """Each container made, by its name: its create argv (read by name, not by the order of the creates)."""
        return {a[a.index("--name") + 1]: a for a in self.argvs("create")}


def counted(calls: list[str]) -> dict[str, int]:
    """How many engine calls of each verb: the cost, whatever the order they were made in."""
    from collections import Counter

    return dict(Counter(calls))


@pytest.fixture()
def engine(docker_fake, fake):
    # the sweep's detached supervisor (taobank.core.sweepsupervisor): answered with a pid, nothing starts
    fake.on("python3", lambda c: c.argv[1:4] == ["-m", "taobank", "supervise"], ok("4242\n"))
    return Engine(fake)


SPEC = {"image": "img:1", "gpus": 0, "network_arch": "dino", "action": "train",
        "command": ["sh", "/fake/fake_tao_train.sh", "--epochs", "3"]}


@pytest.mark.parametrize("n", (1, 10))
def test_a_docker_sweep_costs_a_fixed_number_of_engine_calls(engine, n):
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{"train.optim.lr": f"0.{i + 1:03d}"} for i in range(n)], min(K, n))
    ids = [v.id for v in done.views]
    # the gate (version, image), one create per container (the CLI makes one a call), ONE start of the first K
    got = engine.calls()
    assert counted(got) == {"info": 1, "image": 1, "create": n, "start": 1}, got
    assert max(got.index("info"), got.index("image")) < got.index("create")  # kept: the gate refuses before any create
    (start,) = engine.argvs("start")
    assert start[2:] == ids[:K]
    creates = engine.created()
    assert all(f"{LABEL_SWEEP}={done.sweep}" in a for a in creates.values())
    assert {name: a[-1] for name, a in creates.items()} == {ids[i]: f"train.optim.lr=0.{i + 1:03d}" for i in range(n)}
    assert [records.load(i)["backend"]["held"] for i in ids] == [i >= K for i in range(n)]

    # a sweep with held trials gets ONE detached supervisor, started by the submit (the sweep runs by itself)
    supervisors = [c for c in engine.fake.calls if c.argv[1:4] == ["-m", "taobank", "supervise"]]
    assert [c.argv[4:] for c in supervisors] == ([[done.sweep]] if n > K else [])

    # status --sweep: ONE inspect of every container, nothing to release
    since = len(engine.fake.calls)
    rows = sweeps.status(done.sweep)
    assert engine.calls(since) == ["inspect"]
    assert [r.state for r in rows] == ["RUNNING"] * min(K, n) + ["PENDING"] * max(0, n - K)
    assert [r.held for r in rows] == [i >= K for i in range(n)]

    # a trial ends: ONE inspect, its logs saved once, its container removed (its saved configuration holds the
    # secrets), ONE start releasing the next held trial
    engine.containers[ids[0]].update(Status="exited", ExitCode=0)
    since = len(engine.fake.calls)
    rows = sweeps.status(done.sweep)
    got = engine.calls(since)
    assert counted(got) == {"inspect": 1, "logs": 1, "rm": 1, **({"start": 1} if n > K else {})}, got
    assert got.index("logs") < got.index("rm")  # kept: the logs are saved before the container (and they) go
    assert ids[0] not in engine.containers
    if n > K:
        (start,) = engine.argvs("start", since)
        assert start[2:] == [ids[K]] and engine.containers[ids[K]]["Status"] == "running"
        assert records.load(ids[K])["backend"]["held"] is False
    assert rows[0].state == "COMPLETE"

    # cancel --sweep: ONE inspect, ONE rm of the held ones, ONE stop of the running ones, ONE inspect after, and
    # the saved logs of each one that ran (at most K); a lone trial is the plain cancel
    since = len(engine.fake.calls)
    views, errors = sweeps.cancel(done.sweep)
    assert errors == []
    got = engine.calls(since)
    running = min(K, n - 1)
    if n > 2:
        assert counted(got) == {"inspect": 2, "rm": 1, "stop": 1, "logs": running}, got
        assert got.index("stop") < got.index("logs")  # kept: a stopped trial's logs are saved after it stopped
        (stop,) = engine.argvs("stop", since)
        assert sorted(stop[4:]) == sorted(ids[1:1 + running])
        assert set(engine.containers) == set(ids[1:1 + running])  # the held ones are gone, the finished one too
    else:
        assert got == [], got  # n=1: the only trial had ended; nothing to cancel
    assert [records.load(i)["state"] for i in ids] == ["COMPLETE"] + ["CANCELED"] * (n - 1)


def test_a_failed_create_removes_every_container_made_and_marks_every_trial_error(engine, fake):
    made = []

    def create(call):
        made.append(call)
        if len(made) == 3:
            return ok("", 1, "Error response from daemon: Conflict. The container name is already in use")
        return engine.create(call)

    fake.on("docker", lambda c: c.argv[1] == "create", create)
    with pytest.raises(Exception) as exc:
        sweeps.submit("docker", SPEC, SubmitOptions(), [{"train.optim.lr": str(i)} for i in range(4)], K)
    assert "already in use" in str(exc.value) and "no trial runs" in str(exc.value)
    (rm,) = [c for c in fake.calls if c.program == "docker" and c.argv[1] == "rm"]
    assert len(rm.argv[3:]) == 3 and not any(c.argv[1] == "start" for c in fake.calls if c.program == "docker")
    assert {r["state"] for r in records.list_records()} == {State.ERROR}
    assert engine.containers == {}


def test_sweep_best_lists_every_trial_folder_in_one_local_command(engine, fake):
    values = ["350", "210", "480"]
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{"fake.best_val": v} for v in values], K)
    for v, view in zip(values, done.views):
        folder = records.load(view.id)["backend"]["results_dir"]
        subprocess.run(["sh", str(TRAINER), "--results", folder, "--epochs", "3", f"fake.best_val={v}"],
                       check=True, capture_output=True)
    since = len(fake.calls)
    win = sweeps.best(done.sweep, "val_loss", "min")
    assert [c.program for c in fake.calls[since:]] == ["sh"]
    assert win.id == done.views[1].id and abs(win.value - 0.21) < 1e-9 \
        and win.checkpoints == ["train/model_epoch_001_step_00020.pth"]


def test_a_held_trial_canceled_alone_is_removed_not_stopped(engine, fake):
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{"train.optim.lr": str(i)} for i in range(3)], 1)
    held = done.views[2].id
    from taobank.core import platform

    since = len(fake.calls)
    (view,), errors = platform.cancel("docker", [held])
    assert errors == [] and view.state == "CANCELED" and "before it started" in view.message
    got = engine.calls(since)
    assert "rm" in got and "stop" not in got and "kill" not in got and held not in engine.containers


# ------------------------------------------------------------------ continue and --parent
def _finished_job(engine, cli, tmp_path, state: str) -> dict:
    out = cli("tao_docker.py", "submit", "--spec", _spec_file(tmp_path), "--json")
    assert out.rc == 0, out
    jid = json.loads(out.out)["id"]
    folder = records.load(jid)["backend"]["results_dir"]
    subprocess.run(["sh", str(TRAINER), "--results", folder, "--epochs", "2"], check=True, capture_output=True)
    if state == "CANCELED":  # still running: the cancel stops it
        assert cli("tao_docker.py", "cancel", jid).rc == 0
    else:
        engine.containers[jid].update(Status="exited", ExitCode=0 if state == "COMPLETE" else 1)
        assert cli("tao_docker.py", "status", jid).rc == 0
    assert records.load(jid)["state"] == state
    return records.load(jid)


def _spec_file(tmp_path) -> str:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(SPEC))
    return str(path)


def _mount_of(argv: list[str], folder: str) -> str:
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "--mount"]
    (m,) = [m for m in mounts if f"source={folder}," in m]
    return m


def test_continue_mounts_the_old_folder_and_resumes_from_its_checkpoint(engine, cli, tmp_path, monkeypatch):
    old = _finished_job(engine, cli, tmp_path, "ERROR")
    folder = old["backend"]["results_dir"]
    monkeypatch.setenv("TAO_DOCKER_ENGINE", "podman")  # a new shell elsewhere: the job's own engine is used
    since = len(engine.fake.calls)
    out = cli("tao_docker.py", "continue", old["id"], "--json")
    assert out.rc == 0, out
    view = json.loads(out.out)
    assert view["continues"] == old["id"] and view["continues_from"] == f"{folder}/train/model_epoch_001_step_00020.pth"
    (run,) = [c.argv for c in engine.fake.calls[since:] if c.program == "docker" and c.argv[1] == "run"]
    assert _mount_of(run, folder) == f"type=bind,source={folder},target={folder},readonly"
    assert run[-1] == f"train.resume_training_checkpoint_path={folder}/train/model_epoch_001_step_00020.pth"
    assert records.load(view["id"])["backend"]["engine"] == "docker"


def test_continue_dry_run_shows_the_mount_and_opens_nothing(engine, cli, tmp_path):
    old = _finished_job(engine, cli, tmp_path, "CANCELED")
    before = len(records.list_records())
    out = cli("tao_docker.py", "continue", old["id"], "--dry-run", "--from", "train/model_epoch_000_step_00010.pth")
    assert out.rc == 0, out
    folder = old["backend"]["results_dir"]
    assert f"source={folder},target={folder},readonly" in out.out and "model_epoch_000_step_00010.pth" in out.out
    assert len(records.list_records()) == before


def test_a_parent_child_reads_the_parents_checkpoint_through_a_read_only_mount(engine, cli, tmp_path):
    parent = _finished_job(engine, cli, tmp_path, "COMPLETE")
    folder = parent["backend"]["results_dir"]
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--action", "evaluate", "--parent",
              parent["id"], "--json", "--", "cat", "{parent.checkpoint}")
    assert out.rc == 0, out
    view = json.loads(out.out)
    assert view["parent"] == parent["id"]
    run = [c.argv for c in engine.fake.calls if c.program == "docker" and c.argv[1] == "run"][-1]
    assert run[-2:] == ["cat", f"{folder}/train/model_epoch_001_step_00020.pth"]
    assert _mount_of(run, folder).endswith(",readonly")


def test_a_mount_in_the_way_of_the_parents_folder_is_one_line(engine, cli, tmp_path):
    parent = _finished_job(engine, cli, tmp_path, "COMPLETE")
    folder = parent["backend"]["results_dir"]
    other = tmp_path / "other"
    other.mkdir()
    n = len(records.list_records())
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--mount", f"{other}:{folder}",
              "--parent", parent["id"], "--", "ls", "{parent.results_dir}")
    assert out.rc == 1 and len(out.err_lines) == 1 and "mount it elsewhere" in out.err
    assert len(records.list_records()) == n


def test_a_mount_already_showing_the_folder_is_kept(engine, cli, tmp_path):
    parent = _finished_job(engine, cli, tmp_path, "COMPLETE")
    base = str(Path(parent["backend"]["results_dir"]).parent)
    spec = lineage.with_parent("docker", {**SPEC, "mounts": [{"host": base, "container": base}]}, parent["id"])
    assert spec["mounts"] == [{"host": base, "container": base}]


def test_a_mount_on_the_jobs_own_results_folder_is_still_refused(engine, cli, tmp_path):
    out = cli("tao_docker.py", "submit", "--image", "img:1", "--gpus", "0", "--mount", f"{tmp_path}:/results",
              "--", "true")
    assert out.rc == 1 and "covers or shadows" in out.err


# ------------------------------------------------------------------ GPUs of trials running at once
def four_gpus(monkeypatch) -> None:
    from taobank.platforms.docker import gpus

    monkeypatch.setattr(gpus, "host_gpus", lambda: [gpus.Gpu(str(i), f"GPU-{i}", "H200", "575.57", "9.0", 143771)
                                                  for i in range(4)])


def test_trials_running_at_once_get_gpus_of_their_own_and_wait_for_their_slot(engine, monkeypatch):
    """``--gpus 2`` alone gives every container the host's first two GPUs: each trial is made with its slot's."""
    four_gpus(monkeypatch)
    done = sweeps.submit("docker", {**SPEC, "gpus": 2}, SubmitOptions(), [{"train.optim.lr": f"0.{i}"} for i in range(5)], 2)
    ids = [v.id for v in done.views]
    devices = {name: a[a.index("--gpus") + 1] for name, a in engine.created().items()}
    assert devices == dict(zip(ids, ['"device=0,1"', '"device=2,3"', '"device=0,1"', '"device=2,3"', '"device=0,1"']))
    assert [records.load(i)["backend"]["slot"] for i in ids] == [0, 1, 0, 1, 0]
    # trial 1 (slot 1) ends while trial 0 holds slot 0: trial 3 starts on slot 1, trial 2 keeps waiting
    engine.containers[ids[1]].update(Status="exited", ExitCode=0)
    since = len(engine.fake.calls)
    sweeps.status(done.sweep)
    assert [a[2:] for a in engine.argvs("start", since)] == [[ids[3]]]
    assert engine.containers[ids[2]]["Status"] == "created"
    # a job submitted beside the sweep on the same GPUs is told so (the record store: no engine call)
    from taobank.core import platform

    view = platform.get("docker").submit({**SPEC, "gpus": 2}, SubmitOptions())
    assert view.extra["gate_notes"] == [f"warning: GPU 0,1 to job {ids[0]} (active in the records): the jobs would "
                                        "share them (--gpu-device names other GPUs)"]


def _active(gpu_indices: str, **backend) -> str:
    rec = records.open_record("docker", "img:1", "dino", "train", "A", "/r/{id}",
                              backend={"gpu_indices": gpu_indices, **backend})
    records.mark(rec["id"], "RUNNING")
    return rec["id"]


def test_gpus_in_use_are_the_active_jobs_of_the_same_engine_that_hold_them(engine):
    from taobank.platforms.docker import gpus

    mine = _active("1")
    _active("0", held=True)                      # a held sweep trial has not started: it holds nothing yet
    _active("2", engine_host="ssh://other-box")  # another machine's GPUs
    done = _active("3")
    records.mark(done, "COMPLETE")
    assert gpus.in_use(None) == {"1": mine}
    assert gpus.in_use("ssh://other-box") != {} and gpus.in_use(None, besides=mine) == {}


def test_every_slot_of_a_sweep_is_checked_against_the_jobs_running_and_the_cli_says_so(engine, monkeypatch, cli,
                                                                                        tmp_path):
    import json as json_

    four_gpus(monkeypatch)
    other = _active("2")
    spec = tmp_path / "job.json"
    spec.write_text(json_.dumps({**SPEC, "gpus": 2}))
    out = cli("tao_docker.py", "submit", "--spec", str(spec), "--sweep", "train.optim.lr=0.1,0.2", "--max-concurrent", "2",
              "--quiet")
    assert out.rc == 0, out
    assert f"warning: sweep {out.out.strip()} GPU 2 to job {other} (active in the records)" in out.err
    one = cli("tao_docker.py", "submit", "--spec", str(spec), "--quiet")  # GPUs 0,1: the sweep's slot 0 has them
    assert one.rc == 0 and f"warning: {one.out.strip()} GPU 0,1 to job " in one.err, one


def test_a_sweep_asking_for_gpus_on_a_host_without_them_is_told_why(engine, monkeypatch):
    from taobank.platforms.docker import gpus

    monkeypatch.setattr(gpus, "host_gpus", lambda: None)
    with pytest.raises(TaoError, match=r"this host has none \(no nvidia-smi here \(no NVIDIA driver\)\): set gpus: 0"):
        sweeps.submit("docker", {**SPEC, "gpus": 1}, SubmitOptions(), [{"train.optim.lr": "0.1"}, {"train.optim.lr": "0.2"}], 2)
    assert records.list_records() == []


@pytest.mark.parametrize("asked,k,needle", [
    ({"gpus": 2}, 3, "3 trials at once with 2 GPU(s) each need 6 GPUs, this host has 4: use --max-concurrent 2 or fewer"),
    ({"gpus": "all"}, 2, "every trial asks for the same GPUs (all): 2 at once would share them"),
    ({"gpu_devices": ["0", "1"]}, 2, "every trial asks for the same GPUs (0,1): 2 at once would share them"),
])
def test_trials_that_would_share_gpus_are_refused_before_any_record(engine, monkeypatch, asked, k, needle):
    four_gpus(monkeypatch)
    spec = {**{k_: v for k_, v in SPEC.items() if k_ != "gpus"}, **asked}
    with pytest.raises(TaoError, match=re.escape(needle)) as err:
        sweeps.submit("docker", spec, SubmitOptions(), [{"train.optim.lr": f"0.{i}"} for i in range(4)], k)
    assert "\n" not in str(err.value) and records.list_records() == []
    assert "create" not in engine.calls()


def test_every_trial_of_an_all_gpus_sweep_tells_tao_the_hosts_count(engine, monkeypatch):
    """``gpus: all`` is counted from the host's GPUs: each trial's TAO command says so, not only the first one's."""
    four_gpus(monkeypatch)
    spec = {**SPEC, "gpus": "all", "command": ["dino", "train", "-e", "/specs/train.yaml"]}
    sweeps.submit("docker", spec, SubmitOptions(), [{"train.optim.lr": f"0.{i}"} for i in range(3)], 1)
    creates = [c.argv for c in engine.fake.calls if c.program == "docker" and c.argv[1] == "create"]
    assert len(creates) == 3
    for i, argv in enumerate(creates):
        name = argv[argv.index("--name") + 1]
        assert argv[-7:] == ["dino", "train", "-e", "/specs/train.yaml", f"train.optim.lr=0.{i}",
                             f"results_dir=/results/{name}", "train.num_gpus=4"]


def test_submit_and_sweeps_warn_when_tao_cannot_be_told_its_gpus(engine, monkeypatch):
    from taobank.core import platform

    four_gpus(monkeypatch)
    spec = {**SPEC, "gpus": 2, "command": "cd /tmp && dino train -e /specs/train.yaml"}
    want = "warning: the command runs dino in a form the bank cannot add train.num_gpus to"
    view = platform.get("docker").submit(spec, SubmitOptions())
    assert any(n.startswith(want) for n in view.extra["gate_notes"]), view.extra["gate_notes"]
    done = sweeps.submit("docker", spec, SubmitOptions(), [{"train.optim.lr": "0.1"}], 1)
    assert any(n.startswith(want) for n in done.notes), done.notes


def test_a_network_the_pinned_tao_does_not_know_gets_no_keys_and_a_warning(engine, monkeypatch):
    from taobank.core import platform

    four_gpus(monkeypatch)
    spec = {**SPEC, "gpus": 2, "network_arch": "yolo_v4", "command": ["yolo_v4", "train", "-e", "/specs/train.yaml"]}
    view = platform.get("docker").submit(spec, SubmitOptions())
    assert any(n.startswith("warning: TAO 6.26.3 has no network yolo_v4") for n in view.extra["gate_notes"])
    (run,) = [c.argv for c in engine.fake.calls if c.program == "docker" and c.argv[1] == "run"]
    assert run[-4:] == ["yolo_v4", "train", "-e", "/specs/train.yaml"]  # nothing appended
