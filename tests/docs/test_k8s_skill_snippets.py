"""The verb blocks of the tao-run-on-kubernetes skill (SKILL.md and its references), run as written
against the local cluster.

Blocks are found by the HTML comment ``<!-- test: NAME -->`` right before
them, in SKILL.md or any references/*.md (a block may move between them); they run in one bash
session per scenario, in the order an agent would.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import yaml

import testclusters.kubernetes as lk
from devtools.skill_lint import BANK_LINE, code_blocks

BANK = Path(__file__).resolve().parents[2]
SKILL = BANK / "skills" / "tao-run-on-kubernetes" / "SKILL.md"
MARK = re.compile(r"<!--\s*test:\s*([a-z0-9-]+)\s*-->")


def blocks() -> dict[str, str]:
    out: dict[str, str] = {}
    for doc in [SKILL, *sorted((SKILL.parent / "references").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        lines = text.splitlines()
        for b in code_blocks(text):
            # the marker sits on the line before the opening fence (b.start is the first code line, 1-based)
            fence = b.start - 2
            prev = lines[fence - 1] if fence >= 1 else ""
            m = MARK.search(prev)
            if m:
                want = "yaml" if m.group(1) == "spec" else "bash"
                assert b.lang == want, f"block {m.group(1)} is not {want}"
                assert m.group(1) not in out, f"block {m.group(1)} is marked twice ({doc.name})"
                out[m.group(1)] = "\n".join(b.lines) + "\n"
    return out


def test_every_verb_has_a_marked_block():
    assert {"quick-path", "preflight", "spec", "submit", "submit-credentials", "status", "list", "logs", "cancel",
            "submit-multinode"} <= set(blocks())


def test_quick_path_is_on_the_first_screen():
    """The quick path opens the skill (first screen: 50 lines): the complete minimal job.yaml, then the verbs
    that submit that very file, both in SKILL.md itself."""
    lines = SKILL.read_text(encoding="utf-8").splitlines()
    spec = next(n for n, ln in enumerate(lines, 1) if "<!-- test: spec -->" in ln)
    start = next(n for n, ln in enumerate(lines, 1) if "<!-- test: quick-path -->" in ln)
    assert spec <= 25 and spec < start, (spec, start)
    block = blocks()["quick-path"].splitlines()
    assert len(block) <= 15 and start + len(block) <= 50, (start, len(block))
    for verb in ("preflight", "submit --spec job.yaml", "status", "--watch", "logs", "cancel", "tao_jobs.py\" list"):
        assert verb in blocks()["quick-path"], verb


def test_documented_spec_is_the_pinned_image_and_a_valid_spec():
    from taobank import pins  # noqa: PLC0415
    from taobank import spec as specmod  # noqa: PLC0415

    spec = yaml.safe_load(blocks()["spec"])
    assert spec["image"] == pins.resolve("images.tao_toolkit.pyt")
    specmod.validate(spec, "k8s-job-spec.schema.json", "job spec")


def test_node_selector_spec_key_is_documented_beside_its_flag_and_works(tmp_path):
    """references/job-spec.md: the `node_selector:` example is a valid spec key and `--node-selector K=V` adds to it
    (a dry run renders both into the pod's nodeSelector; it contacts nothing)."""
    text = (SKILL.parent / "references" / "job-spec.md").read_text(encoding="utf-8")
    (row,) = [ln for ln in text.splitlines() if ln.startswith("| `node_selector` |")]
    assert "--node-selector K=V" in row
    example = yaml.safe_load(re.search(r"`(node_selector: \{[^`]+\})`", row).group(1))
    spec = {**yaml.safe_load(blocks()["spec"]), **example}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "HOME")}
    env["TAO_STATE_DIR"] = str(tmp_path / "state")
    proc = subprocess.run([sys.executable, str(BANK / "scripts/tao_k8s.py"), "submit", "--spec", str(tmp_path / "job.yaml"),
                           "--node-selector", "pool=training", "--dry-run"], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    pods = [d["spec"]["template"]["spec"] for d in yaml.safe_load_all(proc.stdout) if d and d.get("kind") == "Job"]
    assert pods and pods[0]["nodeSelector"] == {**example["node_selector"], "pool": "training"}, pods


def run(script: str, env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run a block (in the folder that holds job.yaml); while other tests hold the shared cluster's GPUs,
    a gate refusal is retried."""
    end = time.time() + 120
    while True:
        proc = subprocess.run(["bash", "-c", f"set -e\n{BANK_LINE}\n{script}"], env=env, capture_output=True, text=True,
                              timeout=timeout, cwd=env.get("WORKDIR", str(BANK)))
        if proc.returncode == 0 or "insufficient GPUs" not in proc.stderr or time.time() > end:
            return proc
        time.sleep(3)


@pytest.fixture()
def env(k8s_cluster, tmp_path):
    """The skill's job.yaml as written, on the local cluster's PVC and with 1 GPU per pod (the cluster is
    shared with other tests), on kwok's nodes: kwok never pulls the image, so the pinned TAO image stays as documented."""
    spec = yaml.safe_load(blocks()["spec"])
    spec["gpus"] = 1
    # on kwok's nodes only: a real kubelet would pull the image and run the TAO command, which is not in it
    spec["node_selector"] = {lk.FAKE_NODE_LABEL: "true"}
    for m in spec["mounts"]:
        m["pvc"] = k8s_cluster.get("TAO_LOCAL_K8S_PVC", "tao-results")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(spec))
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "HOME")}
    # the skill's submits carry --ngc-pull-secret: NGC_KEY is the local registry's key, as its reference says
    key_file = Path(k8s_cluster[lk.NGC_KEY_FILE_ENV])
    return {**keep, **k8s_cluster, "TAO_SKILL_BANK_PATH": str(BANK), "TAO_STATE_DIR": str(tmp_path / "state"),
            "TAO_K8S_SKIP_NODE_RUNTIME_CHECK": "1", "WORKDIR": str(tmp_path),
            "NGC_KEY": key_file.read_text(encoding="utf-8").splitlines()[0]}


