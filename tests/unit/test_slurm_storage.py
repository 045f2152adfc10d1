"""Cluster paths, dataset modes, results/job dirs, staging bundle, secrets."""
import base64
import io
import tarfile

import pytest

from taobank.errors import TaoError
from taobank.platforms.slurm import storage


@pytest.mark.parametrize("uri,path", [
    ("lustre:///lustre/fsw/data", "/lustre/fsw/data"),
    ("lustre:///lustre/fsw/data/../x/", "/lustre/fsw/x"),
    ("slurm:///lustre/a", "/lustre/a"),
    ("slurm://cluster-a/lustre/a", "/lustre/a"),
])
def test_cluster_paths(uri, path):
    assert storage.cluster_path(uri) == path


@pytest.mark.parametrize("uri,why", [
    ("/home/me/data", "local path"), ("file:///home/me/data", "local path"), ("data/train", "local path"),
    ("s3://bucket/train", "lustre:///"), ("lustre://relative", "absolute"), ("slurm://cluster", "names no path"),
])
def test_local_and_other_paths_refused_with_reason(uri, why):
    with pytest.raises(TaoError, match=why):
        storage.cluster_path(uri)


@pytest.mark.parametrize("uri", ["s3://bucket/ckpt.pth", "hf_model://org/model", "ngc://org/team/model:1"])
def test_remote_object_store_inputs_say_how_to_stage_them(uri):
    """No prefetch inside the GPU job (idle timeout): the one line says to copy to Lustre first."""
    with pytest.raises(TaoError) as exc:
        storage.dataset_paths({"inputs": [uri]})
    msg = str(exc.value)
    assert msg.startswith(f"input {uri!r} is not on the cluster") and "\n" not in msg
    assert "copy it to the shared filesystem before submit" in msg and "lustre:///absolute/path" in msg
    assert "GPU idle timeout" in msg and "never fetched inside the job" in msg


def test_root_mode_and_spec_key_mode():
    req, over, root = storage.dataset_paths({"dataset": {"root": "lustre:///l/ds", "required": ["annotations.json", "images"]}})
    assert root == "/l/ds" and req == ["/l/ds", "/l/ds/annotations.json", "/l/ds/images"] and over == {}
    req, over, root = storage.dataset_paths({"dataset": {"spec_keys": {
        "custom.train_dataset.annotation_path": "lustre:///l/train.json",
        "custom.train_dataset.media_path": "lustre:///l/videos.tar.gz"}}})
    assert root is None and req == ["/l/train.json", "/l/videos.tar.gz"]
    assert over["custom.train_dataset.media_path"] == "/l/videos.tar.gz"


@pytest.mark.parametrize("ds", [{"root": "lustre:///l/ds", "required": ["../../etc/passwd"]},
                                {"root": "lustre:///l/ds", "required": ["/etc/passwd"]},
                                {"spec_keys": {"not a key": "lustre:///x"}},
                                {"spec_keys": {"a.b": "/local/x"}}])
def test_bad_dataset_entries(ds):
    with pytest.raises(TaoError):
        storage.dataset_paths({"dataset": ds})


def test_results_parent_never_appends_the_id_twice():
    res = storage.results_dir("/lustre/fsw/me", "dino-train-1a2b3c4d")
    assert res == "/lustre/fsw/me/results/dino-train-1a2b3c4d"
    parent = storage.results_parent(res, "dino-train-1a2b3c4d")
    assert parent == "/lustre/fsw/me/results"
    assert parent + "/dino-train-1a2b3c4d" == res  # what the container writes to
    with pytest.raises(TaoError):
        storage.results_parent("/lustre/fsw/me/results", "dino-train-1a2b3c4d")


def test_base_dir_sources():
    assert storage.base_dir({}, {"SLURM_BASE_RESULTS_DIR": "/lustre/me"}) == "/lustre/me"
    assert storage.base_dir({"results_base": "lustre:///lustre/x"}, {}) == "/lustre/x"
    # the default is one folder per user, never one folder for a whole site
    assert storage.base_dir({}, {"SLURM_USER": "alice"}) == "/lustre/fsw/portfolios/edgeai/alice"
    assert storage.base_dir({}, {"SLURM_HOSTNAME": "bob@login1,login2"}) == "/lustre/fsw/portfolios/edgeai/bob"
    with pytest.raises(TaoError, match="no results base"):
        storage.base_dir({}, {"SLURM_USER": ".."})
    with pytest.raises(TaoError):
        storage.base_dir({}, {"SLURM_BASE_RESULTS_DIR": "relative"})


def test_env_and_secrets():
    assert storage.check_env({"EPOCHS": 3}) == ({"EPOCHS": "3"}, {})
    assert storage.check_env({}, {"NCCL_DEBUG": "INFO"}) == ({}, {"NCCL_DEBUG": "INFO"})
    for bad in ({"NGC_KEY": "x"}, {"MY_TOKEN": "x"}, {"A B": "x"}, {"TAO_CREDS_FILE": "/home/me/x"}):
        with pytest.raises(TaoError):
            storage.check_env(bad)
    for bad_nccl in ({"HOME": "/x"}, {"NCCL_IB_PASSWORD": "x"}):
        with pytest.raises(TaoError):
            storage.check_env({}, bad_nccl)
    assert storage.collect_secrets(["NGC_KEY"], {"NGC_KEY": "k"}) == {"NGC_KEY": "k"}
    with pytest.raises(TaoError, match="not set"):
        storage.collect_secrets(["NGC_KEY"], {})
    text = storage.credentials_text({"NGC_KEY": "a'b $c"})
    assert "export NGC_KEY='a'\"'\"'b $c'" in text


def test_bundle_modes_and_content():
    data = base64.b64decode(storage.bundle({"env/credentials.sh": "x", "specs/spec.json": "{}"}))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["env/credentials.sh"].mode == 0o600 and members["env"].mode == 0o700
    assert storage.compact_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
