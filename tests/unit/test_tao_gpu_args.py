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

from taobank import tao_command
from taobank.errors import TaoError

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"


def dino(command, action="train", **extra):
    return {"network_arch": "dino", "action": action, "command": command, **extra}


def test_a_tao_command_gets_the_gpus_and_nodes_it_is_given():
    assert tao_command.with_gpu_args(dino(["dino", "train", "-e", "/s.yaml"]), 8, 1)["command"] == \
        ["dino", "train", "-e", "/s.yaml", "train.num_gpus=8"]
    assert tao_command.with_gpu_args(dino(["dino", "train", "-e", "/s.yaml"]), 4, 2)["command"][-2:] == \
        ["train.num_gpus=4", "train.num_nodes=2"]
    # shell text: quoted words at the end; Kubernetes argv in args
    assert tao_command.with_gpu_args(dino("dino train -e '/my specs/s.yaml'"), 2, 1)["command"] == \
        "dino train -e '/my specs/s.yaml' train.num_gpus=2"
    assert tao_command.with_gpu_args({"network_arch": "dino", "action": "evaluate", "args": ["dino", "evaluate"]},
                                 2, 1)["args"] == ["dino", "evaluate", "evaluate.num_gpus=2"]
    # distill reads its GPUs from train (TAO's entrypoint says so); a full path to the entrypoint is the same
    assert tao_command.gpu_args(dino(["/usr/local/bin/dino", "distill"], action="distill"), 2, 1) == ["train.num_gpus=2"]


@pytest.mark.parametrize("spec", [
    dino(["dino", "export", "-e", "/s.yaml"], action="export"),      # TAO runs export on one GPU
    dino(["python3", "train.py"]),                                   # not TAO's entrypoint
    dino("cd /w && dino train -e /s.yaml"),                          # shell text of several commands
    {"network_arch": "custom", "action": "run", "command": ["custom", "run"]},
    dino(["dino"]),
])
def test_other_commands_are_left_as_they_are(spec):
    assert tao_command.gpu_args(spec, 8, 2) == []
    assert tao_command.with_gpu_args(spec, 8, 2) == spec


def test_no_gpus_no_words():
    assert tao_command.gpu_args(dino(["dino", "train"]), 0, 1) == []


def test_the_commands_own_values_are_kept_when_they_agree_and_refused_when_not():
    agree = dino(["dino", "train", "train.num_gpus=2", "train.gpu_ids=[0,1]", "train.num_nodes=2"])
    assert tao_command.gpu_args(agree, 2, 2) == []
    assert tao_command.gpu_args(dino(["dino", "train", "num_gpus=2"]), 2, 1) == []  # TAO finds it by substring too
    assert tao_command.gpu_args(dino(["dino", "train", "train.gpu_ids=[0,1]"]), 2, 1) == ["train.num_gpus=2"]
    for words, gpus, nodes, named in [
        (["train.num_gpus=4"], 8, 1, "train.num_gpus=4"),
        (["train.gpu_ids=[0]"], 2, 1, "train.gpu_ids=[0]"),
        (["train.num_nodes=1"], 2, 2, "train.num_nodes=1"),
    ]:
        with pytest.raises(TaoError) as err:
            tao_command.gpu_args(dino(["dino", "train", *words]), gpus, nodes)
        line = str(err.value)
        assert named in line and "\n" not in line and ("--gpus-per-node" in line or "--nodes" in line)
    with pytest.raises(TaoError, match="not a whole number"):
        tao_command.gpu_args(dino(["dino", "train", "train.num_gpus=two"]), 2, 1)
    with pytest.raises(TaoError, match="not a list of GPU indices"):
        tao_command.gpu_args(dino(["dino", "train", "train.gpu_ids=[a]"]), 2, 1)


_word = hst.text(hst.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20).filter(
    lambda w: not any(k in w for k in tao_command.GPU_KEYS) and not set(w) <= set(";&|<>()"))


