"""One CLI grammar and one set of exit codes for tao_k8s.py, tao_slurm.py, tao_docker.py and (where the verb exists)
tao_jobs.py, each run in-process against the fake kubectl/ssh.

Grammar: ``status [ID...] [--watch] [--json]`` (always a list), ``logs ID [--tail N] [-f/--follow]
[--json]``, ``cancel ID... | --all``, ``submit --dry-run/--quiet/--json/--name``, ``--version``.
Exit codes: 0 ok, 1 failed (or ERROR under --watch), 2 usage, 130 interrupted. Old spellings
(``logs --lines``, ``submit --secret``) still work and print one deprecation line.
"""
from __future__ import annotations

import json

import pytest
import yaml

from fakeproc import (echo_applied, find_answer, items, job, k8s_record, node, ok, pod,
                      sacct_row, slurm_record, squeue_row, sweep_answer, k8s_cluster)
from taobank import records

SECRET = "NGC_KEY"


class K8s:
    helper = "tao_k8s.py"
    platform = "kubernetes"
    submit_argv = ["submit", "--image", "nvcr.io/nvidia/tao/tao-toolkit:x", "--command", "echo hi", "--pvc-mount", "ws:/results"]

    def __init__(self, fake) -> None:
        self.fake = fake
        self.ends: dict[str, str] = {}

    def record(self, state: str = "RUNNING") -> str:
        return k8s_record(state=state)["id"]

    def status_is(self, ends: dict[str, str]) -> None:
        """``ends``: id -> RUNNING | COMPLETE | ERROR, answered by the one list call."""
        self.ends.update(ends)

        def answer(call):
            objs = []
            for jid, end in self.ends.items():
                cond = {"COMPLETE": "Complete", "ERROR": "Failed"}.get(end)
                objs.append(job(jid, f"uid-{jid}", condition=cond))
                if end == "RUNNING":
                    objs.append(pod(jid, f"uid-{jid}"))
            return items(objs)

        self.fake.kubectl("get", "jobs,pods", answer=answer)

    def logs_are(self, text: str) -> None:
        self.fake.kubectl("get", "pods", "-l", answer=lambda c: items([pod(c.words[3].split("=")[1],
                                                                            "uid-" + c.words[3].split("=")[1])]))
        self.fake.kubectl("logs", answer=text)

    def tail_asked(self) -> list[str]:
        """The lines asked of the job's output: kubectl is asked for room for the final status lines too (a finished
        pod's last lines; left out), except when following."""
        from taobank.platforms.kubernetes import logs as k8s_logs

        return [str(int(w.split("=")[1]) - (0 if "--follow" in c.words else k8s_logs.FINAL_LINES_MAX))
                for c in self.fake.kubectl_calls("logs") for w in c.words if w.startswith("--tail=")]

    def followed(self) -> bool:
        return any("--follow" in c.words for c in self.fake.kubectl_calls("logs"))

    def cancel_works(self) -> None:
        self.fake.kubectl("get", "job", answer=lambda c: job(c.words[2], f"uid-{c.words[2]}"))
        self.fake.kubectl("get", "pods", "-l", answer=items([]))
        self.fake.kubectl("delete", answer="")

    def submit_works(self) -> None:
        k8s_cluster(self.fake)

    def secret_sent(self) -> list[str]:
        """Names of the secret values sent to the cluster (in a Secret on stdin)."""
        out = []
        for c in self.fake.kubectl_calls("create"):
            out += list(json.loads(c.stdin).get("data") or {})
        return out


