"""Generate ``schemas/tao_networks.json``: what the pinned TAO accepts, read from NVIDIA's own packages.

The bank appends ``<section>.num_gpus=N`` (and ``num_nodes``, ``results_dir``) to a TAO command. Whether TAO's
Hydra runner takes such a key is decided by the network's config dataclasses (``ExperimentConfig`` of
``nvidia_tao_core/config/<network>/default_config.py``: a key not in the schema is refused, "Key num_gpus not in
PPEvalConfig"), so the table is read from them, never kept by hand: each row off the network's spec schema
(:mod:`devtools.tao_specs`, the one reading of the dataclasses that both files come from):

- ``networks.<network>.sections.<section>``: which of ``num_gpus``, ``gpu_ids``, ``num_nodes`` the section has,
  and the keys a run resumes with (``resume_training_checkpoint_path``, mmengine's ``resume`` and
  ``pretrained_checkpoint``);
- ``networks.<network>.results_dir``: whether the top level takes ``results_dir``;
- ``networks.<network>.plain_epoch_names``: its checkpoints carry the epoch unpadded (``checkpoint_epoch_1.pth``,
  not Lightning's ``model_epoch_001``): TAO's own list of them (``microservices/constants.py``
  ``MISSING_EPOCH_FORMAT_NETWORKS``), so such a network is not in the Lightning checkpoint family;
- ``networks.<network>.checkpoint_family``: the bank's family of its checkpoints (versions.yaml
  ``tao_checkpoints.families`` says each family's file names and resume keys, which TAO does not publish): a
  network with TAO's padded epoch names is ``lightning``; one of ``MISSING_EPOCH_FORMAT_NETWORKS`` is
  ``mmengine`` when its train section has mmengine's ``resume`` flag, else ``pcdet``;
- ``networks.<network>.kpis`` / ``kpi_patterns``: the KPIs the network logs, as TAO's own API lists them
  (``microservices/handlers/network_configs/<network>.config.json`` ``metrics``: ``available_metrics`` and
  ``dynamic_metric_patterns``, regular expressions of the names it logs per class or step; a bank network TAO's API splits,
  such as depth_net into depth_net_mono and depth_net_stereo, has the union); absent where TAO lists none;
- ``networks.<network>.automl``: whether TAO's own AutoML takes the network (``AUTOML_DISABLED_NETWORKS``);
- ``networks.<network>.image``: the image NVIDIA's launcher (``nvidia-tao``'s ``config/config.json``) runs the
  network in; ``images``: the launcher's PyTorch and deploy tags of the pinned TAO version;
- ``networks.<network>.actions``: the actions TAO's API lists for the network.

The same run writes ``schemas/tao_specs/`` (:mod:`devtools.tao_specs`): each network's experiment-spec
schema, from the same dataclasses, that ``tao_jobs.py spec`` and every submit check a spec against.

Usage (from the bank root; the wheels are test dependencies: ``pip install --no-deps -r requirements-tao.txt``):

    python3 -m devtools.tao_schema            # write schemas/tao_networks.json and schemas/tao_specs/
    python3 -m devtools.tao_schema --check    # exit 1 when either checked-in file differs from the wheels'
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from taobank import BANK_ROOT, pins
from taobank.tao_command import GPU_KEYS, RESUME_KEYS, TABLE_FILE

#: The TAO version the table is read from: the version of the pinned training image (versions.yaml).
TAO_VERSION = str(pins.resolve("images.tao_toolkit.pyt")).rpartition(":")[2].removesuffix("-pyt")
#: The image family of the bank's jobs in NVIDIA's launcher config: model tasks, their deploy tasks.
_PYT_SUFFIX, _DEPLOY_SUFFIX = "-pyt", "-deploy"


def _installed(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        raise SystemExit(f"{dist} is not installed: pip install --no-deps -r requirements-tao.txt") from None


def _experiment_config(module: Any) -> type | None:
    """The module's experiment dataclass: ``ExperimentConfig``, else the one ``*ExperimentConfig`` it defines."""
    if dataclasses.is_dataclass(getattr(module, "ExperimentConfig", None)):
        return module.ExperimentConfig
    own = [v for k, v in vars(module).items() if k.endswith("ExperimentConfig") and dataclasses.is_dataclass(v)
           and getattr(v, "__module__", "") == module.__name__]
    return own[0] if len(own) == 1 else None


def has_experiment_config(network: str) -> bool:
    """Whether nvidia-tao-core has an experiment config for ``network`` (its ``default_config.py`` defines one)."""
    try:
        module = importlib.import_module(f"nvidia_tao_core.config.{network}.default_config")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("nvidia_tao_core.config"):
            return False
        raise
    return _experiment_config(module) is not None


def launcher_images() -> tuple[dict[str, str], dict[str, str]]:
    """(network -> PyTorch image tag, {"pyt": ..., "deploy": ...} of the pinned version) from the launcher's
    config: the images NVIDIA's own ``tao`` command runs each model task in."""
    cfg = json.loads(resources.files("nvidia_tao_cli").joinpath("config/config.json").read_text(encoding="utf-8"))
    if str(cfg.get("toolkit_version")) != TAO_VERSION:
        raise SystemExit(f"nvidia-tao's config.json is for TAO {cfg.get('toolkit_version')}, not {TAO_VERSION}")
    tasks: dict[str, str] = {}
    pinned: dict[str, str] = {}
    for group in ("model", "deploy"):
        for repo, tags in cfg["task_group"][group]["dockers"].items():
            for tag, row in tags.items():
                ref = f"{row['docker_registry']}/{repo}:{tag}"
                if group == "model" and tag.endswith(_PYT_SUFFIX):
                    for task in row["tasks"]:
                        tasks[task] = ref
                if tag == TAO_VERSION + _PYT_SUFFIX:
                    pinned["pyt"] = ref
                if tag == TAO_VERSION + _DEPLOY_SUFFIX:
                    pinned["deploy"] = ref
    return tasks, pinned


