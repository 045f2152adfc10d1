"""Unit checks of the local Kubernetes cluster's static parts (no cluster needed)."""
from __future__ import annotations

import json
import re

import yaml

from testclusters.kubernetes import k8s_build, k8s_objects, k8s_pki
import testclusters.kubernetes as lk

KUBERNETES_GOMOD = """module k8s.io/kubernetes

go 1.24.0

require (
\tgo.etcd.io/etcd/server/v3 v3.6.4 // indirect
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/example/x => github.com/example/y v1.0.0
)
"""


def test_staging_modules_come_from_kubernetes_go_mod():
    assert k8s_build.staging_modules(KUBERNETES_GOMOD) == ["k8s.io/api", "k8s.io/client-go"]


def test_wrapper_go_mod_pins_staging_modules_to_v0_twin():
    text = k8s_build.k8s_gomod({"version": "v1.34.4", "etcd": "v3.6.4", "kwok": "v0.8.0"}, KUBERNETES_GOMOD)
    assert "\tk8s.io/api => k8s.io/api v0.34.4" in text
    assert "\tk8s.io/client-go => k8s.io/client-go v0.34.4" in text
    assert "\tk8s.io/kubernetes v1.34.4" in text and "\tgo.etcd.io/etcd/server/v3 v3.6.4" in text


def test_committed_modules_match_the_pins():
    """Changing a pin without rerunning gen_gomod.py would silently build from scratch."""
    assert k8s_build._committed_matches(k8s_build.pins())
    committed = (k8s_build.MODULES_DIR / "k8s" / "go.mod").read_text()
    staging = re.findall(r"^\t(k8s\.io/[\w.-]+) => \1 (v\S+)$", committed, re.M)
    assert len(staging) >= 25
    want = "v0" + k8s_build.pins()["version"][2:]
    assert {v for _, v in staging} == {want}


def test_version_ldflags_stamp_component_base_and_client_go():
    flags = k8s_build.version_ldflags("v1.34.4")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.34.4" in flags
        assert f"-X {pkg}.gitMajor=1" in flags and f"-X {pkg}.gitMinor=34" in flags


def test_cache_dir_is_keyed_by_every_pin(monkeypatch, tmp_path):
    monkeypatch.setenv("TAO_CACHE_DIR", str(tmp_path))
    d = k8s_build.build_dir({"version": "v1.34.4", "etcd": "v3.6.4", "kwok": "v0.8.0"})
    assert d == tmp_path / "k8s" / "v1.34.4-etcdv3.6.4-kwokv0.8.0"
    assert k8s_build.cached({"version": "v1.34.4", "etcd": "v3.6.4", "kwok": "v0.8.0"}) is None


def test_stages_read_exactly_the_documented_annotations():
    text = lk.STAGES_FILE.read_text()
    docs = list(yaml.safe_load_all(text))
    assert {d["metadata"]["name"] for d in docs} >= {"pod-ready", "pod-complete", "pod-fail", "pod-delete",
                                                    "node-initialize"}
    used = set(re.findall(r"fake\.tao-skill-bank\.local/[\w-]+", text))
    documented = {lk.START_DELAY_ANNOTATION, lk.RUN_DURATION_ANNOTATION, lk.FAIL_EXIT_CODE_ANNOTATION,
                  lk.FAIL_REASON_ANNOTATION, lk.KEEP_RUNNING_ANNOTATION, lk.WAITING_REASON_ANNOTATION,
                  lk.WAITING_MESSAGE_ANNOTATION, k8s_objects.FAKE_PREFIX + "kubelet-version", k8s_objects.FAKE_PREFIX + "container-runtime-version"}
    assert used == documented
    body = (lk.BANK_ROOT / "docs" / "local-kubernetes-cluster.md").read_text()
    for key in (lk.RUN_DURATION_ANNOTATION, lk.FAIL_EXIT_CODE_ANNOTATION, lk.FAIL_REASON_ANNOTATION,
                lk.KEEP_RUNNING_ANNOTATION, lk.START_DELAY_ANNOTATION, lk.WAITING_REASON_ANNOTATION,
                lk.WAITING_MESSAGE_ANNOTATION):
        assert key in body, key


