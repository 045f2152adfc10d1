"""The GPUs and nodes a job is given reach TAO's entrypoint as its own overrides, on every platform."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from taobank import taoargs
from taobank.errors import TaoError

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"


def dino(command, action="train", **extra):
    return {"network_arch": "dino", "action": action, "command": command, **extra}


def test_a_tao_command_gets_the_gpus_and_nodes_it_is_given():
    assert taoargs.with_gpu_args(dino(["dino", "train", "-e", "/s.yaml"]), 8, 1)["command"] == \
        ["dino", "train", "-e", "/s.yaml", "train.num_gpus=8"]
    assert taoargs.with_gpu_args(dino(["dino", "train", "-e", "/s.yaml"]), 4, 2)["command"][-2:] == \
        ["train.num_gpus=4", "train.num_nodes=2"]
    # shell text: quoted words at the end; Kubernetes argv in args
    assert taoargs.with_gpu_args(dino("dino train -e '/my specs/s.yaml'"), 2, 1)["command"] == \
        "dino train -e '/my specs/s.yaml' train.num_gpus=2"
    assert taoargs.with_gpu_args({"network_arch": "dino", "action": "evaluate", "args": ["dino", "evaluate"]},
                                 2, 1)["args"] == ["dino", "evaluate", "evaluate.num_gpus=2"]
    # distill reads its GPUs from train (TAO's entrypoint says so); a full path to the entrypoint is the same
    assert taoargs.gpu_args(dino(["/usr/local/bin/dino", "distill"], action="distill"), 2, 1) == ["train.num_gpus=2"]


@pytest.mark.parametrize("spec", [
    dino(["dino", "export", "-e", "/s.yaml"], action="export"),      # TAO runs export on one GPU
    dino(["python3", "train.py"]),                                   # not TAO's entrypoint
    dino("cd /w && dino train -e /s.yaml"),                          # shell text of several commands
    {"network_arch": "custom", "action": "run", "command": ["custom", "run"]},
    dino(["dino"]),
])
def test_other_commands_are_left_as_they_are(spec):
    assert taoargs.gpu_args(spec, 8, 2) == []
    assert taoargs.with_gpu_args(spec, 8, 2) == spec


def test_no_gpus_no_words():
    assert taoargs.gpu_args(dino(["dino", "train"]), 0, 1) == []


def test_the_commands_own_values_are_kept_when_they_agree_and_refused_when_not():
    agree = dino(["dino", "train", "train.num_gpus=2", "train.gpu_ids=[0,1]", "train.num_nodes=2"])
    assert taoargs.gpu_args(agree, 2, 2) == []
    assert taoargs.gpu_args(dino(["dino", "train", "num_gpus=2"]), 2, 1) == []  # TAO finds it by substring too
    assert taoargs.gpu_args(dino(["dino", "train", "train.gpu_ids=[0,1]"]), 2, 1) == ["train.num_gpus=2"]
    for words, gpus, nodes, named in [
        (["train.num_gpus=4"], 8, 1, "train.num_gpus=4"),
        (["train.gpu_ids=[0]"], 2, 1, "train.gpu_ids=[0]"),
        (["train.num_nodes=1"], 2, 2, "train.num_nodes=1"),
    ]:
        with pytest.raises(TaoError) as err:
            taoargs.gpu_args(dino(["dino", "train", *words]), gpus, nodes)
        line = str(err.value)
        assert named in line and "\n" not in line and ("--gpus-per-node" in line or "--nodes" in line)
    with pytest.raises(TaoError, match="not a whole number"):
        taoargs.gpu_args(dino(["dino", "train", "train.num_gpus=two"]), 2, 1)
    with pytest.raises(TaoError, match="not a list of GPU indices"):
        taoargs.gpu_args(dino(["dino", "train", "train.gpu_ids=[a]"]), 2, 1)


_word = hst.text(hst.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20).filter(
    lambda w: not any(k in w for k in taoargs.GPU_KEYS) and not set(w) <= set(";&|<>()"))


@settings(max_examples=200, deadline=None)
@given(words=hst.lists(_word, max_size=6), gpus=hst.integers(1, 16), nodes=hst.integers(1, 8),
       as_text=hst.booleans())
def test_any_command_keeps_its_words_and_gains_only_the_counts(words, gpus, nodes, as_text):
    argv = ["dino", "train", *words]
    spec = dino(shlex.join(argv) if as_text else argv)
    out = taoargs.with_gpu_args(spec, gpus, nodes)["command"]
    got = shlex.split(out) if as_text else out
    expected = [f"train.num_gpus={gpus}"] + ([f"train.num_nodes={nodes}"] if nodes > 1 else [])
    assert got == argv + expected


# ------------------------------------------------------------------ what each helper's dry run shows
def _dry_run(argv: list[str], tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TAO_", "KUBECONFIG"))}
    env.update(HOME=str(tmp_path), TAO_JOBS_DIR=str(tmp_path / "jobs"), TAO_DOCKER_RESULTS_DIR=str(tmp_path / "r"),
               SLURM_USER="me", SLURM_HOSTNAME="login.example", SLURM_PARTITION="gpu")
    r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=tmp_path,
                       stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("nodes", [1, 2])
def test_kubernetes_dry_run_carries_the_counts(nodes, tmp_path):
    import yaml

    out = _dry_run([str(SCRIPTS / "tao_k8s.py"), "submit", "--dry-run", "--image", IMAGE, "--network-arch", "dino",
                    "--action", "train", "--gpus-per-node", "2", "--nodes", str(nodes), "--no-results",
                    "--args-json", json.dumps(["dino", "train", "-e", "/specs/train.yaml"])], tmp_path)
    job = next(d for d in yaml.safe_load_all(out) if d and d.get("kind") == "Job")
    main = next(c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "main")
    words = " ".join(main.get("command", []) + main.get("args", []))
    assert "train.num_gpus=2" in words
    assert ("train.num_nodes=2" in words) == (nodes == 2)


@pytest.mark.parametrize("nodes", [1, 2])
def test_slurm_dry_run_carries_the_counts(nodes, tmp_path):
    out = _dry_run([str(SCRIPTS / "tao_slurm.py"), "submit", "--dry-run", "--image", IMAGE, "--network-arch",
                    "dino", "--action", "train", "--gpus-per-node", "2", "--nodes", str(nodes), "--",
                    "dino", "train", "-e", "/lustre/me/train.yaml"], tmp_path)
    srun = out[out.index("srun --nodes="):].split("\nrc=$?")[0]
    words = shlex.split(srun.replace("\\\n", " "))
    assert words[-2 if nodes == 2 else -1:] == \
        (["train.num_gpus=2", "train.num_nodes=2"] if nodes == 2 else ["train.num_gpus=2"])
    assert words.count("dino") == 1 and words[words.index("dino"):][:3] == ["dino", "train", "-e"]
    spec = words[words.index("-e") + 1]  # each node of a multi-node job reads its own copy (taobank.multinode)
    assert spec == "/lustre/me/train.yaml" if nodes == 1 else spec.startswith("/dev/shm/tao-node-specs-")
    assert "export SLURM_JOB_NAME=bash; unset SLURM_NTASKS" in out


def test_docker_dry_run_carries_the_count(tmp_path):
    out = _dry_run([str(SCRIPTS / "tao_docker.py"), "submit", "--dry-run", "--image", IMAGE, "--network-arch",
                    "dino", "--action", "train", "--gpus", "2", "--", "dino", "train", "-e", "/specs/train.yaml"],
                   tmp_path)
    assert shlex.split(out.strip().splitlines()[-1])[-5:] == ["dino", "train", "-e", "/specs/train.yaml",
                                                              "train.num_gpus=2"]


def test_shell_text_gets_words_only_where_they_reach_its_one_command():
    """A YAML block's trailing newline is dropped; a comment or a second line would swallow or strand the words."""
    assert taoargs.with_gpu_args(dino("dino train -e /s.yaml\n"), 2, 1)["command"] == \
        "dino train -e /s.yaml train.num_gpus=2"
    for text in ("dino train -e /s.yaml # 8 GPUs", "dino train -e /s.yaml\necho done"):
        with pytest.raises(TaoError, match="cannot be added to it safely: give the command as an argv list"):
            taoargs.append_args(dino(text), ["train.optim.lr=0.1"])
    with pytest.raises(TaoError, match="argv list"):
        taoargs.with_gpu_args(dino("dino train -e /s.yaml # note"), 2, 1)
    assert taoargs.gpu_args(dino("dino train -e /s.yaml\necho done"), 2, 1) == []  # which line is TAO's?


def test_a_tao_command_the_bank_cannot_add_to_gets_a_warning_line():
    for text in ("cd /w && dino train -e /s.yaml", "dino train -e /s.yaml\necho done", "FOO=1 /usr/bin/dino train"):
        line = taoargs.unseen_warning(dino(text))
        assert line and line.startswith("warning: ") and "train.num_gpus=N" in line, text
    for spec in (dino(["dino", "train"]), dino("cd /w && dino train train.num_gpus=2"), dino("python3 x.py"),
                 dino(["dino", "export"], action="export")):
        assert taoargs.unseen_warning(spec) is None, spec
