"""Image forms accepted by the SLURM skill and the .sqsh cache rules."""
import pytest

from taobank import pins
from taobank.errors import TaoError
from taobank.slurm import images


@pytest.mark.parametrize("given,pyxis", [
    ("/lustre/images/tao.sqsh", "/lustre/images/tao.sqsh"),
    ("nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt", "nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt"),
    ("docker://nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt", "nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt"),
    ("nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt", "nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt"),
    ("localhost:5000/me/img:1", "localhost:5000#me/img:1"),
    ("ubuntu:22.04", "ubuntu:22.04"),
    ("library/ubuntu", "library/ubuntu"),
])
def test_forms(given, pyxis):
    assert images.pyxis_image(given) == pyxis


def test_pinned_images_agree():
    assert images.pyxis_image(pins.resolve("images.tao_toolkit.pyt")) == pins.resolve("images.tao_toolkit.pyt_pyxis")


@pytest.mark.parametrize("bad", ["", "a b", "/tmp/image.tar", "s3://bucket/x", "x#y#z", "-rf"])
def test_bad_forms(bad):
    with pytest.raises(TaoError):
        images.pyxis_image(bad)


def test_cache_name_per_image_and_latest_rules():
    p = images.sqsh_path("nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt", "/lustre/cache")
    assert p == "/lustre/cache/nvcr.io+nvidia+tao+tao-toolkit+7.1.0-pyt.sqsh"
    assert images.is_latest("nvcr.io/nvidia/x") and images.is_latest("ubuntu:latest")
    assert not images.is_latest("ubuntu:22.04") and images.is_latest("localhost:5000/me/img")
    assert not images.is_latest("nvcr.io/x/y@sha256:abc")
    assert images.needs_conversion("ubuntu:22.04", cached=False)
    assert not images.needs_conversion("ubuntu:22.04", cached=True, force_reconvert_latest=True)
    assert not images.needs_conversion("ubuntu:latest", cached=True)
    assert images.needs_conversion("ubuntu:latest", cached=True, force_reconvert_latest=True)
    assert not images.needs_conversion("/x/y.sqsh", cached=False)


def test_conversion_command_is_srun_enroot_import_into_a_part_file():
    argv = images.conversion_argv("nvcr.io/nvidia/x:1", "/c/x.sqsh", "cpu,cpu2")
    assert argv == ["srun", "-n1", "-p", "cpu", "enroot", "import", "-o", "/c/x.sqsh.part", "docker://nvcr.io#nvidia/x:1"]
