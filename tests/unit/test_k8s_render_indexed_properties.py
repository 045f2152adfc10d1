"""The multi-node (Indexed Job + Service) template: hostile values land exactly where intended too."""
from __future__ import annotations

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from taobank import multinode
from taobank.platforms.kubernetes import render
from taobank.platforms.kubernetes.render import RENDEZVOUS_ENV, find, render_manifests
from taobank.redact import is_credential_name
from taobank.render import dump_yaml

HOSTILE = ['"', "'", "\n", "\b", "\\b", "{{ x }}", "{% if %}", "a: b", "- x", '{"a": 1}', "$(id)", "`id`",
           "${HOME}", "#", "---", "&a", "*a", "!!python/object", "\t", "\u2028", "yes", "null", "~",
           "securityContext:\n  privileged: true"]
text = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=30),
                 st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=4).map("".join))
env_key = st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True).filter(
    lambda k: k not in RENDEZVOUS_ENV and k not in render.RESERVED_ENV and not k.startswith("NCCL_")
    and not is_credential_name(k))  # credential names are refused as plain env (they go as secrets)
JOB_ID = "dino-train-0a1b2c3d"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(image=text.filter(bool), command=text, env=st.dictionaries(env_key, text, max_size=3),
       nccl=st.dictionaries(st.from_regex(r"NCCL_[A-Z]{1,8}", fullmatch=True).filter(lambda k: not is_credential_name(k)),
                            text, max_size=2),
       annotations=st.dictionaries(text.filter(bool), text, max_size=2),
       nodes=st.integers(min_value=2, max_value=5), gpus=st.integers(min_value=0, max_value=8))
def test_indexed_job_values_land_verbatim(image, command, env, nccl, annotations, nodes, gpus):
    spec = {"image": image, "command": command, "env": env, "nccl_env": nccl, "pod_annotations": annotations,
            "nodes": nodes, "gpus": gpus, "no_results": True}
    objs = render_manifests(spec, job_id=JOB_ID, namespace="tao-jobs")
    assert list(yaml.safe_load_all(dump_yaml(objs))) == objs
    assert sorted(o["kind"] for o in objs) == ["Job", "Service"]
    job, svc = find(objs, "Job"), find(objs, "Service")
    for o in objs:
        assert o["metadata"]["namespace"] == "tao-jobs" and o["metadata"]["labels"]["tao-job-id"] == JOB_ID
    pod = job["spec"]["template"]["spec"]
    assert set(pod) <= {"restartPolicy", "subdomain", "containers", "volumes", "nodeSelector", "tolerations",
                        "imagePullSecrets", "hostname", "setHostnameAsFQDN"}  # nothing injected into the pod spec
    (c,) = pod["containers"]
    # each rank runs the user's command under the node guard (a command naming no spec file: no copies)
    assume(not {"-e", "--experiment_spec_file"} & set(multinode.shell_words(command)))
    assert c["image"] == image and c["command"][-3:] == ["/bin/sh", "-c", command]
    assert c["command"][:4] == ["/bin/sh", "-c", render.kube_literal(multinode.GUARD_SCRIPT), "tao-node"]
    assert c["command"][4:-3] == [str(multinode.rank0_name_wait_s()), str(nodes), "0"]
    assert "securityContext" not in c and "securityContext" not in pod
    got = {e["name"]: e.get("value") for e in c["env"] if "value" in e}
    for k, v in {**env, **nccl}.items():
        assert got[k] == v
    assert got["WORLD_SIZE"] == str(nodes) and got["NPROC_PER_NODE"] == str(gpus)
    assert (job["spec"]["template"]["metadata"].get("annotations") or {}) == annotations
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == nodes
    assert svc["spec"]["selector"] == {"tao-job-id": JOB_ID} and svc["spec"]["clusterIP"] == "None"
