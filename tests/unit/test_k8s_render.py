"""Rendering: any input string lands exactly where intended; optional fields omitted."""
from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taobank import pins
from taobank.errors import TaoError
from taobank.redact import is_credential_name
from taobank.platforms.kubernetes import render
from taobank.platforms.kubernetes.render import RENDEZVOUS_ENV, find, render_manifests
from taobank.render import dump_yaml

HOSTILE = [
    '"', "'", "\n", "\b", "\\b", "{{ x }}", "{% if %}", "}}", "a: b", "- x", "[1, 2]", '{"a": 1}',
    "$(rm -rf /)", "`id`", "${HOME}", "#", "---", "...", "&anchor", "*alias", "!!python/object", "\t",
    "\x00", "\x85", "\u2028", "\x7f", "yes", "null", "1e3", "0x10", "~", "securityContext:\n  privileged: true",
]
text = st.one_of(st.sampled_from(HOSTILE), st.text(min_size=0, max_size=40),
                 st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=4).map("".join))
nonempty = text.filter(lambda s: s != "")
env_key = st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True).filter(  # a credential's name goes in a Secret
    lambda k: k not in RENDEZVOUS_ENV and k not in render.RESERVED_ENV and not is_credential_name(k))

JOB_ID = "dino-train-0a1b2c3d"
LABELS = {"tao-job-id": JOB_ID, "app.kubernetes.io/managed-by": "tao-skill-bank"}


def expected_single_job(image, command, env, annotations, node_selector, ns):
    """The Job we intend, written out by hand (not by the renderer)."""
    pod_meta = {"labels": dict(LABELS)}
    if annotations:
        pod_meta["annotations"] = annotations
    spec = {"restartPolicy": "Never"}
    if node_selector:
        spec["nodeSelector"] = node_selector
    spec["containers"] = [{
        "name": "main",
        "image": image,
        "command": ["/bin/sh", "-c", command],
        "env": [{"name": "TAO_JOB_ID", "value": JOB_ID}] + [{"name": k, "value": v} for k, v in env.items()],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }]
    spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory",
                                                      "sizeLimit": pins.resolve("kubernetes.shm_size_single")}}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": JOB_ID, "namespace": ns, "labels": dict(LABELS)},
        "spec": {
            "backoffLimit": pins.resolve("kubernetes.disruption_retries"),
            "podFailurePolicy": render.failure_policy(),
            "ttlSecondsAfterFinished": pins.resolve("kubernetes.ttl_seconds_after_finished"),
            "template": {"metadata": pod_meta, "spec": spec},
        },
    }


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    image=nonempty, command=text,
    env=st.dictionaries(env_key, text, max_size=4),
    annotations=st.dictionaries(nonempty, text, max_size=3),
    node_selector=st.dictionaries(nonempty, text, max_size=2),
    ns=st.sampled_from(["default", "tao-jobs", "a"]),
)
def test_single_job_equals_intended_object(image, command, env, annotations, node_selector, ns):
    spec = {"image": image, "command": command, "env": env, "pod_annotations": annotations,
            "node_selector": node_selector, "gpus": 1, "no_results": True}
    objs = render_manifests(spec, job_id=JOB_ID, namespace=ns)
    assert objs == [expected_single_job(image, command, env, annotations, node_selector, ns)]
    # and the YAML we print/apply parses back to the same objects
    assert list(yaml.safe_load_all(dump_yaml(objs))) == objs


@settings(max_examples=60, deadline=None)
@given(argv=st.lists(text, min_size=1, max_size=5), paths=st.lists(nonempty, min_size=1, max_size=3, unique=True),
       claim=st.sampled_from(["data", "results-pvc"]))
def test_args_mode_and_mounts_land_verbatim(argv, paths, claim):
    mounts = [{"pvc": claim, "mount_path": "/" + p} for p in paths]
    spec = {"image": "img", "args": argv, "gpus": 0, "mounts": mounts, "log_copy": False}
    job = find(render_manifests(spec, job_id=JOB_ID, namespace="default"), "Job")
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == argv  # native argv, no shell
    assert "resources" not in c  # gpus=0: no GPU limit at all
    assert [m["mountPath"] for m in c["volumeMounts"][1:]] == ["/" + p for p in paths]
    vols = job["spec"]["template"]["spec"]["volumes"]
    assert vols[1:] == [{"name": "data-0", "persistentVolumeClaim": {"claimName": claim}}]  # aliases share one volume