def _job_id(stdout: str) -> str:
    ids = [ln.split("=", 1)[1] for ln in stdout.splitlines() if ln.startswith("JOB_ID=")]
    assert ids, stdout
    return ids[-1]


def test_quick_path_as_written(env):
    """Preflight, then the quick path top to bottom: submit, watch to COMPLETE, logs, cancel (a no-op on a
    finished job), and the job table showing the job under its --name."""
    b = blocks()
    proc = run(b["preflight"] + b["quick-path"], env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = proc.stdout
    table = [ln for ln in out.splitlines() if "dino coco baseline" in ln]
    assert len(table) == 1 and "kubernetes" in table[0] and "COMPLETE" in table[0], out
    job_id = table[0].split()[0]
    assert f"{job_id} COMPLETE" in out and "nothing to cancel" in out, out
    assert out.splitlines()[0].startswith("SKIPPED") and any(ln.startswith("ID ") and "NAME" in ln for ln in out.splitlines())


def test_list_block_shows_the_name_and_the_state_dir_is_per_machine(env, tmp_path):
    b = blocks()
    sub = run(b["preflight"] + b["submit"], {**env, "NAME": "lr sweep 2e-4"})
    assert sub.returncode == 0, sub.stderr + sub.stdout
    job_id = _job_id(sub.stdout)
    lst = run(b["preflight"] + b["list"], env)
    assert lst.returncode == 0, lst.stderr
    rows = [ln for ln in lst.stdout.splitlines() if ln.startswith(job_id)]
    assert len(rows) == 2 and all("lr sweep 2e-4" in r for r in rows), lst.stdout  # the table, then --active (the record is not refreshed by list)
    assert (tmp_path / "state" / f"{job_id}.json").is_file()
    other = run(b["preflight"] + b["list"], {**env, "TAO_STATE_DIR": str(tmp_path / "other-machine")})
    assert other.returncode == 0 and job_id not in other.stdout
    run(b["preflight"] + f"JOB_ID={job_id}\n" + b["cancel"], env)


def test_preflight_submit_status_logs_as_written(env):
    b = blocks()
    pre = run(b["preflight"], env)
    assert pre.returncode == 0, pre.stderr + pre.stdout
    assert "SKIPPED: GPU node runtime check" in pre.stdout and "OK: cluster reachable" in pre.stdout
    sub = run(b["preflight"] + b["submit"], env)
    assert sub.returncode == 0, sub.stderr + sub.stdout
    job_id = _job_id(sub.stdout)
    st = run(b["preflight"] + f"JOB_ID={job_id}\n" + b["status"], env)
    assert st.returncode == 0, st.stderr + st.stdout
    assert st.stdout.rstrip().splitlines()[-1].startswith(f"{job_id} COMPLETE"), st.stdout
    logs = run(b["preflight"] + f"JOB_ID={job_id}\n" + b["logs"], env)
    assert logs.returncode == 0 and logs.stdout.strip(), logs.stderr
    cancel = run(b["preflight"] + f"JOB_ID={job_id}\n" + b["cancel"], env)
    assert cancel.returncode == 0 and "nothing to cancel" in cancel.stdout


def test_queues_block_as_written_submits_through_kueue(env):
    """The queues block with the local cluster's own LocalQueue: preflight names it, the Job carries its label,
    Kueue admits it and it completes."""
    from testclusters.kubernetes import kueue

    b = blocks()
    sub = run(b["preflight"] + b["queues"], {**env, "QUEUE": kueue.LOCAL_QUEUE})
    assert sub.returncode == 0, sub.stderr + sub.stdout
    assert f"a submit goes to LocalQueue {kueue.LOCAL_QUEUE}" in sub.stdout, sub.stdout
    job_id = _job_id(sub.stdout)
    st = run(b["preflight"] + f"JOB_ID={job_id}\n" + b["status"], env)
    assert st.returncode == 0 and st.stdout.rstrip().splitlines()[-1].startswith(f"{job_id} COMPLETE"), st.stdout
    rec = yaml.safe_load((Path(env["TAO_STATE_DIR"]) / f"{job_id}.json").read_text())
    assert rec["backend"]["queue"] == kueue.LOCAL_QUEUE


def test_submit_then_cancel_as_written(env):
    b = blocks()
    sub = run(b["preflight"] + b["submit"], env)
    assert sub.returncode == 0, sub.stderr
    job_id = _job_id(sub.stdout)
    cancel = run(b["preflight"] + f"JOB_ID={job_id}\n" + b["cancel"], env)
    assert cancel.returncode == 0, cancel.stderr
    assert f"{job_id} CANCELED" in cancel.stdout or "already finished" in cancel.stdout


def test_multinode_submit_status_cancel_as_written(env):
    b = blocks()
    # the probe on the fake nodes first (kwok runs no NCCL: a lifecycle-only "ok"), so the block's own
    # nccl-probe line answers from the per-cluster cache, as it does for a user on their second job
    probe = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_k8s.py"), "nccl-probe", "--gpus-per-node", "1",
                            "--interval", "1", "--node-selector", f"{lk.FAKE_NODE_LABEL}=true",
                            "--pod-annotation", f"{lk.RUN_DURATION_ANNOTATION}=1s"],
                           env=env, capture_output=True, text=True, timeout=240)
    assert probe.returncode == 0, probe.stderr
    sub = run(b["preflight"] + b["submit-multinode"], {**env, "GPUS_PER_NODE": "1"})
    assert "cached" in sub.stdout, sub.stdout
    assert sub.returncode == 0, sub.stderr + sub.stdout
    job_id = _job_id(sub.stdout)
    time.sleep(1)
    st = run(b["preflight"] + f"JOB_ID={job_id}\n" + b["status"], env)
    assert st.returncode == 0 and job_id in st.stdout, st.stderr
    logs = run(b["preflight"] + f"JOB_ID={job_id}\n" + b["logs"], env)
    assert logs.returncode == 0 and "[rank 0 " in logs.stdout and "[rank 1 " in logs.stdout, logs.stdout + logs.stderr


