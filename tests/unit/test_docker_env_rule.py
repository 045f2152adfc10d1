"""One env rule on every platform: a credential-looking env name is refused by the same core check on Docker,
SLURM and Kubernetes, and the docker run argv goes through the bank's secret lint before the preview and the run
(a value pasted into env would otherwise show in ps and docker inspect)."""
from __future__ import annotations

import pytest

from taobank import envfile, records
from taobank.contract import Batch, SubmitOptions
from taobank.platforms.docker import render, submit
from taobank.platforms.docker.spec import typed
from taobank.errors import TaoError

TOKEN = "hf_abcdEFGHijklMNOPqrstUVWXyz012345"


def _docker_plan(**kw):
    spec = {"image": "nvcr.io/x/y:1", "command": ["echo", "hi"], "gpus": 0, "results_dir": "/data/results", **kw}
    return submit.plan_submit(typed(spec), SubmitOptions(), job_id="dino-train-abc123", env={}, ram=64 * 1024 ** 3)


def _core_error(env: dict) -> str:
    with pytest.raises(TaoError) as exc:
        envfile.check_job_env(env, {})
    return str(exc.value)


def test_a_credential_name_in_env_is_refused_by_the_core_rule_on_every_platform():
    from taobank.platforms.kubernetes.render import render_manifests
    from taobank.platforms.slurm import storage

    want = _core_error({"HF_TOKEN": "x"})
    with pytest.raises(TaoError) as docker:
        _docker_plan(env={"HF_TOKEN": "x"})
    with pytest.raises(TaoError) as slurm:
        storage.check_env({"HF_TOKEN": "x"})
    with pytest.raises(TaoError) as k8s:
        render_manifests({"image": "i", "command": "c", "env": {"HF_TOKEN": "x"}}, job_id="dino-train-abc123",
                         namespace="default")
    assert str(docker.value) == str(slurm.value) == str(k8s.value) == want


def test_the_names_the_bank_sets_are_reserved_on_docker():
    with pytest.raises(TaoError, match="RESULTS_DIR is set by the bank"):
        _docker_plan(env={"RESULTS_DIR": "/elsewhere"})
    with pytest.raises(TaoError, match="in both env and nccl_env"):
        _docker_plan(env={"NCCL_DEBUG": "INFO"}, nccl_env={"NCCL_DEBUG": "WARN"})


@pytest.mark.parametrize("where", ["env", "command"])
def test_a_secret_value_never_reaches_the_docker_argv(where):
    kw = {"env": {"MY_SETTING": TOKEN}} if where == "env" else {"command": ["echo", TOKEN]}
    with pytest.raises(TaoError) as exc:
        _docker_plan(**kw)
    assert "huggingface-token" in str(exc.value) and TOKEN not in str(exc.value) and "\n" not in str(exc.value)


def test_the_lint_passes_an_ordinary_argv():
    p = _docker_plan(env={"NCCL_DEBUG": "INFO", "WANDB_MODE": "offline"}, secrets=["WANDB_API_KEY"],
                     command=["dino", "train", "-e", "/data/specs/train.yaml", "results_dir=/results/x"])
    render.lint_argv(render.run_argv(p.run))


@pytest.mark.parametrize("flag", ["--env HF_TOKEN=" + TOKEN, "--env MY_SETTING=" + TOKEN])
def test_dry_run_and_submit_refuse_before_any_engine_call_or_record(fake, cli, tmp_path, flag):
    base = tmp_path / "results"
    base.mkdir()
    for extra in (["--dry-run"], []):
        out = cli("tao_docker.py", "submit", "--image", "nvcr.io/x/y:1", "--gpus", "0", "--results-dir", str(base),
                  *flag.split(), *extra, "--", "echo", "hi")
        assert out.rc == 1 and len(out.err_lines) == 1 and TOKEN not in out.out + out.err, out
    assert fake.calls == [] and records.list_records() == [] and list(base.iterdir()) == []


def test_launch_lints_the_argv_it_runs(tmp_path):
    """A plan changed after planning (a sweep trial, an adapter hook) is still linted right before the run."""
    import dataclasses

    p = _docker_plan(results_dir=str(tmp_path))
    p.run = dataclasses.replace(p.run, env=(("MY_SETTING", TOKEN),))
    with pytest.raises(TaoError, match="looks like a secret"):
        submit.launch([p], [{"id": p.job_id}], Batch())
    assert list(tmp_path.iterdir()) == []