def test_optional_fields_absent_when_unused():
    job = find(render_manifests({"image": "i", "command": "c", "no_results": True}, job_id=JOB_ID, namespace="default"), "Job")
    pod = job["spec"]["template"]["spec"]
    for key in ("imagePullSecrets", "nodeSelector", "tolerations", "initContainers", "shareProcessNamespace"):
        assert key not in pod
    assert "envFrom" not in pod["containers"][0]
    assert "activeDeadlineSeconds" not in job["spec"]
    assert "annotations" not in job["spec"]["template"]["metadata"]
    text = dump_yaml([job])
    assert "secretRef" not in text and "null" not in text


def test_credentials_referenced_only_by_name_when_present():
    spec = {"image": "i", "command": "c", "cpu": "2", "memory": "4Gi", "active_deadline_seconds": 60,
            "tolerations": [{"key": "k", "operator": "Exists"}], "image_pull_secret": "ngc-pull", "no_results": True}
    job = find(render_manifests(spec, job_id=JOB_ID, namespace="default", cred_secret="tao-creds-x",
                                pull_secrets=["tao-pull-x"]), "Job")
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": "tao-creds-x"}}]
    assert pod["imagePullSecrets"] == [{"name": "tao-pull-x"}, {"name": "ngc-pull"}]
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "2", "memory": "4Gi"}
    assert job["spec"]["activeDeadlineSeconds"] == 60


def test_single_pod_job_essentials():
    job = find(render_manifests({"image": "i", "command": "c", "gpus": 2, "no_results": True}, job_id=JOB_ID, namespace="ns1"), "Job")
    assert job["metadata"]["namespace"] == "ns1"
    assert job["spec"]["backoffLimit"] == 3 and job["spec"]["ttlSecondsAfterFinished"] > 0
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert rules[1] == {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}}
    old = find(render_manifests({"image": "i", "command": "c", "no_results": True}, job_id=JOB_ID, namespace="ns1",
                                retry_disruptions=False), "Job")
    assert old["spec"]["backoffLimit"] == 0 and "podFailurePolicy" not in old["spec"]  # server below 1.26
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["command"][:2] == ["/bin/sh", "-c"]  # never bash
    assert "bash" not in dump_yaml([job])
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert pod["volumes"][0]["emptyDir"]["medium"] == "Memory"


