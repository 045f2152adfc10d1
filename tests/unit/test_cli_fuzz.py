"""Any argv, any record store: every helper ends with exit 0/1/2 and at most one error line, never a traceback.

Processes are answered by a stand-in that refuses everything (no cluster is
needed: the point is the helpers' own handling of hostile input).
"""
from __future__ import annotations

import importlib
import time

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from taobank import records, run
from taobank.cli.entry import run_main

HELPERS = ["tao_jobs", "tao_job_record", "tao_k8s", "tao_slurm", "render_sbatch", "render_k8s_job",
           "stage_files", "redact_secrets", "resolve_versions_key"]
VERBS = ["status", "logs", "cancel", "submit", "list", "show", "mark", "open", "resume", "dir", "lint", "redact",
         "preflight", "nccl-probe", "enroot-credentials"]
FLAGS = ["--json", "--watch", "--interval", "--tail", "--lines", "--all", "--dry-run", "--quiet", "--name",
         "--job-id", "--spec", "--image", "--command", "-f", "--no-retry", "--env", "--secret-env", "--secret",
         "--state", "--platform", "--meta", "--results-dir", "--request", "--config-file", "--list", "--src", "--dest",
         "--registry", "--no-headers", "--version", "--", "-q", "--nodes", "--gpus-per-node"]
ODD = ["0", "-1", "1e309", "nan", "/", "/tmp", "/dev/null", ".", "..", "a=b", "=", "--", "-", "\udcff", "x\ny",
       "é", "k8s", "slurm", "PENDING", "dino-train-aaaaaaaa", "--all-namespaces", "' ; rm -rf /", "x" * 300]

words = st.one_of(st.sampled_from(VERBS), st.sampled_from(FLAGS), st.sampled_from(ODD),
                  st.text(max_size=12))


def _refuse(argv, stdin):
    return run.Result(list(argv), 1, "", "error: refused by the test stand-in")


@pytest.fixture()
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SLURM_USER", "u")
    monkeypatch.setenv("SLURM_HOSTNAME", "login.invalid")
    monkeypatch.setenv("TAO_SSH_CONTROL_DIR", str(tmp_path / "ssh"))
    monkeypatch.setattr(time, "sleep", lambda s: None)
    for platform in ("kubernetes", "slurm"):
        rec = records.open_record(platform, "img", "dino", "train", "A", "/r")
        records.mark(rec["id"], "RUNNING", backend_ref="ns/x" if platform == "kubernetes" else "slurm:7",
                     backend={"slurm_job_id": "7"} if platform == "slurm" else {"namespace": "ns", "name": "x"})
    (tmp_path / "state" / "junk-job.json").write_text("[]")
    return tmp_path


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(helper=st.sampled_from(HELPERS), verb=st.sampled_from(VERBS + [""]), argv=st.lists(words, max_size=7))
@example(helper="redact_secrets", verb="lint", argv=["\x00"])  # a NUL in a path once ended in a ValueError
def test_any_argv_ends_cleanly(store, capsys, helper, verb, argv):
    argv = ([verb] if verb else []) + argv  # mostly a real verb first, so the verbs' own code runs
    main = importlib.import_module(helper).main
    capsys.readouterr()
    with run.fake_processes(_refuse):
        with pytest.raises(SystemExit) as exc:
            run_main(main, argv)
    err = capsys.readouterr().err
    code = exc.value.code or 0
    assert code in (0, 1, 2), (helper, argv, code, err)
    assert "Traceback" not in err, (helper, argv, err)
    if code:
        errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert len(errors) >= 1 or code == 2, (helper, argv, err)
