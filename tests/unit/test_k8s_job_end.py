"""When a Kubernetes job ends: its credential Secrets go at once (status: one delete for all the jobs that
just ended; cancel of a finished job), only those labelled with the Job's UID; a pull that only flips
between ErrImagePull and its back-off is one watch line."""
from __future__ import annotations

import json

import pytest

from fakeproc import items, job, k8s_record, pod
from test_orchestration_k8s import SPEC, cluster
from taobank.contract import SubmitOptions
from taobank.core import platform
from taobank import records
from taobank.platforms.kubernetes import OWNER_UID_LABEL

IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:x"
PULL_ERROR = (f'failed to pull and unpack image "{IMAGE}": failed to resolve reference "{IMAGE}": '
              "pulling from host 127.0.0.1:5000 failed with status code [manifests x]: 401 Unauthorized")


def with_secrets(rec: dict) -> dict:
    """The record as a submit with --secret-env/--ngc-pull-secret leaves it (backend.owned)."""
    jid = rec["id"]
    return records.mark(jid, rec["state"], backend={"owned": f"secret/tao-creds-{jid},secret/tao-pull-{jid}"})


def deletes(fake) -> list:
    return fake.kubectl_calls("delete")


def selector(call) -> str:
    return call.words[call.words.index("-l") + 1]


def cluster_says(fake, ends: dict[str, str]) -> None:
    """The one list call: ``ends`` id -> RUNNING | COMPLETE | ERROR."""
    def answer(call):
        objs = []
        for jid, end in ends.items():
            objs.append(job(jid, f"uid-{jid}", condition={"COMPLETE": "Complete", "ERROR": "Failed"}.get(end)))
            objs.append(pod(jid, f"uid-{jid}", {"COMPLETE": "Succeeded", "ERROR": "Failed"}.get(end, "Running")))
        return items(objs)

    fake.kubectl("get", "jobs,pods", answer=answer)
    fake.kubectl("logs", answer="last words\n")


def test_status_deletes_the_secrets_of_jobs_that_just_ended_in_one_call(fake):
    done, failed, plain, running = (with_secrets(k8s_record()), with_secrets(k8s_record()), k8s_record(),
                                    with_secrets(k8s_record()))
    ends = {done["id"]: "COMPLETE", failed["id"]: "ERROR", plain["id"]: "COMPLETE", running["id"]: "RUNNING"}
    cluster_says(fake, ends)
    fake.kubectl("delete", "secret", answer=f"secret/tao-creds-{done['id']}\n")
    views = platform.status("kubernetes")
    assert {v.id: v.state for v in views} == {**ends, running["id"]: "RUNNING"}
    (call,) = deletes(fake)  # one call for both ended jobs with Secrets; none for the one without
    assert call.words[:2] == ["delete", "secret"]
    assert selector(call) == f"{OWNER_UID_LABEL} in ({','.join(sorted(['uid-' + done['id'], 'uid-' + failed['id']]))})"
    assert "--ignore-not-found" in call.words
    assert len([c for c in fake.of("kubectl") if c.words[0] == "get"]) == 1  # still one list call
    platform.status("kubernetes", [done["id"], failed["id"], running["id"]])  # nothing new ended
    assert len(deletes(fake)) == 1


def test_no_job_ended_means_no_delete_call(fake):
    rec = with_secrets(k8s_record())
    cluster_says(fake, {rec["id"]: "RUNNING"})
    platform.status("kubernetes")
    assert deletes(fake) == [] and len(fake.of("kubectl")) == 1


def test_a_failed_delete_never_fails_status_and_says_the_ttl_removes_them(fake):
    rec = with_secrets(k8s_record())
    cluster_says(fake, {rec["id"]: "COMPLETE"})
    fake.kubectl("delete", "secret", rc=1, stderr='Error from server (Forbidden): secrets is forbidden')
    (view,) = platform.status("kubernetes")
    assert view.state == "COMPLETE" == records.load(rec["id"])["state"]
    assert "Secrets were not deleted now" in view.message and "TTL" in view.message