class Slurm:
    helper = "tao_slurm.py"
    platform = "slurm"
    submit_argv = ["submit", "--network-arch", "dino", "--action", "train", "--runtime", "none", "--num-gpus", "1",
                   "--", "python", "train.py"]

    def __init__(self, fake) -> None:
        self.fake = fake
        self.ends: dict[str, tuple[str, str]] = {}

    def record(self, state: str = "RUNNING") -> str:
        jid = str(300 + len(records.list_records("slurm")))
        return slurm_record(slurm_job_id=jid, state=state)["id"]

    def status_is(self, ends: dict[str, str]) -> None:
        for job_id, end in ends.items():
            self.ends[job_id] = (records.load(job_id)["backend"]["slurm_job_id"], end)

        def answer(call):
            sq, sa = [], []
            for job_id, (jid, end) in self.ends.items():
                if end == "RUNNING":
                    sq.append(squeue_row(jid, "RUNNING", job_id, "node1"))
                else:
                    sa.append(sacct_row(jid, job_id, {"COMPLETE": "COMPLETED", "ERROR": "TIMEOUT"}[end]))
            return sweep_answer(sq, sa)(call)

        self.fake.ssh("SWEEP", answer)

    def logs_are(self, text: str) -> None:
        self.fake.ssh("LOGS", f"@@out\n{text}@@err\n")
        self.fake.ssh("FOLLOW", lambda c: ok(f"{len(text)} 0\n{c.args[0]}\n{text}{c.args[0]}\n"))

    def tail_asked(self) -> list[str]:
        return [c.args[0] for c in self.fake.of("ssh") if c.script == "LOGS"]

    def followed(self) -> bool:
        return self.fake.count("FOLLOW") > 0

    def cancel_works(self) -> None:
        self.fake.ssh("scancel", "")

    def submit_works(self) -> None:
        self.fake.ssh("STAGE")
        self.fake.ssh("FIND", find_answer())
        self.fake.ssh("SBATCH", lambda c: ok(f"{4000 + self.fake.count('SBATCH')}\n"))

    def secret_sent(self) -> list[str]:
        import base64
        import io
        import tarfile

        (stage,) = [c for c in self.fake.of("ssh") if c.script == "STAGE"]
        tar = tarfile.open(fileobj=io.BytesIO(base64.b64decode(stage.stdin)))
        creds = tar.extractfile("env/credentials.sh").read().decode()
        return [ln.split("=")[0].removeprefix("export ") for ln in creds.splitlines() if "=" in ln]


class Docker:
    helper = "tao_docker.py"
    platform = "docker"

    def __init__(self, fake) -> None:
        import tempfile

        self.fake = fake
        self.base = tempfile.mkdtemp(prefix="tao-docker-conformance-")
        self.submit_argv = ["submit", "--image", "img:1", "--gpus", "0", "--results-dir", self.base, "--",
                            "python", "train.py"]
        self.stopped: set[str] = set()
        self.ends: dict[str, str] = {}
        fake.on("sh", lambda c: True, "")  # TAO's status files in the local results folders: none

    def record(self, state: str = "RUNNING") -> str:
        jid = f"custom-run-{len(records.list_records('docker')):08x}"
        records.open_record("docker", "img:1", "custom", "run", "A", f"{self.base}/{jid}", job_id=jid,
                            backend={"engine": "docker", "container": jid, "results_dir": f"{self.base}/{jid}"})
        return records.mark(jid, state, backend_ref="0123456789ab")["id"]

    def status_is(self, ends: dict[str, str]) -> None:
        states = {"RUNNING": {"Status": "running", "Running": True}, "COMPLETE": {"Status": "exited", "ExitCode": 0},
                  "ERROR": {"Status": "exited", "ExitCode": 1}}
        self.ends.update(ends)  # a poll answers for every job told so far, as the engine would
        self.fake.on("docker", lambda c: c.argv[1:3] == ["container", "inspect"],
                     lambda c: ok(json.dumps([{"Name": "/" + jid, "Id": jid, "State": states[end]}
                                              for jid, end in self.ends.items()])))
        self.fake.on("docker", lambda c: c.argv[1] == "logs", "")
        self.fake.on("docker", lambda c: c.argv[1] == "rm", "")  # a finished job's container goes with it

    def logs_are(self, text: str) -> None:
        self.fake.on("docker", lambda c: c.argv[1] == "logs", text)

    def _logs(self) -> list:
        return [c for c in self.fake.calls if c.program == "docker" and c.argv[1] == "logs"]

    def tail_asked(self) -> list[str]:
        return [c.argv[c.argv.index("--tail") + 1] for c in self._logs() if "--tail" in c.argv]

    def followed(self) -> bool:
        return any("--follow" in c.argv for c in self._logs())

    def cancel_works(self) -> None:
        def inspect(call):
            return ok(json.dumps([{"Name": "/" + n, "Id": n, "State": (
                {"Status": "exited", "ExitCode": 143, "Running": False} if n in self.stopped
                else {"Status": "running", "Running": True})} for n in call.argv[3:]]))

        self.fake.on("docker", lambda c: c.argv[1:3] == ["container", "inspect"], inspect)
        self.fake.on("docker", lambda c: c.argv[1] == "stop", lambda c: (self.stopped.add(c.argv[-1]), ok(""))[1])
        self.fake.on("docker", lambda c: c.argv[1] == "logs", "")  # the ended job's logs, saved beside its record

    def submit_works(self) -> None:
        self.fake.on("docker", lambda c: c.argv[1] == "info", '{"ServerVersion": "20.10.24", "SecurityOptions": []}')
        self.fake.on("docker", lambda c: c.argv[1:3] == ["image", "inspect"], "sha256:1")
        self.fake.on("docker", lambda c: c.argv[1] == "run", "0123456789abcdef0123\n")

    def secret_sent(self) -> list[str]:
        """Names handed to the engine by name (``--env NAME``): the engine reads the value from our environment."""
        (run,) = [c for c in self.fake.calls if c.program == "docker" and c.argv[1] == "run"]
        return [run.argv[i + 1] for i, a in enumerate(run.argv[:-1]) if a == "--env" and "=" not in run.argv[i + 1]]


