"""What the pinned TAO accepts, per network: the checked-in table ``schemas/tao_networks.json``.

The table is generated from NVIDIA's own packages (``python3 -m devtools.tao_schema``: the config dataclasses
of ``nvidia-tao-core`` and the image list of ``nvidia-tao``, at the pinned TAO version) and a unit test
regenerates it and fails on any difference. The bank reads only this file at run time: TAO's packages are
test dependencies, never the helpers'.
"""
from __future__ import annotations

import functools
import json
from typing import Any

from . import BANK_ROOT
from .errors import TaoError

#: Where the table lives, relative to the bank's root.
TABLE_FILE = "schemas/tao_networks.json"
#: The keys TAO's entrypoint reads the GPUs and nodes from, by the name it splits the command on.
GPU_KEYS = ("num_gpus", "gpu_ids", "num_nodes")
#: The keys a run resumes with: Lightning's checkpoint path, mmengine's flag and checkpoint.
RESUME_KEYS = ("resume_training_checkpoint_path", "resume", "pretrained_checkpoint")


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    """The whole table (read once)."""
    path = BANK_ROOT / TABLE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TaoError(f"{TABLE_FILE} cannot be read ({exc.__class__.__name__}): restore it from git") from None
    if not isinstance(data, dict) or not isinstance(data.get("networks"), dict):
        raise TaoError(f"{TABLE_FILE} has no networks: regenerate it with python3 -m devtools.tao_schema")
    return data


def tao_version() -> str:
    """The TAO version the table was read from."""
    return str(table()["tao_version"])


def known(network: str | None) -> bool:
    """Whether the pinned TAO has ``network`` (a config schema and an image of NVIDIA's launcher)."""
    return bool(network) and network in table()["networks"]


def networks() -> list[str]:
    return sorted(table()["networks"])


def section_keys(network: str, section: str) -> list[str]:
    """The GPU and node keys (of :data:`GPU_KEYS`) the network's ``section`` takes; [] for one it lacks."""
    row = table()["networks"].get(network) or {}
    return list((row.get("sections") or {}).get(section, {}).get("gpu_keys") or [])


def resume_keys(network: str) -> list[str]:
    """The resume keys (of :data:`RESUME_KEYS`) the network's ``train`` section takes."""
    row = table()["networks"].get(network) or {}
    return list((row.get("sections") or {}).get("train", {}).get("resume_keys") or [])


def takes_results_dir(network: str) -> bool:
    """Whether the network's experiment config has ``results_dir`` at its top level."""
    return bool((table()["networks"].get(network) or {}).get("results_dir"))


def image(kind: str) -> str | None:
    """The image NVIDIA's launcher names for the pinned TAO version: ``pyt`` or ``deploy`` (None: it names none)."""
    value = (table().get("images") or {}).get(kind)
    return str(value) if value else None


def plain_epoch_names(network: str) -> bool:
    """Whether the network's checkpoints carry the epoch unpadded (``checkpoint_epoch_1.pth``), unlike Lightning's
    ``model_epoch_001``: TAO's own list (nvidia-tao-core's ``MISSING_EPOCH_FORMAT_NETWORKS``)."""
    return bool((table()["networks"].get(network) or {}).get("plain_epoch_names"))


def checkpoint_family(network: str | None) -> str | None:
    """The checkpoint family (versions.yaml ``tao_checkpoints.families``) of a network the pinned TAO has, read
    from TAO's own facts by the generator (its epoch naming, its train section's resume keys); None for another."""
    found = (table()["networks"].get(network or "") or {}).get("checkpoint_family")
    return str(found) if found else None


def kpis(network: str) -> tuple[list[str], list[str]] | None:
    """(the KPI names, the regular expressions of the names) ``network`` logs, as TAO's own API lists them; None
    when TAO lists none for it (the bank cannot tell a KPI it does not log)."""
    row = table()["networks"].get(network) or {}
    if not row.get("kpis"):
        return None
    return [str(k) for k in row["kpis"]], [str(p) for p in row.get("kpi_patterns") or []]


def logs_kpi(network: str, kpi: str) -> bool | None:
    """Whether ``network`` logs ``kpi`` (a name TAO lists, or one of its patterns); None when TAO lists none.

    TAO's list is the KPIs its API offers to rank by (DINO: ``val_mAP50`` alone), not every one its trainer writes:
    each trainer also writes its losses (``train_loss``, ``val_loss``) to status.json, so a loss is always taken."""
    import re

    found = kpis(network)
    if found is None:
        return None
    names, patterns = found
    return kpi in names or any(re.fullmatch(p, kpi) for p in patterns) or re.fullmatch(r"(train|val)_loss", kpi) is not None


def automl(network: str) -> bool:
    """Whether TAO's own AutoML takes ``network`` (nvidia-tao-core's ``AUTOML_DISABLED_NETWORKS`` lacks it)."""
    return bool((table()["networks"].get(network) or {}).get("automl", True))
