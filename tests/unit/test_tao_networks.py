"""schemas/tao_networks.json is what the pinned TAO's own packages say, and the pins agree with it.

nvidia-tao-core and nvidia-tao (the launcher) at the pinned TAO version are test dependencies
(requirements-tao.txt, installed with --no-deps by scripts/test.sh): the table is regenerated from them here
and their config dataclasses are run as TAO's Hydra runner runs them. The bank itself never imports them.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from taobank import pins, tao_command

BANK = Path(__file__).resolve().parents[2]


def test_the_checked_in_table_and_spec_schemas_are_what_the_pinned_wheels_say():
    from devtools import tao_schema, tao_specs

    table, spec_data = tao_schema.build_both()
    assert tao_schema.text(table) == (BANK / tao_command.TABLE_FILE).read_text(encoding="utf-8"), \
        "regenerate with python3 -m devtools.tao_schema"
    assert tao_specs.checked_in(BANK) == tao_specs.files(spec_data), "regenerate with python3 -m devtools.tao_schema"
    assert tao_command.tao_version() == tao_schema.TAO_VERSION == spec_data["tao_version"]


def test_the_test_wheels_are_the_pinned_images_tao_version():
    from devtools import tao_schema

    lines = (BANK / "requirements-tao.txt").read_text(encoding="utf-8").splitlines()
    for dist in ("nvidia-tao-core", "nvidia-tao"):
        assert f"{dist}=={tao_schema.TAO_VERSION}" in lines, dist


def _merge(network: str, override: str) -> None:
    """``override`` merged into the network's experiment config as TAO's Hydra runner does (struct mode)."""
    import importlib

    from omegaconf import OmegaConf

    from devtools.tao_schema import _experiment_config

    module = importlib.import_module(f"nvidia_tao_core.config.{network}.default_config")
    cfg = OmegaConf.structured(_experiment_config(module))
    OmegaConf.merge(cfg, OmegaConf.from_dotlist([override]))


@pytest.mark.parametrize("network,override,taken", [
    ("dino", "train.num_gpus=2", True),
    ("dino", "evaluate.num_gpus=2", True),
    ("dino", "train.num_nodes=2", True),
    ("pointpillars", "train.num_gpus=2", True),
    ("pointpillars", "evaluate.num_gpus=1", False),   # "Key num_gpus not in PPEvalConfig"
    ("pointpillars", "train.num_nodes=2", False),
    ("dino", "results_dir=/r/j", True),
])
def test_taos_own_schema_takes_exactly_the_keys_the_table_says(network, override, taken):
    from omegaconf.errors import ConfigKeyError

    key = override.partition("=")[0]
    section, _, name = key.rpartition(".")
    in_table = tao_command.takes_results_dir(network) if not section else \
        name in tao_command.section_keys(network, section)
    assert in_table == taken
    if taken:
        _merge(network, override)
    else:
        with pytest.raises(ConfigKeyError):
            _merge(network, override)


def test_the_image_pins_are_the_pair_nvidias_launcher_names():
    """The training image and the deploy image gen_trt_engine runs in are of one TAO version."""
    assert pins.resolve("images.tao_toolkit.pyt") == tao_command.image("pyt")
    assert pins.resolve("images.tao_toolkit.deploy") == tao_command.image("deploy")
    assert tao_command.image("pyt").endswith(f":{tao_command.tao_version()}-pyt")


def test_every_network_is_in_a_checkpoint_family_whose_keys_its_train_section_has():
    """The family is TAO's fact (the generated table), the family's names and keys the bank's (versions.yaml)."""
    t = pins.resolve("tao_checkpoints")
    assert "networks" not in t, "the family of a network is generated (schemas/tao_networks.json), not kept by hand"
    for network in tao_command.networks():
        family = tao_command.checkpoint_family(network)
        assert family in t["families"], (network, family)
        row = t["families"][family]
        wanted = [k.partition("train.")[2] for k in (row["resume_path"], row["resume_flag"]) if k]
        if "train" in tao_command.table()["networks"][network]["sections"]:
            assert set(wanted) <= set(tao_command.resume_keys(network)), (family, network)
        # Lightning names its checkpoints model_epoch_{epoch:03d}: a network TAO says names them otherwise
        # (pointpillars' checkpoint_epoch_1.pth, bevfusion's epoch_1.pth) is in a family of its own
        assert (family == "lightning") != tao_command.plain_epoch_names(network), network
    assert [tao_command.checkpoint_family(n) for n in ("dino", "bevfusion", "pointpillars")] == \
        ["lightning", "mmengine", "pcdet"]
    assert tao_command.checkpoint_family("some_custom_net") is None


def test_the_kpis_a_network_logs_are_taos_own_list():
    assert tao_command.kpis("dino") == (["val_mAP50"], [])
    assert tao_command.logs_kpi("segformer", "val_miou") and not tao_command.logs_kpi("segformer", "val_mAP")
    assert tao_command.logs_kpi("dino", "val_loss") and tao_command.logs_kpi("dino", "train_loss")  # every trainer's
    assert tao_command.logs_kpi("sparse4d", "img_bbox_NuScenes/NDS")  # one of TAO's patterns of its names
    assert tao_command.logs_kpi("depth_net", "val/loss")  # depth_net_mono's and depth_net_stereo's, together
    assert tao_command.logs_kpi("nvdinov2", "anything") is None  # TAO lists none: not judged
    assert not tao_command.automl("mal") and tao_command.automl("dino")


def test_the_helpers_never_import_taos_packages():
    code = ("import sys; sys.path.insert(0, 'scripts'); from taobank import tao_command; "
            "tao_command.gpu_args({'network_arch': 'dino', 'action': 'train', 'command': ['dino', 'train']}, 2, 1); "
            "assert not [m for m in sys.modules if m.startswith(('nvidia_tao', 'omegaconf'))]")
    subprocess.run([sys.executable, "-c", code], cwd=BANK, check=True, timeout=60)
