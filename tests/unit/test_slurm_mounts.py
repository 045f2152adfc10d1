"""Container mounts derived from every path a job names; a hidden path is refused."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as hst

from taobank.errors import TaoError
from taobank.paths import is_under
from taobank.platforms.slurm import mounts
from taobank.platforms.slurm import submit as slurm_submit

SPEC = {"network_arch": "dino", "action": "train", "command": ["true"], "num_gpus": 1, "cpus_per_task": 1,
        "time_hours": 0.5, "partition": "local", "image": "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt", "use_sqsh": False}


def mount_line(script: str) -> str:
    return next(w for w in script.split() if w.startswith("--container-mounts=")).split("=", 1)[1]


def test_results_base_off_lustre_is_mounted_not_lost():
    """The old constant /lustre left a /scratch results base in the container's throwaway filesystem."""
    spec = {**SPEC, "results_base": "/scratch/me", "dataset": {"root": "lustre:///lustre/data/coco", "required": ["a.json"]},
            "inputs": ["lustre:///lustre/ckpt/model.pth"]}
    line = mount_line(slurm_submit.preview(spec, "dino-train-00000000", env={"SLURM_USER": "me"}))
    assert line.split(",") == ["/scratch", "/lustre/ckpt/model.pth", "/lustre/data/coco"]  # /scratch: the site root


def test_extra_mounts_are_kept_and_a_covering_one_absorbs_the_derived():
    spec = {**SPEC, "results_base": "/lustre/me", "container_mounts": "/lustre,/opt/tools:/tools:ro",
            "dataset": {"root": "lustre:///lustre/data"}}
    line = mount_line(slurm_submit.preview(spec, "dino-train-00000000", env={}))
    assert line == "/lustre,/opt/tools:/tools:ro"


def test_a_path_hidden_by_another_mounts_destination_is_refused():
    spec = {**SPEC, "results_base": "/scratch/me", "container_mounts": "/lustre/other:/scratch"}
    with pytest.raises(TaoError, match=r"results base /scratch/me is hidden in the container by the mount "
                                       r"/lustre/other:/scratch"):
        slurm_submit.plan(spec, {}, need_secrets=False)


@pytest.mark.parametrize("bad", ["relative", "/a,b", "/a:/b:/c:/d", "/x/../etc", "/", "/a:/b:rw;rm"])
def test_bad_mount_text_is_one_line(bad):
    with pytest.raises(TaoError):
        mounts.parse(bad)


def test_runtime_none_has_no_mounts():
    script = slurm_submit.preview({**SPEC, "container_runtime": "none", "results_base": "/scratch/me"}, "dino-train-00000000", env={})
    assert "--container-mounts" not in script


_SEG = hst.sampled_from(["a", "b", "lustre", "scratch", "data"])
_PATH = hst.lists(_SEG, min_size=1, max_size=4).map(lambda s: "/" + "/".join(s))


@given(paths=hst.lists(_PATH, min_size=1, max_size=6), extra=hst.lists(_PATH, max_size=3))
def test_every_path_is_covered_by_a_same_path_mount(paths, extra):
    out = mounts.derive([("input", p) for p in paths], [mounts.Mount(e, e) for e in extra])
    for p in paths:
        assert any(m.src == m.dst and is_under(p, m.src) for m in out)
    srcs = [m.src for m in out]
    assert len(srcs) == len(set(srcs))


@pytest.mark.parametrize("extra,want", [
    ("/lustre:/lustre:ro", "/lustre:/lustre:ro,/lustre/me"),  # read-only cannot hold the results: mounted rw below
    ("/lustre:/lustre:ro+private", "/lustre:/lustre:ro+private,/lustre/me"),
    ("/lustre:/lustre:rw", "/lustre:/lustre:rw"),
    ("/lustre", "/lustre"),
])
def test_only_a_writable_mount_covers_the_results_base(extra, want):
    spec = {**SPEC, "results_base": "/lustre/me", "container_mounts": extra}
    assert mount_line(slurm_submit.preview(spec, "dino-train-00000000", env={})) == want


def test_a_read_only_mount_covers_inputs_and_datasets():
    spec = {**SPEC, "results_base": "/scratch/me", "container_mounts": "/lustre:/lustre:ro",
            "dataset": {"root": "lustre:///lustre/data/coco"}, "inputs": ["lustre:///lustre/ckpt/model.pth"]}
    assert mount_line(slurm_submit.preview(spec, "dino-train-00000000", env={})) == "/scratch,/lustre:/lustre:ro"


def test_parents_come_before_children_whatever_order_they_were_given():
    out = mounts.derive([("input", "/lustre/data/a.json")], mounts.parse("/lustre/data/sub:/lustre/data/sub:ro,/lustre"),
                        write=[("results base", "/lustre/me/base")])
    depth = [m.dst.count("/") for m in out]
    assert depth == sorted(depth) and out[0].dst == "/lustre"


@given(paths=hst.lists(_PATH, min_size=1, max_size=4), write=hst.lists(_PATH, min_size=1, max_size=2),
       extra=hst.lists(_PATH, max_size=3), ro=hst.lists(hst.booleans(), min_size=3, max_size=3))
