"""The verb blocks of tao-run-on-kubernetes/SKILL.md, run as written against the local cluster.

Blocks are found by the HTML comment ``<!-- test: NAME -->`` right before
them; they run in one bash session per scenario, in the order an agent would.
"""
from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from taobank.skill_lint import code_blocks

BANK = Path(__file__).resolve().parents[2]
SKILL = BANK / "skills" / "tao-run-on-kubernetes" / "SKILL.md"
MARK = re.compile(r"<!--\s*test:\s*([a-z0-9-]+)\s*-->")


def blocks() -> dict[str, str]:
    text = SKILL.read_text(encoding="utf-8")
    lines = text.splitlines()
    out = {}
    for b in code_blocks(text):
        # the marker sits on the line before the opening fence (b.start is the first code line, 1-based)
        fence = b.start - 2
        prev = lines[fence - 1] if fence >= 1 else ""
        m = MARK.search(prev)
        if m:
            assert b.lang == "bash", f"block {m.group(1)} is not bash"
            out[m.group(1)] = "\n".join(b.lines) + "\n"
    return out


def test_every_verb_has_a_marked_block():
    assert {"preflight", "submit", "status", "logs", "cancel", "submit-multinode"} <= set(blocks())


def run(script: str, env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run a block; while other tests hold the shared cluster's GPUs, a gate refusal is retried."""
    end = time.time() + 120
    while True:
        proc = subprocess.run(["bash", "-c", "set -e\n" + script], env=env, capture_output=True, text=True,
                              timeout=timeout, cwd=str(BANK))
        if proc.returncode == 0 or "insufficient GPUs" not in proc.stderr or time.time() > end:
            return proc
        time.sleep(3)


@pytest.fixture()
def env(k8s_cluster, tmp_path):
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "HOME")}
    return {**keep, **k8s_cluster, "TAO_SKILL_BANK_PATH": str(BANK), "TAO_STATE_DIR": str(tmp_path / "state"),
            "TAO_K8S_SKIP_NODE_RUNTIME_CHECK": "1",
            "IMAGE": "docker.io/library/busybox:1.37.0", "ARCH": "deformable_detr", "ACTION": "train",
            "NUM_GPUS": "1", "RESULTS_DIR": "/results", "PVC": k8s_cluster.get("TAO_LOCAL_K8S_PVC", "tao-results"),
            "COMMAND": 'echo "training $TAO_JOB_ID"', "GPUS_PER_NODE": "1", "NUM_NODES": "2"}


def _job_id(stdout: str) -> str:
    ids = [ln.split("=", 1)[1] for ln in stdout.splitlines() if ln.startswith("JOB_ID=")]
    assert ids, stdout
    return ids[-1]


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
    sub = run(b["preflight"] + b["submit-multinode"], env)
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
    assert "OK: cluster reachable" not in proc.stdout


def test_preflight_passes_for_a_user_who_may_not_read_namespaces(env):
    """The namespace check reads NotFound only: a Forbidden answer (namespaced RBAC) is not a refusal."""
    user_kc = env.get("TAO_LOCAL_K8S_USER_KUBECONFIG")
    assert user_kc, "local cluster env lacks TAO_LOCAL_K8S_USER_KUBECONFIG"
    proc = run(blocks()["preflight"], {**env, "KUBECONFIG": user_kc}, timeout=60)
    assert proc.returncode == 0 and "OK: cluster reachable" in proc.stdout, proc.stdout + proc.stderr


KUBECTL_CALL = re.compile(r'(?:^|[|;&(]|\$\(|\bthen|\|\|)\s*kubectl\s+(?!config\b)(.*)')


def test_every_kubectl_in_the_skill_docs_carries_namespace_and_context():
    """Pitfall: namespace/context documented but not passed. Every cluster call in a bash block of the
    skill (SKILL.md and references, except the local-cluster guide) carries -n "$NS" and "${KCTX[@]}"."""
    from taobank.skill_lint import code_blocks  # noqa: PLC0415

    docs = [SKILL] + [p for p in sorted((SKILL.parent / "references").glob("*.md")) if p.name != "local-cluster.md"]
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
    assert seen >= 3 and not bad, bad