def test_fake_nodes_advertise_gpus_and_one_is_cordoned():
    n = k8s_objects.node(lk.CORDONED_NODE, kubelet_version="v1.34.4", unschedulable=True)
    assert n["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert n["spec"]["unschedulable"] is True
    assert n["metadata"]["labels"][k8s_objects.FAKE_NODE_LABEL] == "true"
    assert "unschedulable" not in k8s_objects.node(lk.GPU_NODES[0], kubelet_version="v1.34.4")["spec"]


def test_restricted_role_is_namespaced_and_node_access_read_only():
    role, binding, node_role, node_binding = k8s_objects.rbac()
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == lk.NAMESPACE
    assert node_role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
    assert binding["subjects"][0]["name"] == node_binding["subjects"][0]["name"] == lk.USER_NAME


def test_kubeconfig_references_files_and_holds_no_key_material(tmp_path):
    text = k8s_pki.kubeconfig("https://127.0.0.1:1", tmp_path, [("ctx", "u", "user")], "ctx", "ns")
    cfg = json.loads(text)
    assert cfg["current-context"] == "ctx"
    assert cfg["contexts"][0]["context"]["namespace"] == "ns"
    assert "-data" not in text and "PRIVATE KEY" not in text


def test_cri_log_format():
    assert k8s_objects.cri_log(["a b"], stamp="T") == "T stdout F a b\n"


def test_env_without_a_cluster_names_paths_under_the_state_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TAO_LOCAL_CLUSTER_DIR", str(tmp_path))
    env = lk.env()
    assert env["KUBECONFIG"] == str(tmp_path / "kubernetes" / "admin.kubeconfig")
    assert env[lk.USER_KUBECONFIG_ENV] == str(tmp_path / "kubernetes" / "user.kubeconfig")
    assert env[lk.KUBECTL_ENV].endswith("/bin/kubectl")
    assert lk.status()["ready"] is False


def test_concurrent_ensure_binaries_build_once(monkeypatch, tmp_path):
    """Two `up` calls racing on a cold cache: the lock makes the second wait and reuse the build."""
    import threading
    import time

    monkeypatch.setenv("TAO_CACHE_DIR", str(tmp_path))
    p = {"version": "v1.34.4", "etcd": "v3.6.4", "kwok": "v0.8.0"}
    builds = []

    def fake_build(d, pins):
        builds.append(pins)
        time.sleep(0.5)
        (d / "bin").mkdir(parents=True)
        for b in k8s_build.BINARIES:
            (d / "bin" / b).write_text("")
        (d / "build.json").write_text("{}")

    monkeypatch.setattr(k8s_build, "_build", fake_build)
    monkeypatch.setattr("sys.stderr", open("/dev/null", "w"))
    results = []
    threads = [threading.Thread(target=lambda: results.append(k8s_build.ensure_binaries(p))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1
    assert results == [k8s_build.build_dir(p)] * 2


def test_apiserver_encrypts_secrets_at_rest_with_a_private_random_key(monkeypatch, tmp_path):
    from testclusters.kubernetes import control_plane

    monkeypatch.setenv("TAO_LOCAL_CLUSTER_DIR", str(tmp_path))
    path = control_plane._write_encryption_config()
    assert path.parent == lk.state_root() / "pki"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    config = yaml.safe_load(path.read_text())
    assert config["kind"] == "EncryptionConfiguration"
    (rule,) = config["resources"]
    assert rule["resources"] == ["secrets"]
    first, fallback = rule["providers"]
    (key,) = first[control_plane.ENCRYPTION_PROVIDER]["keys"]
    import base64

    assert len(base64.b64decode(key["secret"])) == 32 and fallback == {"identity": {}}
    assert control_plane._write_encryption_config() == path and yaml.safe_load(path.read_text()) == config  # once
    argv = control_plane._apiserver_argv("kube-apiserver", {"etcd": 1, "apiserver": 2})
    assert f"--encryption-provider-config={path}" in argv
    assert control_plane.ENCRYPTED_PREFIX == "k8s:enc:secretbox:v1:"
