"""A byte that is not UTF-8 in one trial's status.json (and a file name that is not UTF-8 in its results) stops
nothing, on the real Docker engine: the sweep's detached supervisor finishes every trial with nobody polling, and
status, status --sweep, metrics, artifacts and cancel --sweep answer as for any other trial."""
from __future__ import annotations

import json
import time

import pytest

from docker_support import BANK, Docker

pytestmark = pytest.mark.e2e

FAKE = f"{BANK / 'testclusters'}:/fake"
#: trial 0 (fake.best_val=300) trains as every trial does, then appends a Latin-1 "café" line to its status.json
#: and leaves a file named with a 0xff byte: its last look (the one that ends it) reads them
TRAIN = ('sh /fake/fake_tao_train.sh --results "$RESULTS_DIR" --epochs "$EPOCHS" --sleep "$SLEEP" "$@"; rc=$?; '
         'case "$*" in *best_val=300*) '
         'printf \'{"status": "RUNNING", "verbosity": "INFO", "message": "caf\\351"}\\n\' '
         '>> "$RESULTS_DIR/train/status.json" && : > "$(printf \'%s/odd_\\377.txt\' "$RESULTS_DIR/train")";; esac; '
         'exit $rc')


@pytest.fixture()
def dk(docker_cluster, tmp_path) -> Docker:
    return Docker(docker_cluster, tmp_path)


def _clean(res) -> str:
    text = res.stdout + res.stderr
    assert res.returncode == 0, (res.args, text)
    assert "Traceback" not in text and "UTF-8" not in text and "\x1b" not in text, text
    return text


def test_a_sweep_with_a_latin1_status_file_finishes_every_trial_with_nobody_polling(dk):
    done = json.loads(dk.ok("submit", "--json", "--image", dk.image, "--gpus", "0", "--network-arch", "dino",
                            "--action", "train", "--mount", FAKE, "--env", "EPOCHS=2", "--env", "SLEEP=1",
                            "--sweep", "fake.best_val=300,200,400", "--max-concurrent", "1",
                            "--", "sh", "-c", TRAIN, "tao").stdout)
    ids = [j["id"] for j in done["jobs"]]
    state = dk.tmp / "state"
    log = state / f"{ids[0]}.d" / "sweep-supervisor.log"

    def stored(jid: str) -> str:  # the record file itself: reading it calls nothing
        return json.loads((state / f"{jid}.json").read_text())["state"]

    end = time.time() + 150
    while not all(stored(j) == "COMPLETE" for j in ids):
        assert not any(stored(j) in ("ERROR", "CANCELED", "UNKNOWN") for j in ids), [stored(j) for j in ids]
        assert time.time() < end, ([stored(j) for j in ids], log.read_text(errors="replace") if log.exists() else "")
        time.sleep(1)
    raw = (dk.results / ids[0] / "train" / "status.json").read_bytes()
    assert raw.endswith(b'{"status": "RUNNING", "verbosity": "INFO", "message": "caf\xe9"}\n')  # the byte is there
    assert (dk.results / ids[0] / "train").joinpath(b"odd_\xff.txt".decode("utf-8", "surrogateescape")).exists()
    end = time.time() + 30
    while "every trial has ended" not in log.read_text(errors="replace"):
        assert time.time() < end, log.read_text(errors="replace")
        time.sleep(0.5)
    assert "Traceback" not in log.read_text(errors="replace")

    # every verb answers for the damaged trial and the others alike
    res = dk.tao("status", "--sweep", done["sweep"], "--json")
    _clean(res)
    rows = json.loads(res.stdout)
    assert [r["state"] for r in rows] == ["COMPLETE"] * 3
    assert rows[0]["progress"] == "2/2", rows[0]  # its progress read past the Latin-1 line
    _clean(dk.tao("status", ids[0]))
    _clean(dk.run("tao_jobs.py", "status"))
    _clean(dk.run("tao_jobs.py", "metrics", ids[0]))
    listing = _clean(dk.run("tao_jobs.py", "artifacts", ids[0]))
    assert "odd_\\xff.txt" in listing  # the byte shown escaped
    _clean(dk.run("tao_jobs.py", "cancel", "--sweep", done["sweep"]))
