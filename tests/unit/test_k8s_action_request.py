"""Action requests without a cluster: schema, backend names, mounts and aliases, embedded paths, modes."""
from __future__ import annotations

import json

import pytest

from taobank.errors import TaoError
from taobank.platforms.kubernetes import action_request as ar
from taobank.platforms.kubernetes.render import find, render_manifests, sha256_text


def write(tmp_path, req: dict):
    p = tmp_path / "req.json"
    p.write_text(json.dumps(req))
    return p


def base(**kw) -> dict:
    req = {"backend": "kubernetes", "image": "img", "mode": "args", "argv": ["tao", "run"],
           "mounts": [{"source": {"pvc": "data"}, "path": "/data", "aliases": ["/abs/embedded/data"], "read_only": True},
                      {"source": {"pvc": "ws"}, "path": "/results"}]}
    req.update(kw)
    return req


@pytest.mark.parametrize("name", ["k8s", "K8S", "kube", "Kubernetes", "kubernetes"])
def test_backend_names_normalise(tmp_path, name):
    assert ar.load(write(tmp_path, base(backend=name)))["image"] == "img"


def test_other_backend_refused(tmp_path):
    with pytest.raises(TaoError, match="not kubernetes"):
        ar.load(write(tmp_path, base(backend="slurm")))


@pytest.mark.parametrize("bad,where", [
    ({"mode": "config"}, "config"),                      # config mode needs config
    ({"argv": [], "mode": "args"}, "argv"),
    ({"extra": 1}, "extra"),
    ({"mounts": [{"source": {"pvc": "Bad_Name"}, "path": "/d"}]}, "mounts/0/source"),
    ({"mounts": [{"source": {"pvc": "d"}, "path": "relative"}]}, "mounts/0/path"),
])
def test_schema_errors_are_one_line(tmp_path, bad, where):
    with pytest.raises(TaoError) as exc:
        ar.load(write(tmp_path, base(**bad)))
    assert "action-request.schema.json" in str(exc.value) and "\n" not in str(exc.value)


def test_aliases_share_one_volume_and_args_are_native(tmp_path):
    spec, config = ar.to_job_spec(write(tmp_path, base(argv=["python3", "-c", "print('$(id)')"])))
    assert config is None and spec["args"] == ["python3", "-c", "print('$(id)')"]
    job = find(render_manifests(spec, job_id="x-1", namespace="default"), "Job")
    c = job["spec"]["template"]["spec"]["containers"][0]
    # the argv reaches the log-copy wrapper as "$@": never re-parsed by a shell
    assert c["command"][:2] == ["/bin/sh", "-c"] and c["command"][3:] == ["tao-main", "python3", "-c", "print('$(id)')"]
    names = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert names["/data"] == names["/abs/embedded/data"]
    assert ar.staging_map(ar.load(write(tmp_path, base())))[1]["pod_path"] == "/abs/embedded/data"


def test_config_mode_checks_embedded_paths_and_hash(tmp_path):
    req = base(mode="config", argv=["dino", "train", "-e", "{config_path}"],
               config={"data": "/abs/embedded/data/train.json", "out": "/results/run", "lr": 0.1},
               results_dir="/results")
    path = write(tmp_path, req)
    text = ar.materialize(req)
    cfg = tmp_path / "spec.yaml"
    cfg.write_text(text)
    spec, config = ar.to_job_spec(path, config_file=str(cfg), config_sha256=sha256_text(text))
    assert spec["args"] == ["dino", "train", "-e", ar.DEFAULT_CONFIG_PATH]
    assert config["text"] == text and config["mount_path"] == ar.DEFAULT_CONFIG_PATH
    with pytest.raises(TaoError, match="sha256"):
        ar.to_job_spec(path, config_file=str(cfg), config_sha256="0" * 64)
    other = tmp_path / "other.yaml"
    other.write_text("lr: 0.2\n")
    with pytest.raises(TaoError, match="not the materialised config"):
        ar.to_job_spec(path, config_file=str(other), config_sha256=sha256_text("lr: 0.2\n"))
    req["config"]["data"] = "/elsewhere/train.json"
    with pytest.raises(TaoError, match="/elsewhere/train.json"):
        ar.to_job_spec(write(tmp_path, req), config_file=str(cfg), config_sha256=sha256_text(text))


def test_script_is_kept_verbatim_under_sh(tmp_path):
    script = "set -e\nfor f in /data/*; do echo \"$f\"; done\n"
    req = base(script=script)
    del req["argv"]
    spec, _ = ar.to_job_spec(write(tmp_path, req))
    job = find(render_manifests(spec, job_id="x-1", namespace="default"), "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][4:] == ["/bin/sh", "-c", script]
