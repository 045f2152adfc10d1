"""Every node of a multi-node job runs TAO under the node guard (taobank.multinode): its own spec copies, a bounded
wait for rank 0's name, and no silent one-node fallback. The guard script runs here for real (sh, awk, FIFOs);
the rendered Kubernetes manifests and sbatch scripts are read as objects and words."""
from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from taobank import failures, multinode
from taobank.tao_command import shell_words
from taobank.platforms.kubernetes import render as k8s_render
from taobank.platforms.slurm import render as slurm_render, resources

JOB = "dino-train-0a1b2c3d"
COPY = f"{multinode.LOCAL_PREFIX}{JOB}/0/spec.yaml"
#: A TAO-like entrypoint: prints its spec file, then TAO's fallback warnings (colored, on stderr, as TAO's logger
#: writes them) when FALL is set, and trains for a while (a child holding the output open, as torchrun would).
FAKE_TAO = textwrap.dedent("""\
    import os, subprocess, sys, time
    spec = sys.argv[sys.argv.index("-e") + 1]
    print("spec:", open(spec).read().strip(), flush=True)
    open(spec, "a").write("# rewritten\\n")  # TAO writes its spec file back in place
    if os.environ.get("FALL"):  # both lines in one write: the guard's TERM on the first cannot fall between them
        sys.stderr.write("".join(f"\\x1b[33;20m2026 - [TAO Toolkit] - WARNING - {line} (entrypoint.py:1)\\x1b[0m\\n"
                                 for line in ("[Multinode] Error overriding configs: Invalid master address: r0.svc",
                                              "[Multinode] Using default configs.")))
        sys.stderr.flush()
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(60)
    print("trained", flush=True)
    sys.exit(int(os.environ.get("RC", "0")))
""")


@pytest.fixture()
def fake_tao(tmp_path):
    path = tmp_path / "fake_tao.py"
    path.write_text(FAKE_TAO)
    spec = tmp_path / "spec.yaml"
    spec.write_text("train: {num_epochs: 1}\n")
    return path, spec


def run_guard(argv: list[str], env: dict, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env={"PATH": os.environ["PATH"], **env})


def test_argv_words_name_the_nodes_own_copies():
    for argv, want in [
        (["dino", "train", "-e", "/s/spec.yaml", "x=1"], ["dino", "train", "-e", COPY, "x=1"]),
        (["dino", "train", "--experiment_spec_file", "/s/spec.yaml"], ["dino", "train", "--experiment_spec_file", COPY]),
        (["dino", "train", "--experiment_spec_file=/s/spec.yaml"], ["dino", "train", f"--experiment_spec_file={COPY}"]),
    ]:
        out, pairs = multinode.node_local_specs(argv, JOB)
        assert out == want and pairs == [("/s/spec.yaml", COPY)]
    out, pairs = multinode.node_local_specs(["torchrun", "train.py"], JOB)
    assert out == ["torchrun", "train.py"] and pairs == []


def test_shell_text_is_rewritten_in_place_keeping_every_other_word():
    text = 'cd /w && dino train -e /s/spec.yaml results_dir="$RESULTS_DIR" "a b"'
    out, pairs = multinode.node_local_specs(["/bin/sh", "-c", text], JOB)
    assert out == ["/bin/sh", "-c", text.replace("/s/spec.yaml", COPY)] and pairs == [("/s/spec.yaml", COPY)]
    # a path the bank cannot name again exactly is left alone (the guard's watch still stands)
    for text in ['dino train -e "$SPEC"', "dino train -e /s/spec.yaml /s/spec.yaml", "dino train -e '/s/my spec.yaml'"]:
        assert multinode.node_local_specs(["bash", "-c", text], JOB) == (["bash", "-c", text], [])


@settings(max_examples=100, deadline=None)
@given(before=st.lists(st.sampled_from(["dino", "train", "x=1", "'a b'", '"$X"', "--flag", "&&", "y=/p/q"]),
                       max_size=4),
       path=st.from_regex(r"/[a-z]{1,6}(/[a-z0-9_.-]{1,8}){0,2}/[a-z]{1,5}\.yaml", fullmatch=True),
       after=st.lists(st.sampled_from(["k=v", "'c d'", "$(id)", "z"]), max_size=3))
