"""The spec check on the real Docker engine: a DINO submit with a misspelt TAO key is refused in one line naming
the real key, before anything is created (no record, no container, no results folder); the spec file itself is
read through the job's bind mount, and a path no mount covers is said to be unreadable."""
from __future__ import annotations

import pytest

from docker_support import Docker
from taobank import tao_spec_schema

pytestmark = pytest.mark.e2e


@pytest.fixture()
def dk(docker_cluster, tmp_path) -> Docker:
    return Docker(docker_cluster, tmp_path)


def refused(dk: Docker, *args: str) -> list[str]:
    before = dk.docker("ps", "-aq", "--filter", "label=org.tao-skill-bank.managed").stdout.split()
    res = dk.tao("submit", "--image", dk.image, "--gpus", "0", *args)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    assert dk.records() == [] and list(dk.results.iterdir()) == []
    assert dk.docker("ps", "-aq", "--filter", "label=org.tao-skill-bank.managed").stdout.split() == before
    return res.stderr.strip().splitlines()


def test_a_dino_submit_with_a_misspelt_key_is_refused_in_one_line(dk, tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "train.yaml").write_text(tao_spec_schema.template("dino", "train"), encoding="utf-8")
    lines = refused(dk, "--mount", f"{tmp_path / 'specs'}:/specs", "--", "dino", "train", "-e", "/specs/train.yaml",
                    "train.num_epoch=10")
    assert len(lines) == 1 and lines[0].startswith("error: train.num_epoch: ") and \
        "did you mean train.num_epochs?" in lines[0], lines


def test_the_spec_file_is_read_through_its_bind_mount_and_each_problem_is_a_line(dk, tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "train.yaml").write_text("train:\n  num_epochs: ten\n  optim:\n    lr: 5\n",
                                                   encoding="utf-8")
    lines = refused(dk, "--mount", f"{tmp_path / 'specs'}:/specs", "--", "dino", "train", "-e", "/specs/train.yaml",
                    "model.backbon=resnet_50")
    assert [line.split(":")[1].strip() for line in lines] == ["train.num_epochs", "train.optim.lr", "model.backbon"], lines
    # a spec inside the image: its overrides are still checked, the file is said to be unreadable
    lines = refused(dk, "--", "dino", "train", "-e", "/in/the/image.yaml", "train.num_epoch=10")
    assert len(lines) == 1 and "did you mean train.num_epochs?" in lines[0], lines