def test_submit_labels_the_secrets_with_the_job_uid(fake, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_value-1234")
    cluster(fake)
    view = platform.get("kubernetes").submit(SPEC, SubmitOptions(secret_env=("HF_TOKEN",)))
    (secret,) = [json.loads(c.stdin) for c in fake.kubectl_calls("create") if json.loads(c.stdin)["kind"] == "Secret"]
    assert secret["metadata"]["labels"][OWNER_UID_LABEL] == f"uid-{view.id}"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == f"uid-{view.id}"


@pytest.mark.parametrize("end", ["COMPLETE", "ERROR"])
def test_cancel_of_a_finished_job_deletes_its_secrets_by_the_job_uid(fake, cli, end):
    rec = with_secrets(k8s_record())
    records.mark(rec["id"], end, err_class="ERR_PROGRAM" if end == "ERROR" else None)
    fake.kubectl("delete", "secret", answer=f"secret/tao-creds-{rec['id']}\nsecret/tao-pull-{rec['id']}\n")
    out = cli("tao_k8s.py", "cancel", rec["id"])
    assert out.rc == 0, out
    assert f"already {end}: nothing to cancel; deleted its credential Secret(s) tao-creds-{rec['id']}" in out.out
    (call,) = deletes(fake)
    assert selector(call) == f"{OWNER_UID_LABEL} in (uid-{rec['id']})"
    assert records.load(rec["id"])["state"] == end


def test_cancel_of_a_job_that_finished_unseen_deletes_its_secrets(fake):
    rec = with_secrets(k8s_record())
    jid = rec["id"]
    fake.kubectl("get", "job", jid, answer=job(jid, f"uid-{jid}", condition="Complete"))
    fake.kubectl("get", "pods", "-l", answer=items([pod(jid, f"uid-{jid}", "Succeeded")]))
    fake.kubectl("logs", answer="done\n")
    fake.kubectl("delete", "secret", answer="")
    (view,), errors = platform.cancel("kubernetes", [jid])
    assert errors == [] and view.state == "COMPLETE"
    assert "nothing to cancel; its credential Secrets are gone already" in view.message
    assert [selector(c) for c in deletes(fake)] == [f"{OWNER_UID_LABEL} in (uid-{jid})"]


def test_cancel_of_a_canceled_or_credential_free_job_calls_nobody(fake):
    canceled = with_secrets(k8s_record())
    records.mark(canceled["id"], "CANCELED")  # its Job was deleted: the garbage collector took the Secrets
    plain = k8s_record()
    records.mark(plain["id"], "COMPLETE")
    views, errors = platform.cancel("kubernetes", [canceled["id"], plain["id"]])
    assert errors == [] and [v.message for v in views] == ["already CANCELED: nothing to cancel",
                                                           "already COMPLETE: nothing to cancel"]
    assert fake.calls == []


# ------------------------------------------------------------------ a pull that flips
def waiting_pod(jid: str, reason: str, message: str) -> dict:
    p = pod(jid, f"uid-{jid}", "Pending")
    p["status"]["containerStatuses"] = [{"name": "main", "image": IMAGE,
                                         "state": {"waiting": {"reason": reason, "message": message}}}]
    return p


BACKOFF = f'Back-off pulling image "{IMAGE}": ErrImagePull: {PULL_ERROR}'
OLD_BACKOFF = f'Back-off pulling image "{IMAGE}"'  # kubelets before the error was repeated


@pytest.mark.parametrize("backoff", [BACKOFF, OLD_BACKOFF], ids=["backoff-with-error", "bare-backoff"])
def test_a_pull_flipping_between_errimagepull_and_backoff_is_one_watch_line(fake, backoff):
    rec = k8s_record(state="PENDING")
    jid = rec["id"]
    flips = [("ErrImagePull", PULL_ERROR), ("ImagePullBackOff", backoff)] * 3

    def answer(call):
        if flips:
            reason, message = flips.pop(0)
            return items([job(jid, f"uid-{jid}"), waiting_pod(jid, reason, message)])
        return items([job(jid, f"uid-{jid}", condition="Complete"), pod(jid, f"uid-{jid}", "Succeeded")])

    fake.kubectl("get", "jobs,pods", answer=answer)
    fake.kubectl("logs", answer="done\n")
    lines: list[str] = []
    views = platform.watch("kubernetes", [jid], on_line=lines.append, sleep=lambda _: None)
    assert views[0].state == "COMPLETE"
    assert [line.split()[1] for line in lines] == ["PENDING", "COMPLETE"], lines
    assert "401 Unauthorized" in lines[0] and "Back-off" not in lines[0]