@pytest.fixture(params=[K8s, Slurm, Docker], ids=["k8s", "slurm", "docker"])
def world(request, slurm):
    return request.param(slurm)


@pytest.fixture(params=["own", "tao_jobs.py"])
def helper(request, world) -> str:
    """The platform's own helper, or the front door (for status, logs, cancel)."""
    return world.helper if request.param == "own" else "tao_jobs.py"


# ------------------------------------------------------------------ --version
@pytest.mark.parametrize("name", ["tao_k8s.py", "tao_slurm.py", "tao_docker.py", "tao_jobs.py"])
def test_version_prints_the_bank_version(cli, bank, name):
    pins = yaml.safe_load((bank / "versions.yaml").read_text())
    out = cli(name, "--version")
    assert out.rc == 0 and out.out.strip() == f"{name} ({pins['bank']['name']} {pins['bank']['version']})", out


# ------------------------------------------------------------------ status
def test_status_json_is_a_list_even_for_one_id(world, helper, cli):
    a, b = world.record(), world.record()
    world.status_is({a: "RUNNING", b: "RUNNING"})
    one = cli(helper, "status", a, "--json")
    assert one.rc == 0 and [v["id"] for v in json.loads(one.out)] == [a], one
    two = cli(helper, "status", a, b, "--json")
    assert [v["id"] for v in json.loads(two.out)] == [a, b]
    every = cli(helper, "status", "--json")
    assert sorted(v["id"] for v in json.loads(every.out)) == sorted([a, b])
    assert all(v["platform"] == world.platform and v["state"] == "RUNNING" for v in json.loads(every.out))


def test_status_of_a_finished_record_asks_nobody_and_is_still_a_list(world, helper, cli):
    """A finished record is shown as stored: no scheduler, engine or API query. Its final progress is read once,
    the first time status shows it finished without one known (it ended under another poller: issue 49), in one
    read of its status files at most (none on Kubernetes without a saved spec), then never again."""
    jid = world.record()
    records.mark(jid, "COMPLETE")
    if world.platform == "slurm":
        world.fake.ssh("READ_STATUS_SH", "")  # no status file: nothing to show, and known as final
    out = cli(helper, "status", jid, "--json")
    assert out.rc == 0 and [v["state"] for v in json.loads(out.out)] == ["COMPLETE"]
    reads = {"slurm": [("ssh", "READ_STATUS_SH")], "docker": [("sh", None)], "kubernetes": []}[world.platform]
    assert [(c.program, c.script) for c in world.fake.calls if not c.control] == reads, world.fake.calls
    since = len(world.fake.calls)
    again = cli(helper, "status", jid, "--json")
    assert again.rc == 0 and [v["state"] for v in json.loads(again.out)] == ["COMPLETE"]
    assert world.fake.calls[since:] == []


