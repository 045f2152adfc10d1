"""``submit --sweep ... --dry-run`` on every platform, with the fake process runner: no process at all is run (so
nothing that changes state), no record opens, the trial table is right, and what it shows is what the submit
sends (the same trials submitted for real on the fake cluster, ids swapped for the preview's)."""
from __future__ import annotations

import base64
import io
import json
import tarfile

import pytest
import yaml

from fakeproc import k8s_cluster, ok
from taobank import records
from taobank.campaign import sweeps
from taobank.contract import SubmitOptions
from taobank.platforms.kubernetes.sweep import SWEEP_LABEL

LR = "train.optim.lr=0.1,0.2,0.3"
TRIALS = [{"train.optim.lr": v} for v in ("0.1", "0.2", "0.3")]
K = 2


def previewed(cli, helper: str, *args: str) -> dict:
    out = cli(helper, "submit", "--sweep", LR, "--max-concurrent", str(K), "--dry-run", "--json", *args)
    assert out.rc == 0, out
    return json.loads(out.out)


def as_previewed(text: str, done: sweeps.Submitted) -> str:
    """A real submit's text with its minted ids in place of the preview's placeholders."""
    for i, view in enumerate(done.views):
        text = text.replace(view.id, sweeps.preview_ids(len(done.views))[i])
    return text.replace(done.sweep, sweeps.PREVIEW_SWEEP)


def nothing_done(fake) -> None:
    assert fake.calls == []  # no kubectl, ssh, docker, not even a local linter
    assert records.list_records() == []


def check_table(shown: dict, folder_of) -> None:
    assert shown["max_concurrent"] == K and shown["sweep"] == sweeps.PREVIEW_SWEEP
    assert [(t["trial"], t["id"], t["overrides"]) for t in shown["trials"]] == \
        [(i, f"preview-trial-{i}", TRIALS[i]) for i in range(3)]
    assert [t["results_dir"] for t in shown["trials"]] == [folder_of(t["id"]) for t in shown["trials"]]


# ------------------------------------------------------------------ Kubernetes
K8S = ["--image", "nvcr.io/nvidia/tao/tao-toolkit:x", "--network-arch", "dino", "--action", "train", "--gpus", "1",
       "--pvc-mount", "ws:/results"]
K8S_SPEC = {"image": "nvcr.io/nvidia/tao/tao-toolkit:x", "network_arch": "dino", "action": "train", "gpus": 1,
            "mounts": [{"pvc": "ws", "mount_path": "/results"}], "args": ["dino", "train", "-e", "/specs/s.yaml"]}


def test_kubernetes_sweep_preview_contacts_nothing_and_shows_the_indexed_job_the_submit_creates(fake, cli):
    shown = previewed(cli, "tao_k8s.py", *K8S, "--args-json", json.dumps(K8S_SPEC["args"]))
    nothing_done(fake)
    check_table(shown, lambda jid: f"/results/{jid}")
    assert shown["sent"] == []  # nothing per trial: the table carries every trial
    docs = {d["name"].split()[0]: yaml.safe_load(d["text"]) for d in shown["shared"]}
    assert sorted(docs) == ["ConfigMap", "Job"]  # one Indexed Job and its trial table, whatever N
    job, table = docs["Job"], docs["ConfigMap"]
    assert (job["spec"]["completionMode"], job["spec"]["completions"], job["spec"]["parallelism"]) == \
        ("Indexed", 3, K)
    assert [table["data"][f"{i}.argv"].count(f"train.optim.lr={v}") for i, v in enumerate(("0.1", "0.2", "0.3"))] == \
        [1, 1, 1]
    k8s_cluster(fake)
    done = sweeps.submit("kubernetes", K8S_SPEC, SubmitOptions(), TRIALS, K)
    (create,) = fake.kubectl_calls("create")  # the Job, suspended until the apply of what it owns releases it
    (apply,) = fake.kubectl_calls("apply")
    held = json.loads(as_previewed(create.stdin, done))["items"][0]
    made = {o["kind"]: o for o in json.loads(as_previewed(apply.stdin, done))["items"]}
    assert held["spec"].pop("suspend") is True and made["Job"]["spec"].pop("suspend") is False
    assert made["Job"] == job == held
    assert made["ConfigMap"]["data"] == table["data"]
    assert job["metadata"]["labels"][SWEEP_LABEL] == sweeps.PREVIEW_SWEEP


def test_kubernetes_sweep_preview_refuses_what_the_submit_refuses_and_never_shows_a_secret(fake, cli, monkeypatch):
    value = "hf_" + "s3cr3t" * 6
    monkeypatch.setenv("HF_TOKEN", value)
    args = [*K8S, "--secret-env", "HF_TOKEN", "--args-json", json.dumps(K8S_SPEC["args"]), "--sweep", LR]
    dry = cli("tao_k8s.py", "submit", *args, "--dry-run")
    k8s_cluster(fake)
    real = cli("tao_k8s.py", "submit", *args)
    assert value not in dry.out + dry.err and value not in real.out + real.err
    assert dry.rc == real.rc  # a dry run that passes, submits; one refused says the submit's own line
    if dry.rc:
        assert dry.err_lines == real.err_lines and len(dry.err_lines) == 1, (dry, real)
    else:
        assert "<masked>" in dry.out