def test_multinode_service_and_rendezvous_env():
    objs = render_manifests({"image": "i", "command": "torchrun ...", "gpus": 8, "nodes": 4,
                             "nccl_env": {"NCCL_SOCKET_IFNAME": "eth0"}, "no_results": True},
                            job_id=JOB_ID, namespace="default")
    svc, job = find(objs, "Service"), find(objs, "Job")
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {"tao-job-id": JOB_ID}
    assert svc["metadata"]["labels"]["tao-job-id"] == JOB_ID
    js = job["spec"]
    assert js["completionMode"] == "Indexed" and js["parallelism"] == js["completions"] == 4
    pod = js["template"]["spec"]
    assert pod["subdomain"] == svc["metadata"]["name"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["containers"][0]["env"]}
    assert env["WORLD_SIZE"] == "4" and env["NNODES"] == "4"
    assert env["NUM_GPU_PER_NODE"] == "8" and env["NPROC_PER_NODE"] == "8"
    assert env["NODE_RANK"] == {"fieldRef": {"fieldPath":
                                             "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert env["MASTER_ADDR"] == f"{JOB_ID}-0.{JOB_ID}"
    assert env["MASTER_PORT"] == str(pins.resolve("kubernetes.master_port"))
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert pod["volumes"][0]["emptyDir"]["sizeLimit"] == "16Gi"


@pytest.mark.parametrize("key", RENDEZVOUS_ENV)
def test_multinode_refuses_user_override_of_rendezvous_env(key):
    with pytest.raises(TaoError, match=key):
        render_manifests({"image": "i", "command": "c", "nodes": 2, "env": {key: "x"}, "no_results": True},
                         job_id=JOB_ID, namespace="default")


@settings(max_examples=50, deadline=None)
@given(uris=st.lists(nonempty, min_size=1, max_size=3), cmd=text)
def test_tier_c_passes_uris_as_argv_and_keeps_user_command(uris, cmd):
    spec = {"image": "i", "command": cmd, "storage_tier": "C", "staging_dir": "/stage",
            "s3_inputs": [{"uri": "s3://b/" + u, "path": f"/stage/in{i}"} for i, u in enumerate(uris)],
            "s3_outputs": [{"path": "/stage/out", "uri": "s3://b/results/"}], "no_results": True}
    job = find(render_manifests(spec, job_id=JOB_ID, namespace="default", cred_secret="tao-creds-x"), "Job")
    pod = job["spec"]["template"]["spec"]
    fetch = pod["initContainers"][0]
    assert fetch["image"] == pins.resolve("images.s3_client")
    assert fetch["command"][:2] == ["/bin/sh", "-c"] and fetch["command"][2] == render.kube_literal(render.FETCH_SCRIPT)
    assert fetch["command"][4:] == [x for i, u in enumerate(uris) for x in ("s3://b/" + u, f"/stage/in{i}")]
    assert fetch["envFrom"] == [{"secretRef": {"name": "tao-creds-x"}}]
    main, upload = pod["containers"]
    assert main["command"][4:] == ["/bin/sh", "-c", cmd]  # user command is a positional arg, never spliced
    assert upload["command"][4:] == ["/stage/out", "s3://b/results/"]
    assert pod["shareProcessNamespace"] is True


def test_tier_c_requires_credentials_and_staged_paths():
    spec = {"image": "i", "command": "c", "storage_tier": "C", "s3_inputs": [{"uri": "s3://b/x", "path": "/data/x"}],
            "no_results": True}
    with pytest.raises(TaoError, match="credentials"):
        render_manifests({**spec, "s3_inputs": [{"uri": "s3://b/x", "path": "/tao-staging/x"}]},
                         job_id=JOB_ID, namespace="default")
    with pytest.raises(TaoError, match="staging_dir"):
        render_manifests(spec, job_id=JOB_ID, namespace="default", cred_secret="s")


@pytest.mark.parametrize("arch", ["deformable_detr", "action_recognition", "visual_changenet", "DINO", "ocdnet"])
def test_every_arch_gives_valid_names(arch):
    from taobank import names

    job_id = names.mint_job_id(arch, "train")
    for n in (render.job_name_for(job_id), render.cred_secret_name(job_id), render.config_map_name(job_id)):
        assert names.is_dns1123_label(n)
    assert names.is_dns1035_label(render.job_name_for(job_id))  # also the Service name
    assert len(render.job_name_for(job_id) + "-99999") <= 63  # pod hostname <job>-<index>


def test_config_mount_is_read_only_and_hashed():
    objs = render_manifests({"image": "i", "args": ["dino", "train", "-e", "/cfg/spec.yaml"], "no_results": True}, job_id=JOB_ID,
                            namespace="default", config={"text": "a: 1\n", "mount_path": "/cfg/spec.yaml"})
    cm, job = find(objs, "ConfigMap"), find(objs, "Job")
    digest = render.sha256_text("a: 1\n")
    assert cm["data"] == {"config": "a: 1\n"}
    assert cm["metadata"]["annotations"][render.CONFIG_SHA_ANNOTATION] == digest
    vm = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][-1]
    assert vm == {"name": "tao-config", "mountPath": "/cfg/spec.yaml", "subPath": "config", "readOnly": True}
    with pytest.raises(TaoError, match="sha256"):
        render_manifests({"image": "i", "command": "c", "no_results": True}, job_id=JOB_ID, namespace="default",
                         config={"text": "a: 2\n", "mount_path": "/c", "sha256": digest})


def test_render_does_not_mutate_spec():
    spec = {"image": "i", "command": "c", "env": {"A": "1"}, "mounts": [{"pvc": "p", "mount_path": "/d"}]}
    before = copy.deepcopy(spec)
    render_manifests(spec, job_id=JOB_ID, namespace="default")
    assert spec == before