def words(line: str) -> list[str]:
    """ID and STATE of a ``ID STATE: message`` line."""
    return [w.rstrip(":") for w in line.split()[:2]]


def test_status_text_is_one_line_per_job(world, helper, cli):
    a, b = world.record(), world.record()
    world.status_is({a: "RUNNING", b: "COMPLETE"})
    out = cli(helper, "status", a, b)
    lines = out.out.splitlines()
    assert out.rc == 0
    if helper == "tao_jobs.py":  # the front door prints the job table
        assert lines[0].split()[0] == "ID" and len(lines) == 3
    else:
        assert [words(ln) for ln in lines] == [[a, "RUNNING"], [b, "COMPLETE"]]


def test_status_of_an_unknown_id_is_exit_1_one_line(world, helper, cli):
    out = cli(helper, "status", "no-such-job-1234abcd")
    assert out.rc == 1 and len(out.err_lines) == 1 and "no job record" in out.err


@pytest.mark.parametrize("end,code", [("COMPLETE", 0), ("ERROR", 1)])
def test_watch_exit_code_is_1_on_error_and_0_on_complete(world, helper, cli, end, code):
    jid = world.record()
    world.status_is({jid: end})
    out = cli(helper, "status", jid, "--watch")
    assert out.rc == code, out
    assert f"{jid} {end}" in out.out


def test_watch_json_prints_the_final_list(world, helper, cli):
    jid = world.record()
    world.status_is({jid: "COMPLETE"})
    out = cli(helper, "status", jid, "--watch", "--json")
    assert out.rc == 0 and [v["state"] for v in json.loads(out.out)] == ["COMPLETE"]
    assert jid in out.err  # progress lines go to stderr under --json


@pytest.mark.parametrize("interval", ["0", "-1"])
def test_watch_interval_must_be_positive(world, helper, cli, interval):
    jid = world.record()
    out = cli(helper, "status", jid, "--watch", "--interval", interval)
    assert out.rc == 2 and len(out.err_lines) == 1 and "--interval" in out.err, out
    assert world.fake.calls == []


@pytest.mark.parametrize("verb", [["status", "--watch"], ["status"], ["logs"], ["cancel"]], ids=" ".join)
def test_interrupt_is_exit_130(world, helper, cli, verb):
    jid = world.record()

    def interrupted(call):
        raise KeyboardInterrupt

    world.fake.on("kubectl", lambda c: True, interrupted)
    world.fake.on("ssh", lambda c: not c.control, interrupted)
    world.fake.on("docker", lambda c: True, interrupted)
    out = cli(helper, verb[0], jid, *verb[1:])
    assert out.rc == 130 and out.err_lines == ["error: interrupted"], out
    assert records.load(jid)["state"] == "RUNNING"


# ------------------------------------------------------------------ logs
def test_logs_tail_and_json(world, helper, cli):
    jid = world.record()
    world.logs_are("epoch 1\nepoch 2\n")
    out = cli(helper, "logs", jid, "--tail", "7")
    assert out.rc == 0 and "epoch 2" in out.out and world.tail_asked() == ["7"], out
    js = cli(helper, "logs", jid, "--json")
    data = json.loads(js.out)
    assert set(data) == {"id", "source", "sections"} and data["id"] == jid
    assert any("epoch 2" in text for text in data["sections"].values())


def test_logs_lines_is_deprecated_but_works(world, helper, cli):
    jid = world.record()
    world.logs_are("epoch 1\n")
    out = cli(helper, "logs", jid, "--lines", "9")
    assert out.rc == 0 and "epoch 1" in out.out and world.tail_asked() == ["9"], out
    assert len(out.err_lines) == 1 and "--lines is deprecated" in out.err and "--tail" in out.err


@pytest.mark.parametrize("flag", ["-f", "--follow"])
def test_logs_follow(world, helper, cli, flag):
    jid = world.record()
    records.mark(jid, "COMPLETE")  # an ended job: follow reads what there is and returns
    world.logs_are("the end\n")
    world.fake.on("kubectl", lambda c: "--follow" in c.words, "the end\n")
    out = cli(helper, "logs", jid, flag)
    assert out.rc == 0 and "the end" in out.out and world.followed(), out


