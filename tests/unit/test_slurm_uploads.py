"""Spec files and small inputs sent over SSH: names, size caps, {specs} placeholder, checksums."""
from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from fakeproc import PLAIN_SUBMIT, find_answer
from taobank.contract import SubmitOptions
from taobank.core import platform
from taobank import records
from taobank.errors import TaoError
from taobank.platforms.slurm import uploads
from taobank.platforms.slurm import stage as slurm_stage

SPEC = {"network_arch": "dino", "action": "train", "container_runtime": "none", "num_gpus": 1,
        "command": ["dino", "train", "-e", "{specs}/train.yaml"]}


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "-rf", "", "a b", "spec.json"])
def test_bad_names_are_refused(tmp_path, name):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(TaoError):
        uploads.collect({name: str(f)}, what="spec_files")


def test_folders_missing_files_and_big_files_are_refused(tmp_path, monkeypatch):
    with pytest.raises(TaoError, match="not a regular file"):
        uploads.collect({"d": str(tmp_path)}, what="spec_files")
    with pytest.raises(TaoError, match="does not exist"):
        uploads.collect({"x": str(tmp_path / "nope")}, what="spec_files")
    big = tmp_path / "big"
    big.write_bytes(b"0" * 2048)
    monkeypatch.setattr(uploads, "limits", lambda: {"max_file_bytes": 1024, "max_total_bytes": 4096})
    with pytest.raises(TaoError, match="over the .* upload limit"):
        uploads.collect({"big": str(big)}, what="spec_files")
    small = tmp_path / "small"
    small.write_bytes(b"0" * 1000)
    with pytest.raises(TaoError, match="in all, over the"):
        uploads.collect([(f"s{i}", str(small)) for i in range(5)], what="stage")


def test_placeholder_is_replaced_and_must_name_an_upload():
    assert uploads.substitute(["-e", "{specs}/train.yaml", "x={specs}/a.json"], "/j/specs", ["train.yaml", "a.json"]) == \
        ["-e", "/j/specs/train.yaml", "x=/j/specs/a.json"]
    with pytest.raises(TaoError, match=r"names \{specs\}/other.yaml but spec_files has no other.yaml"):
        uploads.substitute(["{specs}/other.yaml"], "/j/specs", ["train.yaml"])


def test_submit_uploads_spec_files_in_the_one_staging_command_and_checks_them_there(slurm, tmp_path):
    train = tmp_path / "train.yaml"
    train.write_text("train:\n  num_epochs: 3\n")
    slurm.ssh("STAGE")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "901\n")
    view = platform.get("slurm").submit({**SPEC, "spec_files": {"train.yaml": str(train)}}, SubmitOptions())
    stage = next(c for c in slurm.calls if c.script == "STAGE")
    digest = hashlib.sha256(train.read_bytes()).hexdigest()
    assert stage.args[2:] == [f"{digest}  train.yaml"]  # sha256sum -c on the cluster
    from test_orchestration_slurm import _staged

    files = _staged(stage)
    jdir = records.load(view.id)["backend"]["job_dir"]
    assert files["specs/train.yaml"] == "train:\n  num_epochs: 3\n"
    assert f"dino train -e {jdir}/specs/train.yaml" in files[f"sbatch/job_{view.id}.sbatch"]
    assert records.load(view.id)["backend"]["spec_files"] == f"train.yaml={digest}"
    assert Counter(slurm.scripts()) == PLAIN_SUBMIT  # no extra SSH command for the upload


def test_a_command_naming_a_missing_spec_file_is_refused_before_any_cluster_call(slurm):
    with pytest.raises(TaoError, match="spec_files has no train.yaml"):
        platform.get("slurm").submit(SPEC, SubmitOptions())
    assert slurm.calls == [] and records.list_records() == []


@pytest.mark.parametrize("dest,match", [("/lustre/x", "cluster URI"), ("lustre:///lustre/../etc", r"'\.\.'"),
                                        ("s3://bucket/x", "not on the cluster"), ("lustre:///", "not a folder")])
def test_stage_refuses_bad_destinations_before_connecting(slurm, tmp_path, dest, match):
    f = tmp_path / "a.pth"
    f.write_text("x")
    with pytest.raises(TaoError, match=match):
        slurm_stage.stage_inputs([str(f)], dest)
    assert slurm.calls == []


