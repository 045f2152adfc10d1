"""One rule for a kubeconfig context (and namespace), applied at the first step.

``submit --context "team a"`` used to create the Job, after which status and cancel refused the
record as damaged (the record check was stricter than the client's): the Job could no longer be
stopped by the bank. Now the kubectl client refuses such a context before any kubectl call, with
the rule the record check uses, so whatever submit accepts, status and cancel read back.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fakeproc import echo_applied, items, job, node, pod, k8s_cluster
from taobank.contract import SubmitOptions
from taobank import names, records
from taobank.core import platform
from taobank.errors import TaoError
from taobank.platforms.kubernetes.kubectl import Kubectl

BAD_CONTEXTS = ["team a", "ctx=prod", "-dash", "kind~x", "--kubeconfig=/tmp/k", "-n", "a\nb", "ctx;id", "caf\u00e9",
                "x" * 254, " lead", "tab\there"]
#: the characters a context name may hold (names.CONTEXT_RULE)
ALPHABET = "abcxyzABCXYZ0189@._:/+-"
SPEC = {"image": "img", "command": "echo hi", "gpus": 1, "no_results": True}
SUBMIT = ["tao_k8s.py", "submit", "--image", "img", "--command", "echo hi", "--no-results"]


def _cluster(fake) -> None:
    """A one-node cluster that lets us do everything and echoes what is created."""
    k8s_cluster(fake)


def _client_accepts(context: str) -> bool:
    try:
        Kubectl("default", context)
    except TaoError:
        return False
    return True


def _record(backend: dict, backend_ref: str | None = None) -> records.Record:
    """A running Kubernetes record with ``backend`` as it was read back (not checked: Kubectl.for_record checks)."""
    return records.Record(id="dino-train-0a1b2c3d", platform="kubernetes", state="RUNNING", image="i",
                          network_arch="dino", action="train", results_dir="/r", backend=backend, transitions=(),
                          attempt=1, created_at="", updated_at="", backend_ref=backend_ref)


def _record_accepts(context: str) -> bool:
    rec = _record({"namespace": "default", "context": context}, "default/dino-train-0a1b2c3d")
    try:
        Kubectl.for_record(rec)
    except TaoError:
        return False
    return True


# ------------------------------------------------------------------ refused at the first step
@pytest.mark.parametrize("bad", BAD_CONTEXTS, ids=repr)
def test_submit_refuses_a_bad_context_flag_before_any_kubectl_call(fake, cli, bad):
    out = cli(*SUBMIT, f"--context={bad}")
    assert out.rc == 1 and len(out.err_lines) == 1, out
    assert "--context" in out.err and "rename-context" in out.err
    assert fake.calls == [] and records.list_records() == []


@pytest.mark.parametrize("bad", ["team a", "-dash", "ctx=prod"])
def test_submit_refuses_a_bad_context_variable_naming_it(fake, cli, monkeypatch, bad):
    monkeypatch.setenv("TAO_K8S_CONTEXT", bad)
    out = cli(*SUBMIT)
    assert out.rc == 1 and len(out.err_lines) == 1 and "TAO_K8S_CONTEXT" in out.err, out
    assert fake.calls == [] and records.list_records() == []


@pytest.mark.parametrize("verb", [["preflight"], ["nccl-probe"]], ids=lambda v: v[0])
def test_every_verb_that_takes_a_context_refuses_it_first(fake, cli, verb):
    out = cli("tao_k8s.py", *verb, "--context=team a")
    assert out.rc == 1 and "--context" in out.err and fake.calls == [], out


@pytest.mark.parametrize("bad", ["Team", "a b", "-x", "x" * 64])
def test_submit_refuses_a_bad_namespace_flag_naming_it(fake, cli, bad):
    out = cli(*SUBMIT, f"--namespace={bad}")
    assert out.rc == 1 and len(out.err_lines) == 1 and "--namespace" in out.err, out
    assert fake.calls == [] and records.list_records() == []


def test_a_context_never_reaches_argv_as_an_option():
    for bad in ("-dash", "--all-namespaces", "-n=kube-system"):
        with pytest.raises(TaoError, match="--context"):
            Kubectl("default", bad)
    argv = Kubectl("default", "arn:aws:eks:us-west-2:1:cluster/a+b@c_d.e").argv("get", "jobs")
    assert argv[1:3] == ["--context", "arn:aws:eks:us-west-2:1:cluster/a+b@c_d.e"]


# ------------------------------------------------------------------ one rule for client and record
@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=260), st.text(alphabet=ALPHABET + " =~é\n", max_size=260),
                 st.sampled_from(BAD_CONTEXTS)))
def test_the_client_and_the_record_check_accept_the_same_contexts(context):
    assert _client_accepts(context) == _record_accepts(context) == (context == "" or names.is_context_name(context))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=70), st.from_regex(r"[a-z0-9-]{1,64}", fullmatch=True), st.integers(1, 99)))
def test_the_client_and_the_record_check_accept_the_same_namespaces(namespace):
    def accepts(make) -> bool:
        try:
            make()
        except TaoError:
            return False
        return True

    rec = _record({"namespace": namespace, "context": ""})
    client = accepts(lambda: Kubectl(namespace, ""))
    record = accepts(lambda: Kubectl.for_record(rec))
    assert client == (names.is_namespace_name(namespace) or namespace == "")  # "" = the default
    assert namespace == "" or record == client


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(context=st.text(alphabet=ALPHABET, min_size=1, max_size=253).filter(_client_accepts))
def test_any_context_submit_accepts_is_read_back_by_status_and_cancel(fake, context):
    _cluster(fake)
    view = platform.get("kubernetes").submit(SPEC, SubmitOptions(context=context))
    jid, uid = view.id, f"uid-{view.id}"
    assert records.load(jid)["backend"]["context"] == context
    seen = len(fake.calls)
    fake.kubectl("get", "jobs,pods", answer=items([job(jid, uid), pod(jid, uid)]))
    (st_view,) = platform.status("kubernetes", [jid])
    assert st_view.state == "RUNNING"
    fake.kubectl("get", "job", jid, answer=job(jid, uid))
    fake.kubectl("get", "pods", "-l", answer=items([pod(jid, uid)]))
    fake.kubectl("logs", answer="last words\n")
    fake.kubectl("delete", "--raw", answer="{}")
    fake.kubectl("delete", "secret,service,configmap", answer="")
    views, errors = platform.cancel("kubernetes", [jid])
    assert errors == [] and views[0].state == "CANCELED"
    calls = fake.calls[seen:]
    assert calls and all(c.context == context for c in calls)  # status and cancel went to the same cluster


@pytest.mark.parametrize("ctx", ["team a", "-dash", "ctx=prod"])
def test_a_dry_run_refuses_the_context_a_real_submit_would_refuse(ctx, tmp_path):
    import subprocess
    import sys

    from taobank import BANK_ROOT

    res = subprocess.run([sys.executable, str(BANK_ROOT / "scripts" / "tao_k8s.py"), "submit", "--dry-run",
                          "--context", ctx, "--image", "x", "--command", "true", "--no-results"],
                         capture_output=True, text=True, timeout=60,
                         env={**__import__("os").environ, "TAO_STATE_DIR": str(tmp_path / "s")})
    assert res.returncode != 0 and "--context" in res.stderr and "Traceback" not in res.stderr, res.stderr
