"""A search whose study lives in PostgreSQL (``submit --search --study-storage-env NAME``): the REAL database
(Debian's ``postgresql``, started on 127.0.0.1 with password authentication by testclusters/postgres.py), the
real Optuna, SQLAlchemy and pg8000. The URL holds a password: it is taken by NAME only, and these tests hold that
it appears nowhere - on a command line, in a manifest, a record, a staged file or a printed line - for any URL.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings as hsettings, strategies as st

from taobank import records
from taobank.campaign import sweeps
from taobank.contract import SubmitOptions
from taobank.errors import TaoError, UsageError
from taobank.campaign.search import bundle, journal, settings, space, storage, trial

BANK = Path(__file__).resolve().parents[2]
TRAINER = BANK / "testclusters" / "fake_tao_train.sh"
LR = "train.optim.lr=loguniform(1e-5,1e-1)"
NAME = "TAO_STUDY_DB"


@pytest.fixture(scope="module")
def database():
    from testclusters import postgres

    with postgres.running() as db:
        yield db


def staging(**kw) -> bundle.Staging:
    return bundle.Staging(settings.make("", sampler="tpe", pruner=kw.pop("pruner", "asha"), trials=3, kpi="val_loss",
                                        mode=None, space=space.from_flags([LR]), storage_env=NAME, **kw))


def _pieces(secret: str, n: int = 8) -> set[str]:
    return {secret[i:i + n] for i in range(max(1, len(secret) - n + 1))}


def assert_hidden(text: str, password: str) -> None:
    assert password not in text and not [p for p in _pieces(password) if p in text], text[-2000:]


# ------------------------------------------------------------------ the study in the database, from the bundle
def test_trials_from_the_bundle_share_the_database_and_tao_never_sees_its_url(database, tmp_path, monkeypatch):
    """Two trials as a platform runs them (``python3 -I search.pyz``, the database's libraries unpacked from the
    staged parts), one study in PostgreSQL; the study read back from the database; TAO's environment lacks the
    variable; nothing printed shows the password."""
    monkeypatch.setenv(NAME, database.url)
    st_ = staging(pruner="none", action="train")
    st_.settings.poll_seconds = 0.2
    folder = tmp_path / "search"
    folder.mkdir()
    for name, data in st_.files("sweep-db1").items():
        (folder / name).write_bytes(data)
    assert sorted(p.name for p in folder.glob("search-db-*.zip")) and (folder / "search.pyz").exists()
    assert NAME in (folder / "study.json").read_text()
    assert_hidden((folder / "study.json").read_text(), database.password)
    assert st_.prepare("sweep-db1").startswith(f"study database ${NAME} reached")
    for i in range(2):
        results = tmp_path / f"r{i}"
        results.mkdir()
        proc = subprocess.run(
            [sys.executable, "-I", str(folder / "search.pyz"), "--settings", str(folder / "study.json"), "--trial",
             str(i), "--", "sh", "-c", f'env > {results}/env.txt; exec sh {TRAINER} --results "$RESULTS_DIR" '
             '--epochs 2 "$@"', "tao", "-e", "x", "fake.lr_optimum=0.001"],
            capture_output=True, text=True, timeout=180,
            env={"PATH": "/usr/bin:/bin", "RESULTS_DIR": str(results), "TAO_API_JOB_ID": f"job-{i}", NAME: database.url})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"tao-search: trial {i} COMPLETE" in proc.stdout
        assert_hidden(proc.stdout + proc.stderr, database.password)
        env = (results / "env.txt").read_text()
        assert f"{NAME}=" not in env and database.password not in env  # TAO's process never sees it
    assert not (folder / "journal.log").exists()  # nothing went to a journal file
    for url, rc, says in ((database.url, 0, f"study database ${NAME} reached"),
                          (database.url.replace(database.password, "Wr0ngPassw0rdForCheck"), 3,
                           "password authentication failed")):  # the submit's check from a trial's place
        proc = subprocess.run([sys.executable, "-I", str(folder / "search.pyz"), "--settings",
                               str(folder / "study.json"), "--check-storage"], capture_output=True, text=True,
                              timeout=120, env={"PATH": "/usr/bin:/bin", NAME: url})
        assert proc.returncode == rc and says in proc.stdout, proc.stdout + proc.stderr
        assert_hidden(proc.stdout + proc.stderr, "Wr0ngPassw0rdForCheck")
        assert_hidden(proc.stdout + proc.stderr, database.password)
    found = journal.read_database(NAME, "sweep-db1")
    assert sorted(t.job_id for t in found.trials) == ["job-0", "job-1"]
    assert {t.state for t in found.trials} == {"COMPLETE"} and found.best is not None
    with pytest.raises(TaoError, match="holds a study sweep-db1 already") as err:  # the study name is the sweep's
        st_.prepare("sweep-db1")
    assert "\n" not in str(err.value)


def test_a_trial_waits_out_a_stalled_database_and_its_study_loses_nothing(database, tmp_path, monkeypatch):
    """The server frozen (every process stopped, as a host stalled under load) while the trial reports its epochs:
    each call times out, the runner says so and retries, TAO runs on; the server goes on and the trial ends
    COMPLETE with every epoch in the study."""
    monkeypatch.setenv(NAME, database.url)
    st_ = staging(pruner="none", action="train")
    st_.settings.poll_seconds, st_.settings.db_timeout_seconds = 0.2, 2.0
    folder = tmp_path / "search"
    folder.mkdir()
    for name, data in st_.files("sweep-stall").items():
        (folder / name).write_bytes(data)
    st_.prepare("sweep-stall")
    results = tmp_path / "r"
    results.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-I", str(folder / "search.pyz"), "--settings", str(folder / "study.json"), "--trial", "0",
         "--", "sh", str(TRAINER), "--results", str(results), "--epochs", "4", "--sleep", "1", "-e", "x",
         "fake.lr_optimum=0.001"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={"PATH": "/usr/bin:/bin", "RESULTS_DIR": str(results), "TAO_API_JOB_ID": "job-stall", NAME: database.url})
    assert proc.stdout is not None
    said = [proc.stdout.readline()]
    assert "trial 0 of study sweep-stall" in said[0], said  # asked: TAO starts now
    with database.stalled():
        time.sleep(7)
    out, _ = proc.communicate(timeout=180)
    said.append(out)
    text = "".join(said)
    assert proc.returncode == 0, text
    assert f"the study database in ${NAME} did not answer" in text and "trying again in" in text, text
    assert "tao-search: trial 0 COMPLETE" in text, text
    assert_hidden(text, database.password)
    (t,) = journal.read_database(NAME, "sweep-stall").trials
    assert t.state == "COMPLETE" and t.job_id == "job-stall" and t.epochs == 4, t


def test_a_database_that_cannot_be_used_is_one_line_without_its_password(database, monkeypatch):
    wrong = database.url.replace(database.password, "Wr0ngPassw0rdForTheTestOnly")
    monkeypatch.setenv(NAME, wrong)
    with pytest.raises(TaoError, match="password authentication failed") as err:
        storage.check_reachable(NAME)
    assert_hidden(str(err.value), "Wr0ngPassw0rdForTheTestOnly")
    assert "\n" not in str(err.value) and f"${NAME}" in str(err.value)
    closed = database.url.replace(f":{database.port}/", ":1/")
    monkeypatch.setenv(NAME, closed)
    with pytest.raises(TaoError, match="cannot be used") as err:
        staging().prepare("sweep-x")
    assert_hidden(str(err.value), database.password)
    monkeypatch.delenv(NAME)
    with pytest.raises(TaoError, match=f"{NAME} is not set in the environment"):
        staging().prepare("sweep-x")


def test_a_submit_creates_the_study_before_any_record_and_reads_it_back_from_the_database(database, docker_fake,
                                                                                          monkeypatch, tmp_path):
    """Docker on the fake engine, the database real: the gate says the study was created; each trial's container
    gets the variable by NAME (``--env TAO_STUDY_DB``: the engine reads the value from this environment); the
    records name the variable; ``sweeps.study`` reads the database."""
    from fakeproc import ok
    from test_docker_campaigns import SPEC, Engine

    monkeypatch.setenv(NAME, database.url)
    docker_fake.on("python3", lambda c: c.argv[1:4] == ["-m", "taobank", "supervise"], ok("4242\n"))
    engine = Engine(docker_fake)
    engine.fake.on("docker", lambda c: c.argv[1] == "run" and "--rm" in c.argv, ok(""))
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{}, {}], 2, search=staging())
    assert f"study database ${NAME} reached from here: study {done.sweep} created" in done.gate
    for view in done.views:
        argv = engine.containers[view.id]["argv"]
        assert ["--env", NAME] == argv[argv.index(NAME) - 1:argv.index(NAME) + 1]
        assert records.load(view.id)["backend"]["search_storage_env"] == NAME
    assert f"study database ${NAME} reached from a trial's container" in done.gate
    (probe,) = [c.argv for c in docker_fake.calls if c.program == "docker" and "--check-storage" in c.argv]
    assert ["--env", NAME] == probe[probe.index(NAME) - 1:probe.index(NAME) + 1]
    assert sweeps.study(done.sweep).trials == []  # from the database: no trial has asked yet
    seen = json.dumps([c.argv for c in docker_fake.calls]) + "".join(p.read_text() for p in
                                                                     (tmp_path / "state").glob("*.json"))
    assert_hidden(seen, database.password)
    # the dashboard serves the study from the database itself (the real optuna-dashboard, its JSON API)
    import os
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(BANK / "scripts" / "tao_jobs.py"), "study", done.sweep,
                               "--dashboard", "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "TAO_STATE_DIR": str(tmp_path / "state")})
    try:
        end = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5) as page:
                    studies = json.loads(page.read())["study_summaries"]
                break
            except OSError:
                assert server.poll() is None and time.time() < end, server.stderr.read() if server.stderr else ""
                time.sleep(0.5)
        assert done.sweep in [s["study_name"] for s in studies]
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert f"serving the study database in ${NAME} on http://127.0.0.1:{port}/" in err
    assert_hidden(err, database.password)


def test_a_database_a_trials_container_cannot_reach_is_refused_in_one_line_before_anything(docker_fake, monkeypatch,
                                                                                          tmp_path, state_dir):
    from fakeproc import ok
    from test_docker_campaigns import SPEC, Engine

    monkeypatch.setenv(NAME, "postgresql://tao:NotReachedPassw0rd@10.9.9.9:5432/db")
    engine = Engine(docker_fake)
    said = f"tao-search: the study database in ${NAME} cannot be used (InterfaceError: Can't create a connection)\n"
    engine.fake.on("docker", lambda c: c.argv[1] == "run" and "--rm" in c.argv, ok(""))
    engine.fake.on("docker", lambda c: c.argv[1] == "run" and "--check-storage" in c.argv, ok(said, rc=3))
    with pytest.raises(TaoError, match="a trial's container cannot reach its study database") as err:
        sweeps.submit("docker", SPEC, SubmitOptions(), [{}, {}], 2, search=staging())
    assert "\n" not in str(err.value) and "--network host" in str(err.value)
    assert not engine.containers and not list(state_dir.glob("*.json"))
    assert_hidden(str(err.value), "NotReachedPassw0rd")


# ------------------------------------------------------------------ the URL appears nowhere, for any URL
PASSWORDS = st.text(st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters="@/'\"\\"),
                    min_size=10, max_size=40).filter(lambda p: re.search(r"[A-Za-z]", p) is not None)


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(password=PASSWORDS, user=st.sampled_from(["tao", "u", "optuna_user"]),
       scheme=st.sampled_from(["postgresql", "postgres", "postgresql+pg8000", "mysql", "http", ""]))
def test_no_line_about_a_database_shows_its_url_or_password(password, user, scheme):
    def lines(pw: str) -> list[str]:
        url = f"{scheme}://{user}:{pw}@db.example:5432/studies" if scheme else f"{user}:{pw}"
        out = []
        try:
            checked = storage.checked_url(url, NAME)
            assert checked.startswith("postgresql+pg8000://")
        except UsageError as exc:
            out.append(str(exc))
            checked = url
        for said in (f"cannot connect to {url}", f"auth failed for {checked}", f"secret {pw} refused",
                     f"'M': 'bad {pw}'"):
            out.append(storage.failure_line(RuntimeError(said), url, NAME))
            out.append(storage.scrub(said, url))
        for bad in (url, f"postgresql://{user}:{pw}@h/db"):
            with pytest.raises(TaoError) as err:
                storage.check_name(bad)
            out.append(str(err.value))
        return out

    # a piece of the password that the line holds with any other password is the line's own wording
    for line, neutral in zip(lines(password), lines("~" * len(password))):
        assert "\n" not in line
        assert password not in line, line
        assert not [p for p in _pieces(password) if p in line and p not in neutral], line


@hsettings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(password=PASSWORDS)
@example(password="00stgresql")  # shares "stgresql" with the refusal's own example URL
def test_a_search_dry_run_on_every_platform_shows_the_name_never_the_url(password, cli, monkeypatch, tmp_path_factory):
    """Each helper's dry run (it contacts nothing) of a database study, the URL set in the environment: the output
    names the variable, never its value; the URL on the command line is refused unseen."""
    password = "Zq7" + password

    def outputs(pw: str) -> list[str]:
        tmp = tmp_path_factory.mktemp("dry")
        monkeypatch.setenv("TAO_STATE_DIR", str(tmp / "state"))
        monkeypatch.setenv("TAO_DOCKER_RESULTS_DIR", str(tmp / "results"))
        url = f"postgresql://tao:{pw}@db.example:5432/studies"
        monkeypatch.setenv(NAME, url)
        search = ["--search", "tpe", "--trials", "2", "--kpi", "val_loss", "--space", LR, "--study-storage-env", NAME,
                  "--dry-run"]
        spec = tmp / "job.yaml"
        spec.write_text("image: x:1\ncommand: sh train.sh\ngpus: 0\nmounts:\n- {pvc: ws, mount_path: "
                        "/results}\n")
        runs = [("tao_docker.py", "submit", "--image", "x:1", "--gpus", "0", *search, "--", "sh", "train.sh"),
                ("tao_slurm.py", "submit", "--image", "x:1", "--network-arch", "dino", "--action", "train", *search,
                 "--", "sh", "train.sh"),
                ("tao_k8s.py", "submit", "--spec", str(spec), *search)]
        out = []
        for helper, *argv in runs:
            got = cli(helper, *argv)
            assert got.rc == 0, (helper, got)
            assert NAME in got.out
            out.append(got.out + got.err)
        got = cli("tao_docker.py", "submit", "--image", "x:1", "--search", "tpe", "--trials", "2", "--study-storage",
                  url, "--", "sh", "train.sh")
        assert got.rc != 0 and "it is not shown" in got.err
        return [*out, got.out + got.err]

    # a piece of the password that the output holds with any other password is the output's own wording
    for text, neutral in zip(outputs(password), outputs("~" * len(password))):
        assert password not in text, text[-2000:]
        assert not [p for p in _pieces(password) if p in text and p not in neutral], text[-2000:]


def test_the_staged_libraries_are_the_pinned_ones_and_each_part_fits_a_configmap():
    """requirements-dev.txt pins what the parts carry (one list: storage.DB_DISTRIBUTIONS); each part fits a
    Kubernetes ConfigMap beside nothing else; the parts carry no compiled file and no test suite."""
    import io
    import zipfile

    pins = dict(line.split("==", 1) for line in (BANK / "requirements-dev.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    for name, version in storage.DB_DISTRIBUTIONS.items():
        assert pins.get(name) == version, name
    parts = bundle.db_parts()
    names = [n for p in parts for n in zipfile.ZipFile(io.BytesIO(p)).namelist()]
    assert all(len(p) <= bundle.PART_BYTES for p in parts) and len(parts) >= 2
    assert "pg8000/native.py" in names and "sqlalchemy/dialects/postgresql/pg8000.py" in names
    assert "alembic/runtime/migration.py" in names and "scramp-1.5.0.dist-info/METADATA" in names
    assert not [n for n in names if n.endswith((".so", ".pyc", ".pyd")) or n.startswith(storage.DB_LEFT_OUT)]


def test_a_dry_run_check_reaches_the_database_from_here_and_writes_nothing(database, docker_fake, monkeypatch):
    from fakeproc import ok
    from test_docker_campaigns import SPEC, Engine

    Engine(docker_fake).fake.on("docker", lambda c: c.argv[1] == "run" and "--rm" in c.argv, ok(""))
    monkeypatch.setenv(NAME, database.url)
    shown = sweeps.preview("docker", SPEC, SubmitOptions(), [{}, {}], 2, search=staging(), check=True)
    assert f"study database ${NAME} reached from here (its trials must reach it too)" in shown.text()
    with pytest.raises(TaoError, match="holds no study"):  # nothing was created in it
        journal.read_database(NAME, sweeps.PREVIEW_SWEEP)
    monkeypatch.delenv(NAME)
    shown = sweeps.preview("docker", SPEC, SubmitOptions(), [{}, {}], 2, search=staging(), check=True)
    assert f"study database ${NAME} not checked: {NAME} is not set here" in shown.text()


def test_a_continued_trial_of_a_database_study_does_not_carry_the_study_s_url(state_dir):
    """The study's variable was the trial runner's; the continued job is a plain job outside the study, whose TAO
    must never get the URL (Docker/SLURM keep it in the spec's secrets, Kubernetes in secret_env)."""
    from taobank.campaign import lineage

    rec = records.Record.of(records.open_record("docker", "img", "dino", "train", "A", "/r/{id}",
                                                backend={"search_storage_env": NAME}))
    spec = {"image": "img", "secrets": ["HF_TOKEN", NAME], "command": ["dino", "train"]}
    kept, options = lineage._without_study_secret(rec, spec, {"secret_env": [NAME, "NGC_KEY"], "namespace": "n"})
    assert kept["secrets"] == ["HF_TOKEN"] and options == {"secret_env": ["NGC_KEY"], "namespace": "n"}
    kept, _ = lineage._without_study_secret(rec, {"image": "img", "secrets": [NAME]}, {})
    assert "secrets" not in kept
    plain = records.Record.of(records.open_record("docker", "img", "dino", "train", "A", "/r/{id}"))
    assert lineage._without_study_secret(plain, spec, {"secret_env": [NAME]}) == (spec, {"secret_env": [NAME]})


# ------------------------------------------------------------------ patience with a database that does not answer
class _Clock:
    def __init__(self) -> None:
        self.now, self.slept = 0.0, []

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def _patience(storage_env: str = NAME, patience: float = 60.0) -> tuple[trial.Patience, _Clock]:
    s = staging(pruner="none").settings
    s.storage_env, s.db_patience_seconds = storage_env, patience
    clock = _Clock()
    return trial.Patience(s, clock.sleep, lambda: clock.now), clock


def test_patience_retries_a_database_that_does_not_answer_then_gives_up_with_the_last_error(capsys):
    p, clock = _patience(patience=20)
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError("timed out")
        return "ok"

    assert p("reporting epoch 1", flaky) == "ok" and clock.slept == [1.0, 2.0]
    assert capsys.readouterr().out.count(f"the study database in ${NAME} did not answer (reporting epoch 1: "
                                         "TimeoutError); trying again in") == 2

    def down() -> None:
        raise ConnectionRefusedError("refused")

    with pytest.raises(ConnectionRefusedError):
        p("telling the trial's end", down)
    assert sum(clock.slept[2:]) <= 20  # gave up inside its patience


def test_patience_never_retries_a_wrong_call_nor_a_journal_study():
    p, clock = _patience()
    with pytest.raises(ValueError):
        p("reporting", lambda: (_ for _ in ()).throw(ValueError("bad value")))
    assert clock.slept == []
    p, clock = _patience(storage_env="")
    with pytest.raises(TimeoutError):  # a journal is a local file: a failure is not a wait
        p("reporting", lambda: (_ for _ in ()).throw(TimeoutError("timed out")))
    assert clock.slept == []


def test_a_failure_wrapped_by_the_database_libraries_counts_by_what_it_came_from():
    try:
        try:
            raise TimeoutError("timed out")
        except TimeoutError:
            raise TaoError("the study database cannot be read") from None
    except TaoError as exc:
        assert trial.unanswered(exc)  # the context, not the wrapper
    assert not trial.unanswered(TaoError("password authentication failed"))
    assert trial.unanswered(type("OperationalError", (Exception,), {})("server closed the connection"))