def test_every_written_path_is_under_a_writable_mount_and_parents_come_first(paths, write, extra, ro):
    given_mounts = [mounts.Mount(e, e, "ro" if r else "") for e, r in zip(extra, ro)]
    try:
        out = mounts.derive([("input", p) for p in paths], given_mounts, write=[("results base", w) for w in write])
    except TaoError:
        return
    for w in write:
        assert any(m.src == m.dst and not m.read_only and is_under(w, m.src) for m in out)
    for p in paths:
        assert any(m.src == m.dst and is_under(p, m.src) for m in out)
    for i, m in enumerate(out):
        assert not any(is_under(m.dst, later.dst) and later.dst != m.dst for later in out[i + 1:])


# ------------------------------------------------------------------ site roots and the paths the command names
def test_a_spec_the_command_names_outside_the_results_base_is_mounted():
    """The new-user finding: `submit --dry-run -- dino train -e /lustre/fsw/other/specs/train.yaml` mounted only
    the results base, so the spec was invisible inside Pyxis."""
    spec = {**SPEC, "command": ["dino", "train", "-e", "/lustre/fsw/other/specs/train.yaml"]}
    line = mount_line(slurm_submit.preview(spec, "dino-train-00000000", env={"SLURM_USER": "me"}))
    assert line == "/lustre"  # the results base /lustre/fsw/portfolios/edgeai/me's root covers both


def test_site_roots_setting_and_every_path_the_command_and_spec_files_name(tmp_path):
    train = tmp_path / "train.yaml"
    train.write_text("dataset:\n  annotation_path: /data/coco/annotations.json\n  images: [/data/coco/images]\n"
                     "results_dir: /results/dino\nmodel:\n  pretrained: /lustre/fsw/models/dino.pth\n")
    spec = {**SPEC, "spec_files": {"train.yaml": str(train)},
            "command": ["/usr/bin/env", "dino", "train", "-e", "{specs}/train.yaml", "-o", "/scratch/out",
                        "train.resume=/scratch/ckpt/last.pth", "results_dir=/elsewhere/out", "--url=https://x.io/a",
                        "--cache=/lustre/fsw/portfolios/edgeai/me/cache"]}
    env = {"SLURM_USER": "me", "SLURM_CONTAINER_MOUNTS": "/lustre/fsw/portfolios/edgeai"}
    p = slurm_submit.plan(spec, env, need_secrets=False)
    # checked with test -e before sbatch; not: /usr (the image's), {specs} (staged), outputs (-o, results_dir), URLs
    assert p.named == ["/scratch/ckpt/last.pth", "/lustre/fsw/portfolios/edgeai/me/cache", "/data/coco/annotations.json",
                          "/data/coco/images", "/lustre/fsw/models/dino.pth"]
    assert p.mounts.split(",") == ["/data/coco/annotations.json", "/data/coco/images", "/scratch/ckpt/last.pth",
                                      "/lustre/fsw/models/dino.pth", "/lustre/fsw/portfolios/edgeai"]


def test_the_command_in_a_shell_string_names_paths_too():
    spec = {**SPEC, "command": "cat /scratch/in/a.txt > /scratch/out/b.txt 2>/dev/null && ls /tmp"}
    assert slurm_submit.plan(spec, {"SLURM_USER": "me"}, need_secrets=False).named == ["/scratch/in/a.txt"]


@pytest.mark.parametrize("word", ["/lustre/x/../../etc/passwd", "--spec=/lustre/a/../b"])
def test_a_path_the_command_names_passes_the_one_path_rule(word):
    with pytest.raises(TaoError, match=r"path in the command .* is not an absolute path .*no '\.\.'"):
        slurm_submit.plan({**SPEC, "command": ["dino", word]}, {"SLURM_USER": "me"}, need_secrets=False)


@pytest.mark.parametrize("bad", ["relative", "/", "/a b"])
def test_a_bad_site_roots_setting_is_one_line(bad):
    with pytest.raises(TaoError):
        slurm_submit.plan(SPEC, {"SLURM_USER": "me", "SLURM_CONTAINER_MOUNTS": bad}, need_secrets=False)


def test_runtime_none_still_checks_the_paths_the_command_names():
    p = slurm_submit.plan({**SPEC, "container_runtime": "none", "command": ["cat", "/scratch/in.txt"]}, {"SLURM_USER": "me"},
                   need_secrets=False)
    assert p.named == ["/scratch/in.txt"] and p.mounts == ""


def test_a_parents_folder_is_mounted_read_only_after_the_writable_results_base():
    """submit --parent: the child writes its own folder under the results base, and sees the parent's read-only."""
    from taobank.platforms.slurm.lineage_access import reachable
    from taobank.platforms.slurm.spec import SlurmSpec

    parent = "/lustre/me/results/dino-train-1a2b3c4d"
    spec = reachable(SlurmSpec.parse({**SPEC, "results_base": "/lustre/me", "command": ["x", f"ckpt={parent}/model_epoch_001.pth"]}),
                     {"id": "dino-train-1a2b3c4d"}, parent)
    assert mount_line(slurm_submit.preview(spec, "dino-train-00000000", env={})).split(",") == \
        ["/lustre", f"{parent}:{parent}:ro"]
    spec = reachable(SlurmSpec.parse({**SPEC, "results_base": "/scratch/me", "container_mounts": "/opt/t:/t:ro"}),
                     {"id": "dino-train-1a2b3c4d"}, parent)
    assert mount_line(slurm_submit.preview(spec, "dino-train-00000000", env={})).split(",") == \
        ["/scratch", "/opt/t:/t:ro", f"{parent}:{parent}:ro"]
    mine = SlurmSpec.parse({**SPEC, "container_mounts": f"{parent}:{parent}"})
    assert reachable(mine, {"id": "p"}, parent) == mine  # the user's own mount of that folder wins