@pytest.mark.parametrize("case", ["no-such-namespace", "no-such-context", "unreachable-kubeconfig"])
def test_preflight_refuses_a_bad_target_with_one_actionable_line(env, tmp_path, case):
    bogus = tmp_path / "bogus.kubeconfig"
    bogus.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                     "users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                     "current-context: x\n")
    bad, needle = {
        "no-such-namespace": ({"TAO_K8S_NAMESPACE": "no-such-ns"}, "namespace no-such-ns"),
        "no-such-context": ({"TAO_K8S_CONTEXT": "no-such-ctx"}, "context no-such-ctx"),
        "unreachable-kubeconfig": ({"KUBECONFIG": str(bogus)}, "KUBECONFIG"),
    }[case]
    proc = run(blocks()["preflight"], {**env, **bad}, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    missing = [ln for ln in proc.stdout.splitlines() if ln.startswith("MISSING:")]
    assert len(missing) == 1 and needle in missing[0], proc.stdout + proc.stderr
    # the cluster is reachable when only the namespace is wrong, and the helper says so truthfully
    assert ("OK: cluster reachable" in proc.stdout) == (case == "no-such-namespace"), proc.stdout


def test_preflight_passes_for_a_user_who_may_not_read_namespaces(env):
    """The namespace check reads NotFound only: a Forbidden answer (namespaced RBAC) is not a refusal."""
    user_kc = env.get("TAO_LOCAL_K8S_USER_KUBECONFIG")
    assert user_kc, "local cluster env lacks TAO_LOCAL_K8S_USER_KUBECONFIG"
    proc = run(blocks()["preflight"], {**env, "KUBECONFIG": user_kc}, timeout=60)
    assert proc.returncode == 0 and "OK: cluster reachable" in proc.stdout, proc.stdout + proc.stderr


KUBECTL_CALL = re.compile(r'(?:^|[|;&(]|\$\(|\bthen|\|\|)\s*kubectl\s+(?!config\b)(.*)')


def test_every_kubectl_in_the_skill_docs_carries_namespace_and_context():
    """Pitfall: namespace/context documented but not passed. Every cluster call in a bash block of the
    skill (SKILL.md and references, except the local-cluster guide and the cluster owner's setup, whose
    calls are cluster-wide or in the GPU Operator's namespace) carries -n "$NS" and "${KCTX[@]}"."""
    from devtools.skill_lint import BANK_LINE, code_blocks  # noqa: PLC0415

    docs = [SKILL] + [p for p in sorted((SKILL.parent / "references").glob("*.md"))
                      if p.name not in ("local-cluster.md", "cluster-setup.md")]
    seen, bad = 0, []
    for doc in docs:
        for b in code_blocks(doc.read_text(encoding="utf-8")):
            if b.lang != "bash":
                continue
            for n, line in enumerate(b.lines):
                code = line.split(" #", 1)[0]
                if code.strip().startswith("echo "):  # a hint printed for the user, not a call
                    continue
                for _ in KUBECTL_CALL.finditer(code):
                    seen += 1
                    if '"${KCTX[@]}"' not in code or '-n "$NS"' not in code:
                        bad.append(f"{doc.name}:{b.start + n}: {line.strip()}")
    assert seen >= 2 and not bad, bad  # the preflight cluster calls moved into tao_k8s.py preflight


def test_credentials_submit_creates_the_documented_secrets(env):
    """The skill names the per-job Secrets tao-creds-<job> and tao-pull-<job>: the cluster must hold exactly
    those, and no value may reach the output or the record."""
    b = blocks()
    fake = {"AWS_ACCESS_KEY_ID": "AKIAFAKEDOCTEST12345", "AWS_SECRET_ACCESS_KEY": "fakeSecretValueForTheDocTest0123456789ab",
            "HF_TOKEN": "hf_FakeTokenForTheDocTest0123456789", "NGC_KEY": "nvapi-FakeKeyForTheDocTest-0123456789"}
    sub = run(b["preflight"] + b["submit-credentials"], {**env, **fake})
    assert sub.returncode == 0, sub.stderr + sub.stdout
    job_id = _job_id(sub.stdout)
    try:
        kubectl = env.get("TAO_LOCAL_K8S_KUBECTL") or "kubectl"
        got = subprocess.run([kubectl, "-n", env["TAO_K8S_NAMESPACE"], "get", "secrets", "-l", f"tao-job-id={job_id}",
                              "-o", "jsonpath={range .items[*]}{.metadata.name} {.type}{\"\\n\"}{end}"],
                             env=env, capture_output=True, text=True, timeout=60)
        assert got.returncode == 0, got.stderr
        assert sorted(got.stdout.split("\n")[:-1]) == sorted([f"tao-creds-{job_id} Opaque",
                                                            f"tao-pull-{job_id} kubernetes.io/dockerconfigjson"]), got.stdout
        record = (Path(env["TAO_STATE_DIR"]) / f"{job_id}.json").read_text()
        for value in fake.values():
            assert value not in sub.stdout + sub.stderr and value not in record
    finally:
        run(b["preflight"] + f"JOB_ID={job_id}\n" + b["cancel"], env)


def test_stand_in_block_trains_as_tao_does(env, tmp_path):
    """references/resume.md's stand-in training, as written, on the quick path's job.yaml: on the real kubelets
    (kwok's nodes run nothing), with `node_selector:` in the spec as references/job-spec.md documents it."""
    job = tmp_path / "job.yaml"
    spec = yaml.safe_load(job.read_text())
    spec["node_selector"] = {lk.REAL_NODE_LABEL: "true"}
    job.write_text(yaml.safe_dump(spec))
    proc = run(blocks()["stand-in"], env, timeout=400)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert " COMPLETE" in proc.stdout and "[epoch " in proc.stdout, proc.stdout  # progress while it ran
    assert "best val_loss (min, from the KPI's name) = 0.4 at epoch 3: train/model_epoch_003_step_00040.pth" in proc.stdout, proc.stdout
