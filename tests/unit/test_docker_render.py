"""The docker run argv is a pure function of the plan: every value its own element, the command after the
image, secrets by name only, GPUs in the engine's own form."""
from __future__ import annotations

import pytest
from hypothesis import example, given, settings, strategies as st

from taobank.contract import SubmitOptions
from taobank.errors import TaoError
from taobank.platforms.docker import render, submit
from taobank.platforms.docker.spec import typed
from taobank.platforms.docker.spec import DockerSpec


def spec(**kw):
    return {"image": "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt", "command": ["python", "train.py"], "gpus": 0,
            "results_dir": "/data/results", **kw}


def plan(**kw):
    return submit.plan_submit(typed(spec(**kw)), SubmitOptions(), job_id="dino-train-abc123", env={}, ram=64 * 1024 ** 3)


def test_the_command_follows_the_image_and_the_folder_is_the_jobs_own():
    p = plan(command="echo hi; exit 3")
    argv = render.run_argv(p.run)
    i = argv.index("nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt")
    assert argv[i + 1:] == ["sh", "-c", "echo hi; exit 3"]
    assert argv[:5] == ["run", "--detach", "--name", "dino-train-abc123", "--init"]
    assert "type=bind,source=/data/results/dino-train-abc123,target=/results/dino-train-abc123" in argv
    assert p.results_dir == "/data/results/dino-train-abc123"
    assert "org.tao-skill-bank.job-id=dino-train-abc123" in argv


def test_results_are_written_as_the_caller(monkeypatch):
    monkeypatch.setattr("os.getuid", lambda: 1234)
    monkeypatch.setattr("os.getgid", lambda: 99)
    argv = render.run_argv(plan().run)
    assert argv[argv.index("--user") + 1] == "1234:99"


def test_gpus_in_each_engines_form():
    assert render.gpu_args("docker", 2) == ["--gpus", "2"]
    assert render.gpu_args("docker", "all") == ["--gpus", "all"]
    assert render.gpu_args("docker", ["0", "2"]) == ["--gpus", '"device=0,2"']
    assert render.gpu_args("podman", 2) == ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"]
    assert render.gpu_args("podman", "all") == ["--device", "nvidia.com/gpu=all"]
    assert render.gpu_args("docker", 0) == []


def test_shm_default_is_pinned_and_capped_at_half_the_ram():
    assert submit.shm_size(DockerSpec(), 64 * 1024 ** 3) == "16g"
    assert submit.shm_size(DockerSpec(), 8 * 1024 ** 3) == "4096m"
    assert submit.shm_size(DockerSpec(shm_size="2g"), 8 * 1024 ** 3) == "2g"
    assert submit.shm_size(DockerSpec(ipc_host=True), 8 * 1024 ** 3) is None
    argv = render.run_argv(plan(ipc_host=True).run)
    assert argv[argv.index("--ipc") + 1] == "host" and "--shm-size" not in argv


def test_memory_limit_has_no_swap_and_secrets_go_by_name(monkeypatch):
    argv = render.run_argv(plan(memory="32g", secrets=["WANDB_API_KEY"], env={"A": "1"}).run)
    assert argv[argv.index("--memory") + 1] == "32g" and argv[argv.index("--memory-swap") + 1] == "32g"
    assert "WANDB_API_KEY" in argv and not any(a.startswith("WANDB_API_KEY=") for a in argv)
    assert "A=1" in argv


def test_data_mounts_are_read_only_unless_asked():
    argv = render.run_argv(plan(mounts=[{"host": "/data/coco", "container": "/data"},
                                        {"host": "/scratch", "container": "/scratch", "read_only": False}]).run)
    assert "type=bind,source=/data/coco,target=/data,readonly" in argv
    assert "type=bind,source=/scratch,target=/scratch" in argv


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@example(cmd=["0"], env={"A": "--user"})
@given(cmd=st.lists(_TEXT, min_size=1, max_size=5), env=st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,10}", fullmatch=True), _TEXT, max_size=4))
def test_user_values_never_become_engine_options(cmd, env):
    """Whatever the command and env hold, the argv before the image is the bank's own words and pairs (or the
    job is refused in one line: a credential-looking name or value, a name the bank sets itself)."""
    from taobank.errors import TaoError

    try:
        p = plan(command=cmd, env=env)
    except TaoError as exc:
        assert "\n" not in str(exc) and ("credential" in str(exc) or "secret" in str(exc) or "set by the bank" in str(exc))
        return
    argv = render.run_argv(p.run)
    i = argv.index(p.image)
    assert argv[i + 1:] == cmd
    head = argv[:i]
    # an env value that spells one of the bank's own options ("--user") is still only the VALUE of a KEY=VALUE:
    # the option words are exactly those of the same job with plain values
    same = render.run_argv(plan(command=cmd, env=dict.fromkeys(env, "v")).run)
    assert [a for a in head if a.startswith("-")] == [a for a in same[:same.index(p.image)] if a.startswith("-")]
    assert all(a.startswith("--") or head[k - 1].startswith("--") or k < 2 for k, a in enumerate(head))


@settings(max_examples=200, deadline=None)
@given(host=st.text(min_size=1, max_size=40), target=st.text(min_size=1, max_size=40))
def test_a_mount_reaches_argv_only_as_a_validated_absolute_path(host, target):
    """Whatever a spec's mount holds, it is refused in one line or becomes one --mount of safe characters."""
    from taobank.errors import TaoError

    try:
        p = plan(mounts=[{"host": host, "container": target}])
    except TaoError as exc:
        assert "\n" not in str(exc)
        return
    (src, dst, ro) = p.run.mounts[0]
    for path in (src, dst):
        assert path.startswith("/") and not set(path) & set(",= \n\"'") and ".." not in path.split("/")
    argv = render.run_argv(p.run)
    assert f"type=bind,source={src},target={dst},readonly" in argv


@pytest.mark.parametrize("cpus", [float("nan"), float("inf"), 1e-300, 0.001, 0, -1, 1025])
def test_cpus_must_be_a_sensible_finite_number(cpus):
    """Issue 38 item 9: ``cpus: .nan`` and ``1e-300`` passed the schema and reached ``--cpus``."""
    from taobank.platforms.docker import spec as dspec

    with pytest.raises(TaoError, match="cpus") as err:
        dspec.validate({"image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "command": ["x"], "cpus": cpus})
    assert "\n" not in str(err.value)
    assert dspec.validate({"image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "command": ["x"], "cpus": 0.5})
