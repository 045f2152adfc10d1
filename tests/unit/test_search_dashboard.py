"""``tao_jobs.py study ID --dashboard``: a real optuna-dashboard (0.21.0) serving a copy of a real study's journal
on 127.0.0.1, looked at in a real headless browser (Debian's chromium, driven by Selenium through Debian's
chromedriver: no browser download), and the copy refreshed while it serves."""
from __future__ import annotations

import math
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[2]
STUDY = "dino-sweep-dash"


def write_study(path: Path, n: int, start: int = 0) -> None:
    """``n`` trials of the stand-in's curve (fake.lr_optimum=0.001) told to the study in ``path``, ASHA pruning."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=JournalStorage(JournalFileBackend(str(path))), study_name=STUDY,
                                direction="minimize", load_if_exists=True,
                                sampler=optuna.samplers.RandomSampler(seed=start),
                                pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3))
    for i in range(start, start + n):
        t = study.ask({"train.optim.lr": optuna.distributions.FloatDistribution(1e-5, 1e-1, log=True)})
        t.set_user_attr("job_id", f"dino-train-{i}")
        values = []
        for e in range(4):
            values.append(0.4 + 0.25 * math.log10(t.params["train.optim.lr"] / 1e-3) ** 2 + 0.02 * (e - 2) ** 2)
            t.report(values[-1], e + 1)
            if t.should_prune():
                study.tell(t, state=optuna.trial.TrialState.PRUNED)
                break
        else:
            study.tell(t, min(values))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser():
    sys.path.insert(0, str(BANK))
    from testclusters import apt

    apt.ensure(("chromium", "chromium-driver"), "headless browser")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    yield driver
    driver.quit()


def page_text(driver, url: str, needle: str, timeout: float = 30) -> str:
    driver.get(url)
    end = time.time() + timeout
    while True:
        text = driver.find_element("tag name", "body").text
        if needle in text or time.time() > end:
            return text
        time.sleep(0.3)


def test_the_dashboard_shows_the_studys_trials_and_follows_the_journal(tmp_path, browser):
    source = tmp_path / "journal.log"
    write_study(source, 6)
    copy = tmp_path / "state" / "study-journal.log"
    port = free_port()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
            "from taobank.campaign.search import dashboard; src = Path(sys.argv[2]); "
            "dashboard.serve(Path(sys.argv[3]), src.read_text, int(sys.argv[4]), on_line=print, every=0.5)")
    server = subprocess.Popen([sys.executable, "-c", code, str(BANK / "scripts"), str(source), str(copy), str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        end = time.time() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None and time.time() < end, server.stdout.read() if server.stdout else ""
            time.sleep(0.2)
        home = page_text(browser, f"http://127.0.0.1:{port}/dashboard/", STUDY)
        assert STUDY in home, home
        text = page_text(browser, f"http://127.0.0.1:{port}/dashboard/studies/0/trials", "train.optim.lr")
        assert "6 Trials" in text and "Pruned" in text and "Complete" in text and "Best Trial" in text, text
        assert "train.optim.lr" in text and "job_id dino-train-0" in text, text
        write_study(source, 2, start=6)  # two more trials on the cluster: the copy follows
        text = page_text(browser, f"http://127.0.0.1:{port}/dashboard/studies/0/trials", "8 Trials")
        assert "8 Trials" in text, text
        assert copy.read_text() == source.read_text()
    finally:
        server.terminate()
        server.wait(30)


def test_the_dashboard_serves_this_machine_only_and_needs_its_package():
    from taobank.campaign.search import dashboard

    assert dashboard.HOST == "127.0.0.1"
    assert dashboard.dashboard_module().__version__ == dashboard.DASHBOARD_VERSION