def test_the_rewritten_text_differs_in_the_spec_word_only(before, path, after):
    text = " ".join([*before, "-e", path, *after])
    out, pairs = multinode.node_local_specs(["/bin/sh", "-c", text], JOB)
    copy = f"{multinode.LOCAL_PREFIX}{JOB}/0/{path.rsplit('/', 1)[1]}"
    if pairs:
        assert pairs == [(path, copy)]
        assert shell_words(out[2]) == [copy if w == path else w for w in shell_words(text)]
    else:  # only when the path is written twice
        assert shell_words(text).count(path) > 1 and out[2] == text


def test_each_node_runs_tao_on_its_own_copy(fake_tao):
    script, spec = fake_tao
    job = f"unit-{secrets.token_hex(4)}"
    (argv, pairs) = multinode.node_local_specs([sys.executable, str(script), "-e", str(spec)], job)
    copy = pairs[0][1]
    assert copy == f"/dev/shm/tao-node-specs-{job}/0/spec.yaml" and argv[-1] == copy
    res = run_guard(multinode.guard_argv(argv, pairs, 2, 5), {"MASTER_ADDR": "localhost", "RC": "3"})
    assert res.returncode == 3, res.stderr  # the command's own exit code
    assert res.stdout.splitlines() == ["spec: train: {num_epochs: 1}", "trained"]
    assert spec.read_text() == "train: {num_epochs: 1}\n"  # TAO rewrote the node's copy, not the shared file
    assert res.stderr == "" and not Path(copy).parent.parent.exists()  # the copies go when the command ends


def test_the_copy_keeps_the_specs_siblings_for_hydras_defaults(tmp_path):
    """TAO hands Hydra the copy's folder: a spec whose defaults name sibling files or folders still finds them."""
    src = tmp_path / "specs"
    (src / "dataset").mkdir(parents=True)
    (src / "dataset" / "coco.yaml").write_text("root: /data\n")
    (src / "model.yaml").write_text("backbone: r50\n")
    (src / "train.yaml").write_text("defaults: [dataset: coco, model]\n")
    job = f"unit-{secrets.token_hex(4)}"
    argv, pairs = multinode.node_local_specs(["/bin/sh", "-c", f"tao -e {src}/train.yaml"], job)
    check = ('d=$(dirname "$0"); cat "$d/dataset/coco.yaml" "$d/model.yaml"; echo x >> "$0"')
    argv = ["/bin/sh", "-c", check, pairs[0][1]]
    res = run_guard(multinode.guard_argv(argv, pairs, 2, 0), {})
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["root: /data", "backbone: r50"]
    assert (src / "train.yaml").read_text() == "defaults: [dataset: coco, model]\n"  # the shared spec untouched
    assert not Path(pairs[0][1]).parent.parent.exists()


def test_a_relative_spec_path_keeps_its_siblings_and_stale_files_fail_no_node(tmp_path):
    """A spec named relative to the working folder gets absolute sibling links (a link relative to the copy would
    point nowhere); a planted fallback file in /dev/shm never fails a healthy node (the guard's folder is its own)."""
    (tmp_path / "specs" / "dataset").mkdir(parents=True)
    (tmp_path / "specs" / "dataset" / "d.yaml").write_text("root: /data\n")
    (tmp_path / "specs" / "train.yaml").write_text("defaults: [dataset: d]\n")
    job = f"unit-{secrets.token_hex(4)}"
    _, pairs = multinode.node_local_specs(["tao", "-e", "specs/train.yaml"], job)
    argv = multinode.guard_argv(["/bin/sh", "-c", 'cat "$(dirname "$0")/dataset/d.yaml"', pairs[0][1]], pairs, 2, 0)
    plant = 'for s in fell fell.2; do printf "[Multinode] Using default configs.\\n" > "/dev/shm/.tao-node-$$.$s"; done'
    res = subprocess.run(["/bin/sh", "-c", plant + '; exec "$@"', "plant", *argv], capture_output=True, text=True,
                         timeout=30, cwd=tmp_path, env={"PATH": os.environ["PATH"]})
    subprocess.run(["sh", "-c", "rm -f /dev/shm/.tao-node-*.fell*"], check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "root: /data\n"


def test_a_spec_that_cannot_be_copied_stops_the_node_in_one_line(tmp_path):
    argv = multinode.guard_argv(["true"], [(str(tmp_path / "missing.yaml"), str(tmp_path / "c" / "s.yaml"))], 2, 0)
    res = run_guard(argv, {})
    assert res.returncode == multinode.COPY_EXIT
    assert res.stderr.splitlines()[-1].startswith(f"tao: cannot copy the spec file {tmp_path}/missing.yaml")


def test_rank0s_name_is_awaited_and_a_name_that_never_comes_stops_the_job(fake_tao):
    script, _spec = fake_tao
    argv = multinode.guard_argv([sys.executable, str(script), "-e", "/dev/null"], [], 2, 3)
    res = run_guard(argv, {"MASTER_ADDR": "no-such-rank0.invalid", "NODE_RANK": "1"})
    assert res.returncode == multinode.NAME_EXIT and "trained" not in res.stdout
    assert res.stdout == "tao: waiting up to 3 s for rank 0's name no-such-rank0.invalid to resolve\n"
    (line,) = res.stderr.splitlines()
    assert line.startswith("tao: rank 0's name no-such-rank0.invalid did not resolve within 3 s on node rank 1 of 2")
    assert failures.infra_log_match(line) == "rank0_name"  # an infrastructure failure (SLURM retries it)


def test_a_name_that_resolves_later_lets_the_node_start(fake_tao, tmp_path):
    """The wait ends when the name resolves (here a getent on PATH that finds it once a file appears)."""
    script, _spec = fake_tao
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "getent").write_text(f'#!/bin/sh\n[ -e {tmp_path}/up ]\n')
    (shim / "getent").chmod(0o755)
    argv = multinode.guard_argv(["sh", "-c", f"echo started; {sys.executable} {script} -e /dev/null"], [], 2, 60)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"PATH": f"{shim}:{os.environ['PATH']}", "MASTER_ADDR": "r0.svc"})
    assert proc.stdout is not None
    assert proc.stdout.readline() == "tao: waiting up to 60 s for rank 0's name r0.svc to resolve\n"
    (tmp_path / "up").touch()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.splitlines()[:2] == ["tao: rank 0's name r0.svc resolves", "started"]