def test_spec_files_are_relative_to_the_spec_file_for_every_helper(tmp_path):
    """One loader holds the rule: render_sbatch.py run from elsewhere finds the spec file's neighbours."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from taobank.platforms.slurm import spec as specmod

    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "train.yaml").write_text("epochs: 1\n")
    job = {"network_arch": "dino", "action": "train", "container_runtime": "none", "num_gpus": 1,
           "spec_files": {"train.yaml": "train.yaml"}, "command": ["cat", "{specs}/train.yaml"]}
    (folder / "job.yaml").write_text(json.dumps(job))
    assert specmod.load_file(str(folder / "job.yaml"))["spec_files"] == {"train.yaml": str(folder / "train.yaml")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bank = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, str(bank / "scripts/render_sbatch.py"), "--spec", str(folder / "job.yaml")],
                         cwd=elsewhere, capture_output=True, text=True, env={**os.environ, "SLURM_USER": "me"})
    assert res.returncode == 0 and "/specs/train.yaml" in res.stdout, res.stderr


def test_specs_in_a_string_command_is_one_shell_word_even_with_spaces(tmp_path):
    import shlex
    import subprocess

    from taobank.platforms.slurm import uploads

    folder = tmp_path / "my base" / "specs"
    folder.mkdir(parents=True)
    (folder / "train.yaml").write_text("epochs: 1\n")
    (cmd,) = uploads.substitute(["cat {specs}/train.yaml"], str(folder), ["train.yaml"], shell=True)
    assert cmd == f"cat {shlex.quote(str(folder))}/train.yaml"
    assert subprocess.run(["bash", "-c", cmd], capture_output=True, text=True).stdout == "epochs: 1\n"
    # an argv list is not shell text: the path goes in as it is
    assert uploads.substitute(["{specs}/train.yaml"], str(folder), ["train.yaml"]) == [f"{folder}/train.yaml"]


# ------------------------------------------------------------------ stage a folder
def labels(tmp_path):
    tree = tmp_path / "labels"
    (tree / "val").mkdir(parents=True)
    (tree / "map.txt").write_text("0 person\n")
    (tree / "val" / "a.json").write_text("{}")
    return tree


def test_a_folder_keeps_its_layout_and_brings_a_manifest(tmp_path):
    ups = uploads.collect_tree(str(labels(tmp_path)), what="stage")
    assert [u.name for u in ups] == ["labels/map.txt", "labels/val/a.json", "labels.sha256"]
    manifest = ups[-1].data.decode().splitlines()
    assert manifest == [f"{u.sha256}  {u.name}" for u in ups[:-1]]


@pytest.mark.parametrize("bad", ["link", "dotfile", "too-big"])
def test_a_folder_with_a_link_a_bad_name_or_too_much_is_refused(tmp_path, monkeypatch, bad):
    tree = labels(tmp_path)
    if bad == "link":
        (tree / "val" / "outside").symlink_to("/etc/hostname")
        match = "link"
    elif bad == "dotfile":
        (tree / ".env").write_text("x")
        match = "plain file name"
    else:
        monkeypatch.setattr(uploads, "limits", lambda: {"max_file_bytes": 99, "max_total_bytes": 99,
                                                        "max_folder_bytes": 5})
        match = "more than"
    with pytest.raises(TaoError, match=match):
        uploads.collect_tree(str(tree), what="stage")


def test_stage_sends_a_folder_in_the_one_command_checked_by_its_manifest(slurm, tmp_path):
    from fakeproc import ok

    slurm.ssh("STAGE_IN", ok())
    out = slurm_stage.stage_inputs([str(labels(tmp_path))], "lustre:///lustre/me/inputs")
    (call,) = [c for c in slurm.of("ssh") if c.script == "STAGE_IN"]
    assert call.args[:2] == ["/lustre/me/inputs", "keep"]
    assert call.args[2:] == [f"{out['files'][-1]['sha256']}  labels.sha256", "manifest  labels.sha256"]
    assert [f["path"] for f in out["files"]][-1] == "/lustre/me/inputs/labels.sha256"


def test_the_stage_script_checks_a_folder_by_its_manifest_and_refuses_an_existing_one(tmp_path):
    """remote.STAGE_IN run by a real sh: unpack, check the manifest, refuse the folder a second time."""
    import subprocess

    from taobank.platforms.slurm import remote, storage

    ups = uploads.collect_tree(str(labels(tmp_path)), what="stage")
    dest = tmp_path / "dest"
    args = [str(dest), "keep", f"{ups[-1].sha256}  labels.sha256", "manifest  labels.sha256"]
    bundle = storage.bundle({u.name: u.data for u in ups})
    run = lambda b: subprocess.run(["sh", "-c", remote.STAGE_IN, "tao", *args], input=b, text=True,  # noqa: E731
                                   capture_output=True)
    first = run(bundle)
    assert first.returncode == 0, first.stderr
    assert (dest / "labels" / "val" / "a.json").read_text() == "{}"
    assert run(bundle).returncode == 5  # exists: --force replaces it
    tampered = storage.bundle({**{u.name: u.data for u in ups}, "labels/map.txt": b"changed\n"})
    args[1] = "force"
    assert run(tampered).returncode == 4  # the manifest no longer matches