def test_the_text_preview_has_the_table_and_what_is_sent_once(fake, cli):
    out = cli("tao_k8s.py", "submit", *K8S, "--args-json", json.dumps(K8S_SPEC["args"]), "--sweep", LR,
              "--max-concurrent", "2", "--dry-run")
    assert out.rc == 0, out
    lines = out.out.splitlines()
    assert lines[0].startswith("dry run: nothing was contacted, so the submit's read-only checks did not run")
    assert lines[1].startswith("sweep preview: 3 trials, at most 2 at once; nothing was created")
    assert lines[2].split() == ["TRIAL", "ID", "OVERRIDES", "RESULTS"]
    assert lines[4].split() == ["1", "preview-trial-1", "train.optim.lr=0.2", "/results/preview-trial-1"]
    once = out.out[out.out.index("# ---- sent once for the sweep: Job preview-sweep ----"):]
    assert "completionMode: \"Indexed\"" in once and "parallelism: 2" in once and "train.optim.lr=0.3" in once
    nothing_done(fake)


# ------------------------------------------------------------------ SLURM
SLURM_SPEC = {"network_arch": "dino", "action": "train", "container_runtime": "none", "num_gpus": 1,
              "command": ["python", "train.py", "-e", "spec.yaml"]}


def staged(call) -> dict[str, str]:
    """The files one STAGE_MANY sends (a base64 tar on stdin)."""
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(call.stdin)), mode="r") as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def test_slurm_sweep_preview_contacts_nothing_and_shows_the_array_and_scripts_the_submit_stages(slurm, cli,
                                                                                                  tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SLURM_SPEC))
    shown = previewed(cli, "tao_slurm.py", "--spec", str(spec))
    nothing_done(slurm)
    check_table(shown, lambda jid: shown["trials"][0]["results_dir"].replace("preview-trial-0", jid))
    assert shown["trials"][0]["results_dir"].endswith("/results/preview-trial-0")
    (array,) = shown["shared"]
    assert "#SBATCH --array=0-2%2" in array["text"]
    slurm.ssh("STAGE_MANY")
    slurm.ssh("SBATCH_ARRAY", "777\n")
    done = sweeps.submit("slurm", SLURM_SPEC, SubmitOptions(), TRIALS, K)
    (stage,) = [c for c in slurm.calls if c.script == "STAGE_MANY"]
    files = {as_previewed(k, done): as_previewed(v, done) for k, v in staged(stage).items()}
    assert files[f"{sweeps.PREVIEW_SWEEP}/sbatch/array.sbatch"] == array["text"]
    for i, doc in enumerate(shown["sent"]):
        assert doc["trial"] == i and files[f"preview-trial-{i}/sbatch/job_preview-trial-{i}.sbatch"] == doc["text"]


# ------------------------------------------------------------------ Docker
DOCKER_SPEC = {"image": "img:1", "gpus": 0, "network_arch": "dino", "action": "train",
               "command": ["python", "train.py", "-e", "spec.yaml"]}


@pytest.fixture()
def engine(docker_fake):
    return docker_fake


def test_docker_sweep_preview_contacts_nothing_and_shows_the_commands_the_submit_runs(engine, cli, tmp_path):
    shown = previewed(cli, "tao_docker.py", "--image", "img:1", "--network-arch", "dino", "--action", "train",
                      "--gpus", "0", "--", *DOCKER_SPEC["command"])
    nothing_done(engine)
    check_table(shown, lambda jid: str(tmp_path / "results" / jid))
    (start,) = shown["shared"]
    assert start["text"] == "docker start preview-trial-0 preview-trial-1\n" and "supervisor" in start["name"]
    engine.on("docker", lambda c: c.argv[1] == "info", '{"ServerVersion": "20.10.24", "SecurityOptions": []}')
    engine.on("docker", lambda c: c.argv[1:3] == ["image", "inspect"], "sha256:1")
    engine.on("docker", lambda c: c.argv[1] in ("create", "start"), ok("cid\n"))
    engine.on("python3", lambda c: c.argv[1:4] == ["-m", "taobank", "supervise"], ok("4242\n"))
    done = sweeps.submit("docker", DOCKER_SPEC, SubmitOptions(), TRIALS, K)
    import shlex

    ran = [as_previewed(shlex.join(c.argv), done) + "\n" for c in engine.calls if c.program == "docker"
           and c.argv[1] in ("create", "start")]
    assert ran == [d["text"] for d in shown["sent"]] + [start["text"]]