@settings(max_examples=200, deadline=None)
@given(words=hst.lists(_word, max_size=6), gpus=hst.integers(1, 16), nodes=hst.integers(1, 8),
       as_text=hst.booleans())
def test_any_command_keeps_its_words_and_gains_only_the_counts(words, gpus, nodes, as_text):
    argv = ["dino", "train", *words]
    spec = dino(shlex.join(argv) if as_text else argv)
    out = tao_command.with_gpu_args(spec, gpus, nodes)["command"]
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
    keys = ["train.num_gpus=2", "train.num_nodes=2"] if nodes == 2 else ["train.num_gpus=2"]
    assert words[-len(keys) - 1:-1] == keys
    assert words[-1] == "results_dir=/lustre/fsw/portfolios/edgeai/me/results/preview-job"
    assert words.count("dino") == 1 and words[words.index("dino"):][:3] == ["dino", "train", "-e"]
    spec = words[words.index("-e") + 1]  # each node of a multi-node job reads its own copy (taobank.multinode)
    assert spec == "/lustre/me/train.yaml" if nodes == 1 else spec.startswith("/dev/shm/tao-node-specs-")
    assert "export SLURM_JOB_NAME=bash; unset SLURM_NTASKS" in out


def test_docker_dry_run_carries_the_count(tmp_path):
    out = _dry_run([str(SCRIPTS / "tao_docker.py"), "submit", "--dry-run", "--image", IMAGE, "--network-arch",
                    "dino", "--action", "train", "--gpus", "2", "--", "dino", "train", "-e", "/specs/train.yaml"],
                   tmp_path)
    assert shlex.split(out.strip().splitlines()[-1])[-6:] == ["dino", "train", "-e", "/specs/train.yaml",
                                                              "train.num_gpus=2", "results_dir=/results/preview-job"]


def test_shell_text_gets_words_only_where_they_reach_its_one_command():
    """A YAML block's trailing newline is dropped; a comment or a second line would swallow or strand the words."""
    assert tao_command.with_gpu_args(dino("dino train -e /s.yaml\n"), 2, 1)["command"] == \
        "dino train -e /s.yaml train.num_gpus=2"
    for text in ("dino train -e /s.yaml # 8 GPUs", "dino train -e /s.yaml\necho done"):
        with pytest.raises(TaoError, match="cannot be added to it safely: give the command as an argv list"):
            tao_command.append_args(dino(text), ["train.optim.lr=0.1"])
    with pytest.raises(TaoError, match="argv list"):
        tao_command.with_gpu_args(dino("dino train -e /s.yaml # note"), 2, 1)
    assert tao_command.gpu_args(dino("dino train -e /s.yaml\necho done"), 2, 1) == []  # which line is TAO's?


def test_a_tao_command_the_bank_cannot_add_to_gets_a_warning_line():
    for text in ("cd /w && dino train -e /s.yaml", "dino train -e /s.yaml\necho done", "FOO=1 /usr/bin/dino train"):
        line = tao_command.unseen_warning(dino(text))
        assert line and line.startswith("warning: ") and "train.num_gpus=N" in line, text
    for spec in (dino(["dino", "train"]), dino("cd /w && dino train train.num_gpus=2"), dino("python3 x.py"),
                 dino(["dino", "export"], action="export")):
        assert tao_command.unseen_warning(spec) is None, spec


# ------------------------------------------------------------------ the keys TAO's schema has, per network
def pp(action, *words, **extra):
    return {"network_arch": "pointpillars", "action": action, "command": ["pointpillars", action, *words], **extra}


def test_only_the_keys_the_networks_schema_has_are_added():
    """TAO's Hydra runner refuses a key its schema lacks ("Key num_gpus not in PPEvalConfig"): pointpillars'
    evaluate and inference take no GPU count, its train takes one but no node count."""
    assert tao_command.gpu_args(pp("evaluate", "-e", "/s.yaml"), 2, 1) == []
    assert tao_command.gpu_args(pp("inference", "-e", "/s.yaml"), 2, 1) == []
    assert tao_command.gpu_args(pp("train", "-e", "/s.yaml"), 2, 1) == ["train.num_gpus=2"]
    with pytest.raises(TaoError) as err:
        tao_command.gpu_args(pp("train", "-e", "/s.yaml"), 2, 2)
    line = str(err.value)
    assert "pointpillars train has no train.num_nodes" in line and "--nodes 1" in line and "\n" not in line


