"""The tao-run-on-docker SKILL.md verb snippets, executed as written against the local Docker engine (blocks
marked ``<!-- test: NAME -->``), in the order an agent would run them in one shell session."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from devtools.skill_lint import BANK_LINE

BANK = Path(__file__).resolve().parents[2]
SKILL = BANK / "skills" / "tao-run-on-docker" / "SKILL.md"
_BLOCK = re.compile(r"<!-- test: (?P<name>[a-z-]+) -->\n```bash\n(?P<body>.*?)```", re.S)


def blocks() -> dict[str, str]:
    return {m["name"]: m["body"] for m in _BLOCK.finditer(SKILL.read_text(encoding="utf-8"))}


def test_every_verb_has_a_tested_block():
    assert {"quick-path", "login", "preflight", "submit", "status", "logs", "cancel", "results"} <= set(blocks())


def test_quick_path_and_its_spec_are_on_the_first_screen():
    text = SKILL.read_text(encoding="utf-8")
    lines = text.splitlines()
    start = next(n for n, ln in enumerate(lines, 1) if "<!-- test: quick-path -->" in ln)
    assert start <= 40 and start + len(blocks()["quick-path"].splitlines()) <= 55, start
    assert "image:" in "\n".join(lines[:start]) and "command:" in "\n".join(lines[:start])
    for verb in ("preflight", "submit", "status --watch", "logs", "cancel", 'tao_jobs.py" list'):
        assert verb in blocks()["quick-path"], verb
    assert len(text.encode("utf-8")) <= 12000


@pytest.fixture()
def session(docker_cluster, tmp_path):
    env = {**os.environ, **docker_cluster, "TAO_SKILL_BANK_PATH": str(BANK), "TAO_STATE_DIR": str(tmp_path / "state"),
           "TAO_DOCKER_RESULTS_DIR": str(tmp_path / "results"), "DOCKER_CONFIG": str(tmp_path / "client")}
    (tmp_path / "results").mkdir()

    def run(names: list[str], spec: dict | None = None, **extra: str) -> subprocess.CompletedProcess:
        script = "\n".join([BANK_LINE, *(blocks()[n] for n in names)])  # the bank line starts the session
        if spec is not None:
            (tmp_path / "job.yaml").write_text(json.dumps(spec))  # the snippets' literal file name; JSON is YAML
        return subprocess.run(["bash", "-c", script], env={**env, **extra}, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    return run


def _spec(docker_cluster, command: list[str]) -> dict:
    return {"image": docker_cluster["TAO_LOCAL_DOCKER_IMAGE"], "network_arch": "dino", "action": "train", "gpus": 0,
            "command": command}


TRAIN = ("echo '{\"epoch\": 1, \"max_epoch\": 1, \"kpi\": {\"val_loss\": 0.5}}' > $RESULTS_DIR/status.json; "
         "echo ckpt > $RESULTS_DIR/model.pth; echo quick-path-ran")


def quick_path_spec() -> dict:
    """The job.yaml the quick path shows (the yaml block before its bash block), as a user would save it."""
    import yaml

    text = SKILL.read_text(encoding="utf-8")
    head = text[:text.index("<!-- test: quick-path -->")]
    return yaml.safe_load(head[head.rindex("```yaml\n") + len("```yaml\n"):head.rindex("```")])


#: A stand-in for TAO's ``dino`` entry point (the real one needs a GPU): it reads the ``-e`` spec and writes
#: what TAO writes, where ``results_dir=`` says.
DINO = """#!/bin/sh
spec=; out=
while [ $# -gt 0 ]; do
  case $1 in -e) spec=$2; shift ;; results_dir=*) out=${1#results_dir=} ;; esac
  shift
done
[ -f "$spec" ] || { echo "dino: no experiment spec $spec" >&2; exit 2; }
mkdir -p "$out" || exit 3
echo '{"epoch": 1, "max_epoch": 1, "kpi": {"val_loss": 0.5}}' > "$out/status.json"
echo ckpt > "$out/model.pth"
echo "quick-path-ran into $out"
"""


@pytest.fixture()
def dino_image(docker_cluster, tmp_path):
    """The local image plus the ``dino`` stand-in on its PATH (built offline from the local image; removed after)."""
    import uuid

    ctx = tmp_path / "dino-image"
    ctx.mkdir()
    (ctx / "dino").write_text(DINO)
    (ctx / "dino").chmod(0o755)
    base = docker_cluster["TAO_LOCAL_DOCKER_IMAGE"]
    path = subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Env}}", base], capture_output=True,
                          text=True, env={**os.environ, **docker_cluster}, check=True).stdout
    bindir = next((e.split("=", 1)[1].split(":")[0] for e in json.loads(path) or [] if e.startswith("PATH=")), "/bin")
    (ctx / "Dockerfile").write_text(f"FROM {base}\nCOPY dino {bindir}/dino\n")
    tag = f"tao-local.test/quick-path-dino:{uuid.uuid4().hex[:12]}"
    env = {**os.environ, **docker_cluster, "DOCKER_BUILDKIT": "0"}
    subprocess.run(["docker", "build", "-q", "-t", tag, str(ctx)], capture_output=True, text=True, env=env, check=True)
    yield tag
    subprocess.run(["docker", "rmi", "--force", tag], capture_output=True, env=env)


def test_quick_path_as_written(session, docker_cluster, dino_image, tmp_path):
    """The quick path's own job.yaml, changed only where this host differs (image, no GPU, folders): what TAO
    writes lands in the job's results folder on the host."""
    spec = quick_path_spec()
    data = tmp_path / "coco"
    (data / "specs").mkdir(parents=True)
    (data / "specs" / "train.yaml").write_text("train: {num_epochs: 1}\n")
    assert len(spec["mounts"]) == 1 and spec["gpus"] == 1
    spec.update(image=dino_image, gpus=0, results_dir=str(tmp_path / "results"),
                mounts=[{**spec["mounts"][0], "host": str(data)}])
    res = session(["quick-path"], spec)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "not checked" in res.stdout  # the local engine has no GPU: preflight says what it did not check
    rows = [ln for ln in res.stdout.splitlines() if "dino coco baseline" in ln]
    assert len(rows) == 1 and "docker" in rows[0] and "COMPLETE" in rows[0], res.stdout
    assert "quick-path-ran" in res.stdout and "model.pth" in res.stdout, res.stdout
    (job,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    assert (job / "model.pth").read_text() == "ckpt\n" and (job / "status.json").is_file()


def test_submit_status_logs_results_blocks(session, docker_cluster, tmp_path):
    res = session(["submit", "status", "logs", "results"], _spec(docker_cluster, ["sh", "-c", TRAIN]))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("JOB_ID=") and " COMPLETE " in res.stdout and "quick-path-ran" in res.stdout
    assert (tmp_path / "results-copy" / "model.pth").read_text() == "ckpt\n"


def test_submit_cancel_blocks(session, docker_cluster):
    res = session(["submit", "cancel"], _spec(docker_cluster, ["sleep", "300"]))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "CANCELED" in res.stdout


def test_preflight_block_on_the_gpu_less_engine(session):
    res = session(["preflight"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("OK: docker engine ") and "not checked" in res.stdout


def test_login_block_with_a_key_file(session, k8s_cluster):
    from testclusters.kubernetes import NGC_KEY_FILE_ENV
    from testclusters.kubernetes.cluster_state import _load_cluster

    res = session(["login"], REGISTRY=_load_cluster()["registry"], NGC_KEY_FILE=k8s_cluster[NGC_KEY_FILE_ENV])
    assert res.returncode == 0 and res.stdout.startswith("logged in to "), res.stdout + res.stderr
    key = Path(k8s_cluster[NGC_KEY_FILE_ENV]).read_text().strip()
    assert key not in res.stdout + res.stderr
