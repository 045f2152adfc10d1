"""Unit checks of the local cluster's Kueue install (no cluster, no Go): the objects rendered from a config folder
laid out as Kueue's module ships it (config/components/{crd,rbac,webhook}), the controller's Configuration, the
queue objects, the cached build and the lifecycle that starts Kueue alone."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from taobank.errors import TaoError
from testclusters.kubernetes import kueue, kueue_build, lifecycle

URL, CA = "https://127.0.0.1:9443", "Q0E="


def _write(path: Path, *docs: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("---\n" + yaml.safe_dump(d) for d in docs), encoding="utf-8")


def _crd(name: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
            "spec": {"group": "kueue.x-k8s.io", "names": {"kind": "X"}, "versions": []}}


def _hook(name: str, path: str) -> dict:
    return {"admissionReviewVersions": ["v1"], "failurePolicy": "Fail", "name": name, "sideEffects": "None",
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
            "rules": [{"apiGroups": ["x"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["x"]}]}


@pytest.fixture()
def config(tmp_path) -> Path:
    """A config/components folder as Kueue v0.17.0 lays it out (its kustomizations, patches and manifests)."""
    c = tmp_path / "config"
    _write(c / "crd" / "kustomization.yaml", {
        "resources": ["bases/kueue.x-k8s.io_workloads.yaml", "bases/kueue.x-k8s.io_resourceflavors.yaml"],
        "patches": [{"path": "patches/webhook_in_workloads.yaml"}], "configurations": ["kustomizeconfig.yaml"]})
    _write(c / "crd" / "bases" / "kueue.x-k8s.io_workloads.yaml", _crd("workloads.kueue.x-k8s.io"))
    _write(c / "crd" / "bases" / "kueue.x-k8s.io_resourceflavors.yaml", _crd("resourceflavors.kueue.x-k8s.io"))
    _write(c / "crd" / "patches" / "webhook_in_workloads.yaml", {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloads.kueue.x-k8s.io"}, "spec": {"conversion": {"strategy": "Webhook"}}})
    _write(c / "rbac" / "kustomization.yaml", {"resources": ["role.yaml", "role_binding.yaml", "batch_user_role.yaml",
                                                           "manager_secrets_role.yaml", "secrets_binding.yaml"]})
    _write(c / "rbac" / "manager_secrets_role.yaml", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "manager-secrets-role", "namespace": "system"}, "rules": []})
    _write(c / "rbac" / "secrets_binding.yaml", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "manager-secrets-rolebinding", "namespace": "system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "manager-secrets-role"},
        "subjects": [{"kind": "ServiceAccount", "name": "controller-manager", "namespace": "system"}]})
    _write(c / "rbac" / "role.yaml", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                      "metadata": {"name": "manager-role"}, "rules": []})
    _write(c / "rbac" / "role_binding.yaml", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "manager-rolebinding"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "manager-role"},
        "subjects": [{"kind": "ServiceAccount", "name": "controller-manager", "namespace": "system"}]})
    _write(c / "rbac" / "batch_user_role.yaml", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "batch-user-role"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.kueue.x-k8s.io/batch-user": "true"}}]}})
    mutating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "mutating-webhook-configuration"},
                "webhooks": [_hook("mjob.kb.io", "/mutate-batch-v1-job"), _hook("mpod.kb.io", "/mutate--v1-pod"),
                             _hook("mworkload.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-workload")]}
    validating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": "validating-webhook-configuration"},
                  "webhooks": [_hook("vjob.kb.io", "/validate-batch-v1-job"),
                               _hook("vrayjob.kb.io", "/validate-ray-io-v1-rayjob")]}
    _write(c / "webhook" / "manifests.yaml", mutating, validating)
    return c


def test_crds_come_from_the_kustomization_with_the_conversion_webhook_by_url(config):
    objs = kueue.crds(config, URL, CA)
    assert [o["metadata"]["name"] for o in objs] == ["workloads.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io"]
    conv = objs[0]["spec"]["conversion"]
    assert conv == {"strategy": "Webhook", "webhook": {"clientConfig": {"url": URL + "/convert", "caBundle": CA},
                                                       "conversionReviewVersions": ["v1"]}}
    assert "conversion" not in objs[1]["spec"]


def test_a_changed_crd_layout_is_refused(config):
    (config / "crd" / "kustomization.yaml").write_text("resources: []\npatches:\n- path: patches/webhook_in_workloads.yaml\n")
    with pytest.raises(TaoError, match="changed layout"):
        kueue.crds(config, URL, CA)


def test_rbac_is_the_modules_own_prefixed_with_kueue_as_its_subject_and_the_user_bound(config):
    objs = kueue.rbac(config)
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("ClusterRole", "kueue-manager-role"), ("ClusterRoleBinding", "kueue-manager-rolebinding"),
        ("ClusterRole", "kueue-batch-user-role"), ("Role", "kueue-manager-secrets-role"),
        ("RoleBinding", "kueue-manager-secrets-rolebinding")]
    assert objs[2]["aggregationRule"]  # aggregated by the controller-manager, as in a real install
    assert objs[1]["roleRef"]["name"] == "kueue-manager-role"
    assert objs[1]["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                    "name": kueue.CONTROLLER_USER}]
    assert objs[3]["metadata"]["namespace"] == objs[4]["metadata"]["namespace"] == kueue.SYSTEM_NAMESPACE
    binds = {b["metadata"]["name"]: b for b in kueue.bindings("u", "ns")}
    user = binds["kueue-batch-user"]
    assert user["kind"] == "RoleBinding" and user["metadata"]["namespace"] == "ns"
    assert user["roleRef"]["name"] == "kueue-batch-user-role" and user["subjects"][0]["name"] == "u"
    assert binds["kueue-clusterqueue-viewer"]["kind"] == "ClusterRoleBinding"


def test_a_changed_rbac_layout_is_refused(config):
    (config / "rbac" / "kustomization.yaml").write_text("resources: [batch_user_role.yaml]\n")
    with pytest.raises(TaoError, match="changed layout"):
        kueue.rbac(config)


def test_only_job_and_kueue_webhooks_are_kept_called_by_url_and_job_ones_only_for_labelled_jobs(config):
    mutating, validating = kueue.webhooks(config, URL, CA)
    assert mutating["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    assert [h["name"] for h in mutating["webhooks"]] == ["mjob.kb.io", "mworkload.kb.io"]
    assert [h["name"] for h in validating["webhooks"]] == ["vjob.kb.io"]
    for hook in mutating["webhooks"] + validating["webhooks"]:
        assert hook["clientConfig"]["url"].startswith(URL + "/") and hook["clientConfig"]["caBundle"] == CA
        assert "service" not in hook["clientConfig"]
        assert hook["failurePolicy"] == "Fail"  # a labelled Job never runs unadmitted
        (expr,) = hook["namespaceSelector"]["matchExpressions"]
        assert expr["operator"] == "NotIn" and "kube-system" in expr["values"]
    job_hooks = [mutating["webhooks"][0], validating["webhooks"][0]]
    for hook in job_hooks:  # an unlabelled Job never reaches Kueue: a Kueue that is down blocks no one else
        assert hook["objectSelector"] == {"matchExpressions": [{"key": kueue.QUEUE_LABEL, "operator": "Exists"}]}
    assert "objectSelector" not in mutating["webhooks"][1]


def test_controller_config_leaves_unlabelled_jobs_alone_and_serves_on_loopback():
    cfg = kueue.controller_config(webhook_port=1, health_port=2, cert_dir="/c")
    assert cfg["manageJobsWithoutQueueName"] is False
    assert cfg["integrations"] == {"frameworks": ["batch/job"]}
    assert cfg["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": "/c"}
    assert cfg["health"]["healthProbeBindAddress"] == "127.0.0.1:2" and cfg["metrics"]["bindAddress"] == "0"
    assert cfg["internalCertManagement"] == {"enable": False} and cfg["leaderElection"] == {"leaderElect": False}


def test_queue_objects_quota_gpus_and_cover_cpu_and_memory():
    flavor, cq, lq = kueue.queue_objects(cluster_queue="cq", local_queue="lq", namespace="ns", flavor="f", gpus=1)
    assert flavor["kind"] == "ResourceFlavor" and cq["kind"] == "ClusterQueue" and lq["kind"] == "LocalQueue"
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    quota = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    assert quota["nvidia.com/gpu"] == 1 and cq["spec"]["namespaceSelector"] == {}
    assert lq["metadata"] == {"name": "lq", "namespace": "ns"} and lq["spec"] == {"clusterQueue": "cq"}
    assert kueue.LOCAL_QUEUE != "default"  # a "default" LocalQueue would take every other test's Job


def test_kueue_build_is_cached_by_version(monkeypatch, tmp_path):
    monkeypatch.setenv("TAO_CACHE_DIR", str(tmp_path))
    assert kueue_build.build_dir("v0.17.0") == tmp_path / "k8s" / "kueue-v0.17.0"
    assert kueue_build.cached("v0.17.0") is None
    d = kueue_build.build_dir("v0.17.0")
    (d / "bin").mkdir(parents=True)
    (d / "bin" / "kueue").write_text("")
    for part in kueue_build.CONFIG_PARTS:
        (d / "share" / "config" / part).mkdir(parents=True)
    assert kueue_build.cached("v0.17.0") is None  # no build.json: a build that died half-way
    (d / "build.json").write_text(json.dumps({"version": "v0.17.0"}))
    assert kueue_build.cached("v0.17.0") == d
    built = []
    monkeypatch.setattr(kueue_build, "_build", lambda *a: built.append(a))
    assert kueue_build.ensure("v0.17.0") == d and built == []
    assert kueue_build.pin() == "v0.17.0"


def test_a_healthy_kueue_of_the_version_is_left_alone_else_restarted_alone(monkeypatch):
    calls = []
    monkeypatch.setattr(kueue, "_load_cluster", lambda: {"kueue_setup": kueue.digest("v0.17.0")})
    monkeypatch.setattr(kueue, "stop", lambda: calls.append("stop"))
    monkeypatch.setattr(kueue, "start", lambda *a: calls.append(("start",) + a))
    monkeypatch.setattr(kueue, "healthy", lambda data=None: True)
    kueue.ensure(Path("/b"), Path("/c"), "v0.17.0")
    assert calls == []
    kueue.ensure(Path("/b"), Path("/c"), "v0.18.0")
    assert calls == ["stop", ("start", Path("/b"), Path("/c"), "v0.18.0")]
    calls.clear()
    monkeypatch.setattr(kueue, "healthy", lambda data=None: False)
    kueue.ensure(Path("/b"), Path("/c"), "v0.17.0")
    assert calls[0] == "stop" and calls[1][0] == "start"


def test_up_of_a_running_cluster_starts_kueue_without_restarting_the_cluster(monkeypatch, tmp_path):
    monkeypatch.setenv("TAO_LOCAL_CLUSTER_DIR", str(tmp_path))
    events = []
    monkeypatch.setattr(lifecycle, "up_to_date", lambda pins=None, settle=0.0: True)
    monkeypatch.setattr(lifecycle, "_stop_all", lambda: events.append("stop all"))
    monkeypatch.setattr(lifecycle, "_start", lambda *a: events.append("start all"))
    monkeypatch.setattr(lifecycle, "_ensure_kueue", lambda: events.append("kueue"))
    monkeypatch.setattr(lifecycle, "env", lambda: {})
    lifecycle.up()
    assert events == ["kueue"]