@pytest.mark.parametrize("argv", [["--tail", "0"], ["-f", "--json"]], ids=" ".join)
def test_logs_usage_errors_are_exit_2(world, helper, cli, argv):
    jid = world.record()
    out = cli(helper, "logs", jid, *argv)
    assert out.rc == 2 and len(out.err_lines) == 1, out
    assert world.fake.calls == []


# ------------------------------------------------------------------ cancel
def test_cancel_takes_many_ids(world, helper, cli):
    ids = [world.record() for _ in range(3)]
    world.cancel_works()
    out = cli(helper, "cancel", ids[0], ids[2])
    assert out.rc == 0, out
    assert [records.load(i)["state"] for i in ids] == ["CANCELED", "RUNNING", "CANCELED"]
    assert [words(ln) for ln in out.out.splitlines()] == [[ids[0], "CANCELED"], [ids[2], "CANCELED"]]


def test_cancel_all_cancels_every_active_job(world, helper, cli):
    ids = [world.record() for _ in range(2)]
    done = world.record()
    records.mark(done, "COMPLETE")
    world.cancel_works()
    out = cli(helper, "cancel", "--all", "--json")
    assert out.rc == 0 and sorted(v["id"] for v in json.loads(out.out)) == sorted(ids), out
    assert [records.load(i)["state"] for i in ids + [done]] == ["CANCELED", "CANCELED", "COMPLETE"]


@pytest.mark.parametrize("argv", [[], ["ID", "--all"]], ids=["nothing", "ids-and-all"])
def test_cancel_usage_errors_are_exit_2(world, helper, cli, argv):
    jid = world.record()
    out = cli(helper, "cancel", *[jid if a == "ID" else a for a in argv])
    assert out.rc == 2 and len(out.err_lines) == 1, out
    assert records.load(jid)["state"] == "RUNNING" and world.fake.calls == []


# ------------------------------------------------------------------ submit
def test_submit_dry_run_contacts_nothing_and_opens_no_record(world, cli):
    out = cli(world.helper, *world.submit_argv[:1], "--dry-run", *world.submit_argv[1:])
    assert out.rc == 0 and out.out.strip(), out
    js = cli(world.helper, *world.submit_argv[:1], "--dry-run", "--json", *world.submit_argv[1:])
    assert js.rc == 0 and isinstance(json.loads(js.out), dict)
    assert world.fake.calls == [] and records.list_records() == []


def test_submit_quiet_prints_only_the_id(world, cli):
    world.submit_works()
    out = cli(world.helper, *world.submit_argv[:1], "--quiet", *world.submit_argv[1:])
    assert out.rc == 0, out
    (rec,) = records.list_records()
    assert out.out == rec["id"] + "\n"


def test_submit_json_and_name(world, cli):
    world.submit_works()
    out = cli(world.helper, *world.submit_argv[:1], "--json", "--name", "lr sweep 3", *world.submit_argv[1:])
    assert out.rc == 0, out
    view = json.loads(out.out)
    assert view["platform"] == world.platform and view["backend_ref"] and view["state"] == "PENDING"
    assert view["description"] == "lr sweep 3" == records.load(view["id"])["description"]


def test_submit_quiet_and_json_together_is_exit_2(world, cli):
    out = cli(world.helper, *world.submit_argv[:1], "--quiet", "--json", *world.submit_argv[1:])
    assert out.rc == 2 and len(out.err_lines) == 1, out
    assert world.fake.calls == [] and records.list_records() == []


def test_submit_secret_is_deprecated_but_works(world, cli, monkeypatch):
    monkeypatch.setenv(SECRET, "value-never-printed-1234")
    world.submit_works()
    out = cli(world.helper, *world.submit_argv[:1], "--secret", SECRET, "--quiet", *world.submit_argv[1:])
    assert out.rc == 0, out
    assert len(out.err_lines) == 1 and "--secret is deprecated" in out.err and "--secret-env" in out.err
    assert world.secret_sent() == [SECRET]
    assert "value-never-printed-1234" not in out.out + out.err
    no_secret_anywhere(world)