def test_a_network_the_pinned_tao_does_not_know_gets_no_keys_and_one_warning_line():
    spec = {"network_arch": "yolo_v4", "action": "train", "command": ["yolo_v4", "train", "-e", "/s.yaml"]}
    assert tao_command.gpu_args(spec, 2, 1) == [] and tao_command.results_args(spec, "/r/j") == []
    line = tao_command.unseen_warning(spec)
    assert line and line.startswith("warning: TAO 6.26.3 has no network yolo_v4") and "\n" not in line
    assert tao_command.unseen_warning(dino(["dino", "train"])) is None


# ------------------------------------------------------------------ network and action from the command
@pytest.mark.parametrize("given", [{}, {"network_arch": "custom", "action": "run"}, {"network_arch": "dino"},
                                   {"action": "train"}, {"network_arch": "dino", "action": "train"}])
def test_a_tao_command_names_its_network_and_action(given):
    out = tao_command.identified({**given, "command": ["dino", "train", "-e", "/s.yaml"]})
    assert (out["network_arch"], out["action"]) == ("dino", "train")
    assert tao_command.identified({**given, "command": "/usr/local/bin/dino train -e /s.yaml"})["network_arch"] == "dino"


@pytest.mark.parametrize("given,flag", [({"network_arch": "rtdetr"}, "--network-arch rtdetr"),
                                        ({"action": "evaluate"}, "--action evaluate")])
def test_flags_that_contradict_the_command_are_refused_in_one_line(given, flag):
    with pytest.raises(TaoError) as err:
        tao_command.identified({**given, "command": ["dino", "train", "-e", "/s.yaml"]})
    line = str(err.value)
    assert line.startswith(flag) and "runs dino train" in line and "\n" not in line


@pytest.mark.parametrize("command", [["python3", "train.py"], ["yolo_v4", "train"], ["dino"], "cd /w && dino train",
                                     ["dino", "--help"]])
def test_other_commands_name_nothing(command):
    spec = {"network_arch": "custom", "action": "run", "command": command}
    assert tao_command.identified(spec) == spec


# ------------------------------------------------------------------ results_dir: the job's folder, one rule
def test_a_tao_command_writes_into_the_jobs_folder():
    assert tao_command.results_args(dino(["dino", "train", "-e", "/s.yaml"]), "/r/job-1/") == ["results_dir=/r/job-1"]
    for same in ("results_dir=/r/job-1", "results_dir=/r/job-1/"):
        assert tao_command.results_args(dino(["dino", "train", same]), "/r/job-1") == [], same
    assert tao_command.results_args(dino("dino train -e /s.yaml results_dir=$RESULTS_DIR"), "/r/job-1") == []
    assert tao_command.results_args(dino(["python3", "train.py"]), "/r/job-1") == []   # not TAO's entrypoint
    assert tao_command.results_args(dino(["dino", "train"]), None) == []               # a job that keeps no folder
    assert tao_command.with_results_dir(dino("dino train -e '/my specs/s.yaml'"), "/r/j")["command"] == \
        "dino train -e '/my specs/s.yaml' results_dir=/r/j"


def test_a_command_naming_another_folder_is_refused_in_one_line_naming_both():
    with pytest.raises(TaoError) as err:
        tao_command.results_args(dino(["dino", "train", "results_dir=/elsewhere"]), "/r/job-1")
    line = str(err.value)
    assert "results_dir=/elsewhere" in line and "/r/job-1" in line and "\n" not in line


