"""ONE rule for "the latest checkpoint": the Python answer (``checkpoints.latest`` over a results listing, used by
``continue`` and ``--parent``) and the shell answer (``tao_latest_checkpoint``, rendered into the SLURM chain and
the Kubernetes resume wrapper) agree on every folder; both read the ``*_latest.pth`` link first."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from taobank import checkpoints, results_shell
from taobank.contract import ResultFile

SHELLS = [["sh"]] + ([["busybox", "sh"]] if shutil.which("busybox") else [])


def listing(folder: Path):
    """The results listing exactly as the clusters make it (results_shell.LIST_RESULTS in a local sh)."""
    out = subprocess.run(["sh", "-c", results_shell.LIST_RESULTS, "tao", str(folder)], capture_output=True, text=True,
                         check=True, env={**os.environ, "LC_ALL": "C"})
    return results_shell.parse_listing(str(folder), out.stdout, status=False)


def python_answer(folder: Path, action: str) -> str | None:
    lst = listing(folder)
    found = checkpoints.latest(lst.files, action, lst.links)
    return found.path if found else None


def shell_answer(folder: Path, action: str, shell: list[str]) -> str | None:
    script = checkpoints.shell_finder() + 'tao_latest_checkpoint "$1" "$2"'
    out = subprocess.run([*shell, "-c", script, "tao", str(folder), action], capture_output=True, text=True,
                         env={**os.environ, "LC_ALL": "C"})
    text = out.stdout.strip()
    if out.returncode != 0:
        assert text == ""
        return None
    root = str(folder.resolve())
    assert text.startswith(root + "/"), text
    return text[len(root) + 1:]


def test_a_save_cut_short_is_never_chosen_when_the_link_names_the_last_complete_one(tmp_path: Path):
    """Canceled mid-save: epoch 11 is truncated, the link still names epoch 10; continue and the chain both take 10."""
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "model_epoch_010.pth").write_text("complete")
    (tmp_path / "train" / "model_epoch_011.pth").write_text("trunc")
    (tmp_path / "train" / "dino_model_latest.pth").symlink_to("model_epoch_010.pth")
    lst = listing(tmp_path)
    assert lst.links == {"train/dino_model_latest.pth": "train/model_epoch_010.pth"}
    assert [f.path for f in lst.files] == ["train/model_epoch_010.pth", "train/model_epoch_011.pth"]
    assert python_answer(tmp_path, "train") == "train/model_epoch_010.pth"
    for shell in SHELLS:
        assert shell_answer(tmp_path, "train", shell) == "train/model_epoch_010.pth"


def test_latest_reads_links_first_then_epochs_then_a_copy():
    files = [ResultFile("train/model_epoch_010.pth", 1, 1.0), ResultFile("train/model_epoch_011.pth", 1, 2.0),
             ResultFile("dino_latest.pth", 1, 9.0)]
    assert checkpoints.latest(files, "train", {"train/x_latest.pth": "train/model_epoch_010.pth"}).path \
        == "train/model_epoch_010.pth"
    assert checkpoints.latest(files, "train", {"other/x_latest.pth": "train/model_epoch_010.pth"}).path \
        == "train/model_epoch_011.pth"  # a link outside the searched folders is not TAO's
    assert checkpoints.latest(files, "train").path == "train/model_epoch_011.pth"
    assert checkpoints.latest(files[2:], "train").path == "dino_latest.pth"
    assert checkpoints.latest([ResultFile(".hidden_latest.pth", 1, 1.0)], "train") is None  # sh's * skips dot names


# ------------------------------------------------------------------ the property: Python and shell agree
DIRS = st.sampled_from(["", "train", "other"])
EPOCH_NAME = st.builds(lambda e, w, tail: f"model_epoch_{e:0{w}d}{tail}.pth", st.integers(0, 10**6),
                       st.integers(1, 4), st.sampled_from(["", "_x", "_epoch_7", "-ema", "_step_00100", "_step_00150",
                                                            "_step_1", "_step_"]))
ODD_NAME = st.sampled_from(["model_epoch_.pth", "model_epoch_x.pth", "epoch_5.pth", "model_epoch_3.ckpt",
                            ".model_epoch_9.pth", "status.json"])
LATEST_NAME = st.sampled_from(["dino_model_latest.pth", "a_latest.pth", "z_latest.pth", ".h_latest.pth"])
TARGET = st.sampled_from(["epoch", "missing", "outside", "dir", "other-link"])

ENTRY = st.one_of(
    st.tuples(st.just("file"), DIRS, EPOCH_NAME | ODD_NAME | LATEST_NAME),
    st.tuples(st.just("link"), DIRS, LATEST_NAME | EPOCH_NAME, TARGET, st.integers(0, 20)),
)


def build(folder: Path, entries: list[tuple]) -> None:
    outside = folder.parent / "outside.pth"
    outside.write_text("x")
    made: list[Path] = []
    for entry in entries:
        kind, where, name = entry[:3]
        d = folder / where
        d.mkdir(parents=True, exist_ok=True)
        path = d / name
        if path.exists() or path.is_symlink():
            continue
        if kind == "file":
            path.write_text("x")
            made.append(path)
            continue
        target, pick = entry[3], entry[4]
        if target == "epoch" and made:
            path.symlink_to(os.path.relpath(made[pick % len(made)], d))
        elif target == "outside":
            path.symlink_to(outside)
        elif target == "dir":
            path.symlink_to(folder)
        elif target == "other-link" and made:
            hop = d / f"hop{pick}.lnk"
            if not hop.exists() and not hop.is_symlink():
                hop.symlink_to(os.path.relpath(made[pick % len(made)], d))
            path.symlink_to(hop.name)
        else:
            path.symlink_to("gone/model_epoch_999.pth")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ENTRY, max_size=10), st.sampled_from(["train", "other", ""]))
def test_python_and_shell_pick_the_same_checkpoint(entries, action):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "job"
        folder.mkdir()
        build(folder, entries)
        want = python_answer(folder, action)
        for shell in SHELLS:
            assert shell_answer(folder, action, shell) == want, (shell, want)


@pytest.mark.parametrize("regex", ["epoch_([0-9]+)", "ep([0-9]+)"])
def test_the_finder_reads_the_tables_epoch_regex(regex, monkeypatch):
    from taobank import pins
    from taobank.errors import TaoError

    real = pins.resolve

    def resolve(key, regex=regex):
        value = real(key)
        return {**value, "epoch_regex": regex} if key == "tao_checkpoints" else value

    monkeypatch.setattr(pins, "resolve", resolve)
    prefix = regex.split("(")[0]
    assert f"s/.*{prefix}0*" in checkpoints.shell_finder()
    monkeypatch.setattr(pins, "resolve", lambda key: resolve(key, "epoch_(\\d+)"))
    with pytest.raises(TaoError, match="epoch_regex"):
        checkpoints.shell_finder()


def test_the_highest_step_of_the_highest_epoch_wins_in_python_and_shell(tmp_path: Path):
    (tmp_path / "train").mkdir()
    for name in ("model_epoch_001_step_00200.pth", "model_epoch_002_step_00250.pth", "model_epoch_002_step_00300.pth",
                 "model_epoch_002_step_00275.pth"):
        (tmp_path / "train" / name).write_text("x")
    assert python_answer(tmp_path, "train") == "train/model_epoch_002_step_00300.pth"
    for shell in SHELLS:
        assert shell_answer(tmp_path, "train", shell) == "train/model_epoch_002_step_00300.pth"


def test_each_network_family_has_its_names_and_resume_keys(tmp_path: Path):
    assert checkpoints.family("dino") == "lightning" and checkpoints.family("bevfusion") == "mmengine"
    assert checkpoints.family("some_new_net") == "lightning"
    argv = ["dino", "train", "train.resume_training_checkpoint_path=/old.pth"]
    assert checkpoints.with_resume(argv, "/r/model_epoch_003_step_00400.pth", "dino") == \
        ["dino", "train", "train.resume_training_checkpoint_path=/r/model_epoch_003_step_00400.pth"]
    bev = ["bevfusion", "train", "train.resume=false", "train.pretrained_checkpoint=/init.pth"]
    assert checkpoints.with_resume(bev, "/r/epoch_4.pth", "bevfusion") == \
        ["bevfusion", "train", "train.resume=true", "train.pretrained_checkpoint=/r/epoch_4.pth"]
    assert checkpoints.resumed_from(bev, "bevfusion") == ["/init.pth"]
    (tmp_path / "epoch_3.pth").write_text("x")
    (tmp_path / "epoch_12.pth").write_text("x")
    (tmp_path / "model_epoch_099_step_00001.pth").write_text("x")  # not an mmengine name
    script = checkpoints.shell_finder("bevfusion") + 'tao_latest_checkpoint "$1" train\n' + \
        'tao_ckpt=$(tao_latest_checkpoint "$1" train)\n' + 'set -- bevfusion train train.resume=false\n' + \
        checkpoints.resume_set(network="bevfusion") + 'printf "%s|" "$@"\n'
    for shell in SHELLS:
        out = subprocess.run([*shell, "-c", script, "tao", str(tmp_path)], capture_output=True, text=True).stdout
        assert out.splitlines()[0] == f"{tmp_path}/epoch_12.pth"
        assert out.splitlines()[-1] == f"bevfusion|train|train.resume=true|train.pretrained_checkpoint={tmp_path}/epoch_12.pth|"
    files = [ResultFile("epoch_3.pth", 1, 1.0), ResultFile("epoch_12.pth", 1, 2.0)]
    assert checkpoints.latest(files, "train", {}, "bevfusion").path == "epoch_12.pth"


def test_artifacts_reports_the_links(tmp_path: Path):
    from taobank.campaign.results_verbs import Artifacts

    (tmp_path / "model_epoch_001.pth").write_text("x")
    (tmp_path / "dino_latest.pth").symlink_to("model_epoch_001.pth")
    found = Artifacts("dino-train-1a2b3c4d", "slurm", listing(tmp_path))
    assert found.to_dict()["links"] == {"dino_latest.pth": "model_epoch_001.pth"}
    assert "link dino_latest.pth -> model_epoch_001.pth" in found.lines()


def test_pointpillars_checkpoints_are_found_by_their_own_names(tmp_path: Path):
    """pointpillars' trainer (OpenPCDet's, launched by torchrun) writes checkpoint_epoch_N.pth, no latest link:
    a Lightning glob (model_epoch_*) would find nothing to continue from."""
    assert checkpoints.family("pointpillars") == "pcdet"
    (tmp_path / "train").mkdir()
    for name in ("checkpoint_epoch_2.pth", "checkpoint_epoch_10.pth"):
        (tmp_path / "train" / name).write_text("x")
    files = [ResultFile("train/checkpoint_epoch_2.pth", 1, 1.0), ResultFile("train/checkpoint_epoch_10.pth", 1, 2.0)]
    assert checkpoints.latest(files, "train", {}, "pointpillars").path == "train/checkpoint_epoch_10.pth"
    script = checkpoints.shell_finder("pointpillars") + 'tao_latest_checkpoint "$1" train\n'
    for shell in SHELLS:
        out = subprocess.run([*shell, "-c", script, "tao", str(tmp_path)], capture_output=True, text=True).stdout
        assert out.splitlines()[0] == f"{tmp_path}/train/checkpoint_epoch_10.pth"
    assert checkpoints.with_resume(["pointpillars", "train"], "/r/checkpoint_epoch_10.pth", "pointpillars") == \
        ["pointpillars", "train", "train.resume_training_checkpoint_path=/r/checkpoint_epoch_10.pth"]