def test_submit_secret_env_is_the_new_spelling(world, cli, monkeypatch):
    monkeypatch.setenv(SECRET, "value-never-printed-1234")
    world.submit_works()
    out = cli(world.helper, *world.submit_argv[:1], "--secret-env", SECRET, "--quiet", *world.submit_argv[1:])
    assert out.rc == 0 and out.err == "", out
    assert world.secret_sent() == [SECRET]
    no_secret_anywhere(world)


def no_secret_anywhere(world) -> None:
    """The value reached the cluster on stdin only: never on an argv, never in a record."""
    assert all("value-never-printed-1234" not in arg for c in world.fake.calls for arg in c.argv)
    assert all("value-never-printed-1234" not in json.dumps(r) for r in records.list_records())


# ------------------------------------------------------------------ usage
@pytest.mark.parametrize("name", ["tao_k8s.py", "tao_slurm.py", "tao_jobs.py"])
@pytest.mark.parametrize("argv", [["status", "--bogus"], ["frobnicate"], []], ids=" ".join)
def test_usage_errors_are_exit_2_one_line(cli, fake, name, argv):
    out = cli(name, *argv)
    assert out.rc == 2 and len(out.err_lines) == 1, out
    assert fake.calls == []


def test_front_door_status_queries_each_platform_once(slurm, cli):
    k, s = K8s(slurm), Slurm(slurm)
    a, b = k.record(), s.record()
    k.status_is({a: "RUNNING"})
    s.status_is({b: "RUNNING"})
    out = cli("tao_jobs.py", "status", "--json")
    assert out.rc == 0 and {v["id"]: v["platform"] for v in json.loads(out.out)} == {a: "kubernetes", b: "slurm"}
    assert len(slurm.of("kubectl")) == 1 and slurm.count("SWEEP") == 1


def test_front_door_cancel_all_reaches_every_platform(slurm, cli):
    k, s = K8s(slurm), Slurm(slurm)
    ids = [k.record(), s.record(), k.record()]
    k.cancel_works()
    s.cancel_works()
    out = cli("tao_jobs.py", "cancel", "--all")
    assert out.rc == 0, out
    assert [records.load(i)["state"] for i in ids] == ["CANCELED"] * 3
    assert len(slurm.of("ssh", control=True)) - len(slurm.of("ssh")) == 1  # one SSH connection for the SLURM ones


@pytest.mark.parametrize("alias", ["k8s", "kubernetes", "slurm"])
def test_front_door_list_filters_by_platform(slurm, cli, alias):
    k, s = K8s(slurm), Slurm(slurm)
    a, b = k.record(), s.record()
    out = cli("tao_jobs.py", "list", "--platform", alias, "--json")
    assert out.rc == 0 and [v["id"] for v in json.loads(out.out)] == ([b] if alias == "slurm" else [a])
    assert slurm.calls == []


def test_watch_without_ids_follows_every_active_job(world, helper, cli):
    a, b = world.record(), world.record()
    world.status_is({a: "COMPLETE", b: "ERROR"})
    out = cli(helper, "status", "--watch", "--json")
    assert out.rc == 1, out  # one of them ended in ERROR
    assert sorted((v["id"], v["state"]) for v in json.loads(out.out)) == sorted([(a, "COMPLETE"), (b, "ERROR")])


# ------------------------------------------------------------------ watch: one line per job change
def test_watch_of_several_jobs_prints_one_line_per_job_change(world):
    from taobank.core import platform

    a, b, c = world.record(), world.record(), world.record()
    polls = [{a: "RUNNING", b: "RUNNING", c: "RUNNING"}, {a: "COMPLETE"}, {a: "COMPLETE"}, {c: "COMPLETE"},
             {b: "ERROR"}]
    world.status_is(polls.pop(0))
    lines: list[str] = []
    views = platform.watch(world.platform, [a, b, c], on_line=lines.append,
                           sleep=lambda _: world.status_is(polls.pop(0)))
    assert [words(ln) for ln in lines] == [[a, "RUNNING"], [b, "RUNNING"], [c, "RUNNING"], [a, "COMPLETE"],
                                           [c, "COMPLETE"], [b, "ERROR"]], lines
    assert platform.watch_exit_code(views) == 1