def test_a_name_that_answers_only_now_and_then_keeps_the_node_waiting(fake_tao, tmp_path):
    """Just after it comes up, a name may resolve once and miss the next time (TAO asks once more, and falls back
    on a miss): the node starts only once it resolves several times in a row. Here every other answer misses
    until a file appears."""
    script, _spec = fake_tao
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "getent").write_text(f"""#!/bin/sh
n=$(cat {tmp_path}/n 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > {tmp_path}/n
[ -e {tmp_path}/steady ] || [ $((n % 2)) = 0 ]
""")
    (shim / "getent").chmod(0o755)
    argv = multinode.guard_argv(["sh", "-c", "echo started"], [], 2, 60)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"PATH": f"{shim}:{os.environ['PATH']}", "MASTER_ADDR": "r0.svc"})
    assert proc.stdout is not None
    assert proc.stdout.readline() == "tao: waiting up to 60 s for rank 0's name r0.svc to resolve\n"
    deadline = time.time() + 30
    while int((tmp_path / "n").read_text()) < 6 and time.time() < deadline:  # several single answers came
        time.sleep(0.2)
    assert int((tmp_path / "n").read_text()) >= 6 and proc.poll() is None  # ... and the node still waits
    (tmp_path / "steady").touch()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.splitlines() == ["tao: rank 0's name r0.svc resolves", "started"]
    assert int((tmp_path / "n").read_text()) >= 6 + multinode.STEADY_ANSWERS - 1


def test_a_node_where_tao_falls_back_to_one_node_fails_the_job_with_taos_line(fake_tao):
    script, _spec = fake_tao
    argv = multinode.guard_argv([sys.executable, str(script), "-e", "/dev/null"], [], 2, 0)
    res = run_guard(argv, {"FALL": "1", "NODE_RANK": "1"}, timeout=20)  # (it would train 60 s alone)
    assert res.returncode == multinode.FALLBACK_EXIT and "trained" not in res.stdout
    last = res.stderr.splitlines()[-1]
    assert last == ("tao: node rank 1 of a 2-node job fell back to training on one node (TAO: 2026 - [TAO Toolkit] - "
                    "WARNING - [Multinode] Error overriding configs: Invalid master address: r0.svc (entrypoint.py:1)"
                    "): the job stops instead")
    assert "[Multinode] Using default configs." in res.stderr  # TAO's own lines pass through unchanged


