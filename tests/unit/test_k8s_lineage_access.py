"""A Kubernetes child (``submit --parent``) reads the parent's folder on the parent's volume: a child mount at the
parent's path is accepted only when it is the same volume and the same place in it (PVC or NFS, and sub_path)."""
from __future__ import annotations

import json

import pytest

from taobank import records
from taobank.errors import TaoError
from taobank.platforms.kubernetes import logs
from taobank.platforms.kubernetes.lineage_access import reachable
from taobank.platforms.kubernetes.spec import KubernetesSpec

A = {"pvc": "team-a", "mount_path": "/results"}


def k8s(spec: dict) -> KubernetesSpec:
    """The typed spec the hooks take (as the core types a spec for them)."""
    return KubernetesSpec.from_dict(spec)


def _job(job_id: str) -> records.Record:
    """A finished job whose results are in S3 (what fetched reads of it: its id)."""
    return records.Record(id=job_id, platform="kubernetes", state="COMPLETE", image="img", network_arch="dino",
                          action="train", results_dir=f"s3://b/runs/{job_id}", backend={}, transitions=(), attempt=1,
                          created_at="", updated_at="", storage_tier="C")


def parent_with(mount: dict) -> tuple[records.Record, str]:
    rec = records.Record.of(records.open_record("kubernetes", "img", "dino", "train", "A", "/results/{id}"))
    path = records.artifact_dir(rec.id) / logs.SPEC_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"image": "img", "command": ["x"], "mounts": [mount]}))
    return rec, f"/results/{rec.id}"


@pytest.mark.parametrize("child", [
    {"pvc": "team-b", "mount_path": "/results"},                            # another claim at the same path
    {"pvc": "team-a", "mount_path": "/results", "sub_path": "other"},       # the same claim, another folder of it
    {"nfs": {"server": "nas", "path": "/export"}, "mount_path": "/results"},
])
def test_another_volume_at_the_parents_path_is_refused(state_dir, child):
    parent, folder = parent_with(A)
    with pytest.raises(TaoError, match="but the parent's results folder .* is on PVC team-a") as exc:
        reachable(k8s({"mounts": [child]}), parent, folder)
    assert "\n" not in str(exc.value) and "nothing was submitted" in str(exc.value)


def test_nfs_exports_and_sub_paths_are_compared_as_places(state_dir):
    parent, folder = parent_with({"nfs": {"server": "nas", "path": "/export/a"}, "mount_path": "/results"})
    with pytest.raises(TaoError, match="NFS nas:/export/a"):
        reachable(k8s({"mounts": [{"nfs": {"server": "nas", "path": "/export/b"}, "mount_path": "/results"}]}),
                  parent, folder)
    same = k8s({"mounts": [{"nfs": {"server": "nas", "path": "/export/a/"}, "mount_path": "/results"}]})
    assert reachable(same, parent, folder) == same
    parent, folder = parent_with({"pvc": "ws", "mount_path": "/results", "sub_path": "runs"})
    deeper = k8s({"mounts": [{"pvc": "ws", "mount_path": "/results", "sub_path": "runs/"}]})
    assert reachable(deeper, parent, folder) == deeper


def test_the_same_volume_is_used_as_mounted_and_an_uncovered_folder_gets_the_parents_mount_read_only(state_dir):
    parent, folder = parent_with(A)
    same = k8s({"mounts": [{"pvc": "team-a", "mount_path": "/results"}]})
    assert reachable(same, parent, folder) == same
    out = reachable(k8s({"mounts": [{"pvc": "data", "mount_path": "/data"}]}), parent, folder)
    assert out.mounts is not None and out.mounts[-1] == {**A, "read_only": True}


# ------------------------------------------------------------------ a parent whose results are in S3 (tier C)
TIER_C = {"image": "img", "args": ["eval"], "storage_tier": "C", "results_dir": "s3://b/evals", "gpus": 1}


def test_a_tier_c_job_downloads_the_files_it_uses_into_its_staging_folder(state_dir):
    from taobank.platforms.kubernetes import render
    from taobank.platforms.kubernetes.lineage_access import fetched

    mine = {"uri": "s3://b/data/cfg.yaml", "path": "/tao-staging/cfg.yaml"}
    spec, where = fetched(k8s({**TIER_C, "s3_inputs": [mine]}), _job("dino-train-1"), "s3://b/runs/dino-train-1",
                          {"ckpt": "train/model_epoch_002.pth"})
    assert where == {"ckpt": "/tao-staging/from-dino-train-1/train/model_epoch_002.pth"}
    assert spec.s3_inputs == [mine, {"uri": "s3://b/runs/dino-train-1/train/model_epoch_002.pth",
                                     "path": where["ckpt"]}]
    objs = render.render_manifests(spec, job_id="dino-evaluate-2", namespace="ns", cred_secret="c")
    fetch = render.find(objs, "Job")["spec"]["template"]["spec"]["initContainers"][0]
    assert fetch["command"][-2:] == [spec.s3_inputs[1]["uri"], where["ckpt"]]  # the init container fetches it


def test_a_tier_a_job_cannot_read_an_s3_parent(state_dir):
    from taobank.platforms.kubernetes.lineage_access import fetched

    with pytest.raises(TaoError, match="only as a tier C job") as exc:
        fetched(k8s({"image": "img", "args": ["eval"]}), _job("dino-train-1"), "s3://b/runs/dino-train-1", {"c": "m.pth"})
    assert "\n" not in str(exc.value) and "nothing was submitted" in str(exc.value)


def test_a_continued_jobs_old_checkpoint_download_is_dropped(state_dir):
    from taobank.platforms.kubernetes.lineage_access import fetched

    old = {"uri": "s3://b/runs/dino-train-1/model_epoch_002.pth", "path": "/tao-staging/from-dino-train-1/model_epoch_002.pth"}
    keep = {"uri": "s3://b/data/cfg.yaml", "path": "/tao-staging/cfg.yaml"}
    spec, where = fetched(k8s({**TIER_C, "s3_inputs": [old, keep]}), _job("dino-train-2"), "s3://b/runs/dino-train-2",
                          {"checkpoint": "model_epoch_004.pth"}, [old["path"]])
    assert spec.s3_inputs == [keep, {"uri": "s3://b/runs/dino-train-2/model_epoch_004.pth",
                                     "path": where["checkpoint"]}]