# ------------------------------------------------------------------ the same rule on every platform's dry run
def _platform_dry_run(platform: str, words: list[str], tmp_path: Path, gpus: int = 2, extra: tuple = ()):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TAO_", "KUBECONFIG"))}
    env.update(HOME=str(tmp_path), TAO_JOBS_DIR=str(tmp_path / "jobs"), TAO_DOCKER_RESULTS_DIR=str(tmp_path / "r"),
               SLURM_USER="me", SLURM_HOSTNAME="login.example", SLURM_PARTITION="gpu")
    if platform == "kubernetes":
        argv = [str(SCRIPTS / "tao_k8s.py"), "submit", "--dry-run", "--image", IMAGE, "--gpus-per-node", str(gpus),
                "--pvc-mount", "data:/results", *extra, "--args-json", json.dumps(words)]
    else:
        helper = "tao_slurm.py" if platform == "slurm" else "tao_docker.py"
        argv = [str(SCRIPTS / helper), "submit", "--dry-run", "--image", IMAGE, "--gpus-per-node", str(gpus),
                *extra, "--", *words]
    r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=tmp_path,
                       stdin=subprocess.DEVNULL, timeout=60)
    return r


def _tao_words(platform: str, out: str) -> list[str]:
    """The words the job's container runs TAO with, as the dry run shows them."""
    if platform == "kubernetes":
        import yaml

        job = next(d for d in yaml.safe_load_all(out) if d and d.get("kind") == "Job")
        main = next(c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "main")
        words = main.get("command", []) + main.get("args", [])
        return words[words.index(next(w for w in words if w in ("dino", "pointpillars"))):]
    line = next(ln for ln in out.splitlines() if " dino " in f" {ln} " or " pointpillars " in f" {ln} ")
    words = shlex.split(line)
    return words[words.index(next(w for w in words if w in ("dino", "pointpillars"))):]


FOLDER = {"slurm": "/lustre/fsw/portfolios/edgeai/me/results/preview-job", "docker": "/results/preview-job",
          "kubernetes": "/results/tao-render-preview"}