def test_kubernetes_ranks_run_under_the_guard_on_their_own_spec_copy():
    spec = {"image": "img", "command": "dino train -e /data/specs/train.yaml", "network_arch": "dino",
            "action": "train", "gpus": 2, "nodes": 2, "mounts": [{"pvc": "c", "mount_path": "/data"}]}
    job = k8s_render.find(k8s_render.render_manifests(spec, job_id=JOB, namespace="ns"), "Job")
    assert job is not None
    main = job["spec"]["template"]["spec"]["containers"][0]
    command = main["command"]
    at = command.index("tao-node")
    assert command[at - 3:at] == ["/bin/sh", "-c", k8s_render.kube_literal(multinode.GUARD_SCRIPT)]
    copy = f"{multinode.LOCAL_PREFIX}{JOB}/0/train.yaml"
    assert command[at + 1:] == [str(multinode.rank0_name_wait_s()), "2", "1", "/data/specs/train.yaml", copy,
                                "/bin/sh", "-c",
                                f"dino train -e {copy} train.num_gpus=2 train.num_nodes=2 results_dir=/data/{JOB}"]
    # the copies live in the pod's own memory volume
    assert {"name": "dshm", "mountPath": "/dev/shm"} in main["volumeMounts"]
    # a one-node job runs its command as it is
    single = k8s_render.find(k8s_render.render_manifests({**spec, "nodes": 1}, job_id=JOB, namespace="ns"), "Job")
    assert single is not None
    assert "tao-node" not in single["spec"]["template"]["spec"]["containers"][0]["command"]


def test_a_read_only_config_file_is_copied_too():
    """A config-mode request mounts its spec from a ConfigMap, read-only: TAO's in-place rewrite would fail."""
    spec = {"image": "img", "args": ["dino", "train", "-e", "/cfg/spec.yaml"], "network_arch": "dino",
            "action": "train", "gpus": 1, "nodes": 2, "no_results": True}
    objs = k8s_render.render_manifests(spec, job_id=JOB, namespace="ns",
                                       config={"text": "train: {}\n", "mount_path": "/cfg/spec.yaml"})
    job = k8s_render.find(objs, "Job")
    assert job is not None
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    copy = f"{multinode.LOCAL_PREFIX}{JOB}/0/spec.yaml"
    assert command[command.index("tao-node") + 3:] == ["1", "/cfg/spec.yaml", copy, "dino", "train", "-e", copy,
                                                       "train.num_gpus=1", "train.num_nodes=2"]


def test_slurm_tasks_run_under_the_guard_on_their_own_spec_copy():
    res = resources.resolve({"partition": "local", "cpus_per_task": 1, "num_gpus": 8, "max_num_gpus_per_node": 4}, {})
    spec_path = f"/lustre/me/jobs/{JOB}/specs/train.yaml"
    inp = slurm_render.ScriptInput(job_id=JOB, job_dir=f"/lustre/me/jobs/{JOB}", results_parent="/lustre/me/results",
                                   command=["dino", "train", "-e", spec_path], resources=res, runtime="none")
    text = slurm_render.render(inp)
    srun = text[text.index("srun --nodes=2"):].split("\nrc=$?")[0]
    words = shlex.split(srun.replace("\\\n", " "))
    task = words[words.index("tao-task") + 1:]
    copy = f"{multinode.LOCAL_PREFIX}{JOB}/0/train.yaml"
    assert task == ["/bin/sh", "-c", multinode.GUARD_SCRIPT, "tao-node", str(multinode.rank0_name_wait_s()), "2", "1",
                    spec_path, copy, "dino", "train", "-e", copy]
    slurm_render.lint(text)  # bash -n, shellcheck, the secret lint


def test_nodes_sharing_dev_shm_copy_the_spec_at_once_and_all_start(tmp_path):
    """Several nodes on one host (the local SLURM cluster) share /dev/shm: their copies of one job's spec went to one
    path, and a node whose cp met the other's create failed with 'File exists' (exit 66, its peers then timed out).
    Each copies under a name of its own, then renames."""
    spec = tmp_path / "train.yaml"
    spec.write_text("train: {num_epochs: 1}\n" * 2000)  # a copy that takes a moment
    job = f"unit-{secrets.token_hex(4)}"
    argv, pairs = multinode.node_local_specs(["tao", "-e", str(spec)], job)
    guard = multinode.guard_argv(["/bin/sh", "-c", 'cmp -s "$0" "$1"; r=$?; sleep 3; exit $r', pairs[0][1], str(spec)],
                                pairs, 8, 0)  # each reads its copy first, then holds it (a training)
    nodes = [subprocess.Popen(guard, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={"PATH": os.environ["PATH"], "NODE_RANK": str(rank)}) for rank in range(8)]
    results = [(n.wait(timeout=60), n.stderr.read()) for n in nodes]
    assert [rc for rc, _ in results] == [0] * 8, results