def checkpoint_family(plain_epoch_names: bool, train_resume_keys: list[str]) -> str:
    """The bank's checkpoint family of a network (versions.yaml ``tao_checkpoints.families``): TAO's padded epoch
    names (``model_epoch_001``) are Lightning's; of the unpadded ones, mmengine's trainer resumes by its
    ``resume`` flag, OpenPCDet's by a checkpoint path alone."""
    if not plain_epoch_names:
        return "lightning"
    return "mmengine" if "resume" in train_resume_keys else "pcdet"


def api_metrics() -> dict[str, dict]:
    """network -> ``kpis`` and ``kpi_patterns`` from TAO's API configs
    (``network_configs/<name>.config.json``); a config of another name whose ``actions_mapping`` sends every
    action (``*``) to the network counts for it."""
    # the folder beside the handlers package (importing it would import the API server's dependencies)
    folder = resources.files("nvidia_tao_core.microservices").joinpath("handlers", "network_configs")
    out: dict[str, dict] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".config.json"):
            continue
        cfg = json.loads(entry.read_text(encoding="utf-8"))
        found = cfg.get("metrics")
        if not isinstance(found, dict) or not found.get("available_metrics"):
            continue
        name = entry.name.removesuffix(".config.json")
        network = str(((cfg.get("actions_mapping") or {}).get("*") or {}).get("network") or name)
        row = out.setdefault(network, {"kpis": [], "kpi_patterns": []})
        row["kpis"] += [str(m) for m in found["available_metrics"] if str(m) not in row["kpis"]]
        row["kpi_patterns"] += [str(p) for p in found.get("dynamic_metric_patterns") or [] if str(p) not in
                                row["kpi_patterns"]]
    for row in out.values():
        if not row["kpi_patterns"]:
            del row["kpi_patterns"]
    return out


def build() -> dict:
    """The whole table, from the installed wheels (their versions must be the pinned one)."""
    return build_both()[0]


def build_both() -> tuple[dict, dict]:
    """(the table, the spec schemas of :mod:`devtools.tao_specs`), from the installed wheels."""
    from devtools import tao_specs

    for dist in ("nvidia-tao-core", "nvidia-tao"):
        if _installed(dist) != TAO_VERSION:
            raise SystemExit(f"{dist} {_installed(dist)} is installed, the table is for {TAO_VERSION}: "
                             "pip install --no-deps -r requirements-tao.txt")
    from nvidia_tao_core.microservices.constants import AUTOML_DISABLED_NETWORKS, MISSING_EPOCH_FORMAT_NETWORKS

    tasks, pinned = launcher_images()
    known = [network for network in sorted(tasks) if has_experiment_config(network)]
    specs, actions = tao_specs.build(TAO_VERSION, known)
    metrics = api_metrics()
    networks = {}  # each row read off the network's spec schema: one reading of TAO's dataclasses for both files
    for network in known:
        plain = network in MISSING_EPOCH_FORMAT_NETWORKS
        row = {"image": tasks[network], "plain_epoch_names": plain,
               **tao_specs.facts(specs, network, GPU_KEYS, RESUME_KEYS)}
        row["checkpoint_family"] = checkpoint_family(plain, row["sections"].get("train", {}).get("resume_keys", []))
        row.update(metrics.get(network, {}))
        row["automl"] = network not in AUTOML_DISABLED_NETWORKS
        row["actions"] = actions.get(network, [])
        networks[network] = row
    return {
        "tao_version": TAO_VERSION,
        "generated_by": "python3 -m devtools.tao_schema (from nvidia-tao-core and nvidia-tao "
                        f"{TAO_VERSION}: config/<network>/default_config.py, microservices' constants.py and "
                        "handlers/network_configs/, nvidia_tao_cli/config/config.json)",
        "images": pinned,
        "networks": networks,
    }, specs


def text(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the checked-in table; write nothing")
    args = parser.parse_args(argv)
    from devtools import tao_specs

    table, specs = build_both()
    path = Path(BANK_ROOT) / TABLE_FILE
    want = text(table)
    if args.check:
        have = path.read_text(encoding="utf-8") if path.is_file() else ""
        same_specs = tao_specs.checked_in(Path(BANK_ROOT)) == tao_specs.files(specs)
        for name, ok in ((TABLE_FILE, have == want), (tao_specs.SPECS_DIR, same_specs)):
            if not ok:
                print(f"{name} differs from what TAO {TAO_VERSION}'s wheels say: run python3 -m devtools.tao_schema",
                      file=sys.stderr)
                return 1
        print(f"{TABLE_FILE} and {tao_specs.SPECS_DIR} match TAO {TAO_VERSION}")
        return 0
    path.write_text(want, encoding="utf-8")
    size = tao_specs.write(Path(BANK_ROOT), specs)
    print(f"wrote {TABLE_FILE} ({len(table['networks'])} networks) and {tao_specs.SPECS_DIR}/ ({size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