@pytest.mark.parametrize("platform", ["slurm", "docker", "kubernetes"])
def test_dino_train_without_network_flags_gets_its_gpus_and_the_jobs_folder(platform, tmp_path):
    r = _platform_dry_run(platform, ["dino", "train", "-e", "/specs/train.yaml"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert _tao_words(platform, r.stdout) == ["dino", "train", "-e", "/specs/train.yaml", "train.num_gpus=2",
                                              f"results_dir={FOLDER[platform]}"]


@pytest.mark.parametrize("platform", ["slurm", "docker", "kubernetes"])
def test_pointpillars_evaluate_gets_no_gpu_count(platform, tmp_path):
    r = _platform_dry_run(platform, ["pointpillars", "evaluate", "-e", "/specs/eval.yaml"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert _tao_words(platform, r.stdout) == ["pointpillars", "evaluate", "-e", "/specs/eval.yaml",
                                              f"results_dir={FOLDER[platform]}"]


@pytest.mark.parametrize("platform", ["slurm", "docker", "kubernetes"])
@pytest.mark.parametrize("words,extra,named", [
    (["dino", "train", "results_dir=/elsewhere"], (), "results_dir=/elsewhere"),
    (["dino", "train"], ("--network-arch", "rtdetr"), "--network-arch rtdetr"),
])
def test_bad_input_is_refused_in_one_line_and_nothing_is_made(platform, words, extra, named, tmp_path):
    r = _platform_dry_run(platform, words, tmp_path, extra=extra)
    assert r.returncode != 0 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").rglob("*.json"))


def test_a_tao_spec_file_naming_another_folder_is_refused_in_one_line():
    for text in ("epochs: 3\n", "results_dir: /r/job-1/\n", "results_dir: ${oc.env:RESULTS_DIR}\n", "[unclosed"):
        tao_command.check_spec_results_dir("train.yaml", text, "/r/job-1")
    tao_command.check_spec_results_dir("train.yaml", "results_dir: /r/dino_x_1\n", "/r/{id}")  # id not minted yet
    with pytest.raises(TaoError) as err:
        tao_command.check_spec_results_dir("train.yaml", "results_dir: /results\n", "/r/{id}")
    line = str(err.value)
    assert "train.yaml sets results_dir: /results" in line and "/r/<job id>" in line and "\n" not in line
    assert tao_command.spec_file_word(dino(["dino", "train", "-e", "{specs}/t.yaml"])) == "{specs}/t.yaml"
    assert tao_command.spec_file_word(dino(["dino", "train", "--experiment_spec_file={specs}/t.yaml"])) == "{specs}/t.yaml"
    assert tao_command.spec_file_word(dino(["python3", "-e", "x"])) is None


def test_slurm_refuses_an_uploaded_tao_spec_naming_another_folder(tmp_path):
    (tmp_path / "train.yaml").write_text("results_dir: /results\ntrain:\n  num_epochs: 2\n")
    r = _platform_dry_run("slurm", ["dino", "train", "-e", "{specs}/train.yaml"], tmp_path,
                          extra=("--spec-file", str(tmp_path / "train.yaml")))
    assert r.returncode != 0 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert "train.yaml sets results_dir: /results" in line and "/lustre/fsw/portfolios/edgeai/me/results/" in line
    (tmp_path / "train.yaml").write_text("results_dir: ${oc.env:RESULTS_DIR}\n")
    r = _platform_dry_run("slurm", ["dino", "train", "-e", "{specs}/train.yaml"], tmp_path,
                          extra=("--spec-file", str(tmp_path / "train.yaml")))
    assert r.returncode == 0, r.stderr


def test_a_variable_only_counts_where_something_expands_it():
    """``$RESULTS_DIR`` in an argv list reaches TAO as those very characters (no shell runs it); the kubelet expands
    ``$(RESULTS_DIR)`` in a Kubernetes pod's words, a shell ``$RESULTS_DIR`` in shell text."""
    for word in ("results_dir=$RESULTS_DIR", "results_dir=$(RESULTS_DIR)"):
        with pytest.raises(TaoError, match="not expanded in an argv list"):
            tao_command.results_args(dino(["dino", "train", word]), "/r/j")
    assert tao_command.results_args(dino(["dino", "train", "results_dir=$(RESULTS_DIR)"]), "/r/j", kubelet=True) == []
    assert tao_command.results_args({**dino(None), "args": ["dino", "train", "results_dir=$(RESULTS_DIR)"]}, "/r/j",
                                kubelet=True) == []
    assert tao_command.results_args(dino("dino train results_dir=${RESULTS_DIR}"), "/r/j") == []
    assert tao_command.results_args(dino('dino train "results_dir=$RESULTS_DIR"'), "/r/j") == []
    for text in ("dino train 'results_dir=$RESULTS_DIR'", "dino train results_dir='$RESULTS_DIR'"):
        with pytest.raises(TaoError, match="in single quotes, which the shell does not expand"):
            tao_command.results_args(dino(text), "/r/j")
    assert tao_command.results_args({**dino(None), "args": [
        "dino", "train", "results_dir=$(TAO_API_RESULTS_DIR)/$(TAO_API_JOB_ID)"]}, "/r/j", kubelet=True) == []


@pytest.mark.parametrize("platform", ["slurm", "docker", "kubernetes"])
def test_a_dry_run_of_a_network_the_pinned_tao_does_not_know_says_why_it_adds_nothing(platform, tmp_path):
    r = _platform_dry_run(platform, ["yolo_v4", "train", "-e", "/specs/train.yaml"], tmp_path,
                          extra=("--network-arch", "yolo_v4", "--action", "train"))
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.strip().splitlines() if not line.startswith("dry run: ")]  # what it skipped
    assert lines == [line for line in lines if line.startswith("warning: TAO 6.26.3 has no network yolo_v4")] != []
    assert "num_gpus" not in r.stdout and "results_dir=/" not in r.stdout