def test_on_a_terminal_a_jobs_new_line_replaces_its_own_previous_line_only(monkeypatch):
    import io
    import sys

    from taobank.cli import verbcli

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdout", Tty())
    emit = verbcli._progress(as_json=False)
    for line in ("a PENDING", "a RUNNING", "b RUNNING", "a COMPLETE"):
        emit(line)
    assert sys.stdout.getvalue() == "a PENDING\r\033[Ka RUNNING\nb RUNNING\na COMPLETE"


def test_watch_of_several_jobs_through_the_cli_names_each_job(world, helper, cli):
    a, b = world.record(), world.record()
    world.status_is({a: "COMPLETE", b: "COMPLETE"})
    out = cli(helper, "status", a, b, "--watch")
    assert out.rc == 0 and [words(ln) for ln in out.out.splitlines()] == [[a, "COMPLETE"], [b, "COMPLETE"]], out


def test_a_job_run_without_results_says_so_not_dev_null(fake, cli):
    k = K8s(fake)
    k.submit_works()
    jid = cli("tao_k8s.py", *K8s.submit_argv[:5], "--no-results", "--quiet").out.strip()
    assert records.load(jid)["results_dir"] == records.NO_RESULTS_DIR
    k.status_is({jid: "COMPLETE"})
    for helper in ("tao_k8s.py", "tao_jobs.py"):
        out = cli(helper, "status", jid, "--watch")
        assert out.rc == 0 and "(no results)" in out.out and "/dev/null" not in out.out, out


# ------------------------------------------------------------------ --last
def test_last_is_the_newest_record_for_status_logs_and_cancel(world, helper, cli):
    older, newest = world.record(), world.record()
    world.status_is({older: "RUNNING", newest: "RUNNING"})
    out = cli(helper, "status", "--last", "--json")
    assert out.rc == 0 and [v["id"] for v in json.loads(out.out)] == [newest], out
    world.logs_are("epoch 9\n")
    logs = cli(helper, "logs", "--last", "--json")
    assert logs.rc == 0 and json.loads(logs.out)["id"] == newest, logs
    world.cancel_works()
    gone = cli(helper, "cancel", "--last")
    assert gone.rc == 0 and [words(ln) for ln in gone.out.splitlines()] == [[newest, "CANCELED"]], gone
    assert [records.load(i)["state"] for i in (older, newest)] == ["RUNNING", "CANCELED"]


def test_a_platform_helpers_last_is_its_own_platforms_newest(slurm, cli):
    k, s = K8s(slurm), Slurm(slurm)
    mine_k8s, mine_slurm = k.record(), s.record()
    newest_k8s = k.record()
    k.status_is({mine_k8s: "RUNNING", newest_k8s: "RUNNING"})
    s.status_is({mine_slurm: "RUNNING"})
    picked = {helper: json.loads(cli(helper, "status", "--last", "--json").out)[0]["id"]
              for helper in ("tao_k8s.py", "tao_slurm.py", "tao_jobs.py")}
    assert picked == {"tao_k8s.py": newest_k8s, "tao_slurm.py": mine_slurm, "tao_jobs.py": newest_k8s}


@pytest.mark.parametrize("argv", [["status", "ID", "--last"], ["logs", "ID", "--last"], ["cancel", "ID", "--last"],
                                  ["cancel", "--all", "--last"], ["logs"]], ids=" ".join)
def test_last_with_ids_or_all_is_a_usage_error(world, helper, cli, argv):
    jid = world.record()
    out = cli(helper, *[jid if a == "ID" else a for a in argv])
    assert out.rc == 2 and len(out.err_lines) == 1, out
    assert records.load(jid)["state"] == "RUNNING" and world.fake.calls == []


def test_last_without_records_is_one_line_exit_1(world, helper, cli):
    out = cli(helper, "status", "--last")
    assert out.rc == 1 and len(out.err_lines) == 1 and "--last" in out.err and "no " in out.err, out
