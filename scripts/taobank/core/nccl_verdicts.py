"""The NCCL probe verdicts, cached per cluster, and the gate multi-node submits pass.

Kept apart from the probe run (:mod:`taobank.core.nccl_probe`), which submits and
watches a job through the core verbs: the core's submit reads the gate from
here without importing the verbs that run it.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeGuard

from .. import fsio, pins, records
from ..errors import TaoError

CACHE_FILE = "nccl-probe.cache.json"  # the dot keeps it out of list_records (the stem is no record id)
STAMP = "%Y-%m-%dT%H:%M:%SZ"  # checked_at, UTC


def cache_path() -> Path:
    return records.state_dir() / CACHE_FILE


def load_cache() -> dict:
    """``{platform: {cluster: entry}}``; a missing or damaged cache reads as empty (it only costs a re-probe)."""
    return {k: v for k, v in fsio.read_cache(cache_path(), "NCCL probe cache").items() if isinstance(v, dict)}


def cached(platform_name: str, cluster: str) -> dict | None:
    entry = load_cache().get(platform_name, {}).get(cluster)
    return entry if isinstance(entry, dict) else None


def save_verdict(platform_name: str, cluster: str, entry: dict) -> None:
    """Atomic mode-600 write (temp file + rename), like the record store."""
    data = load_cache()
    data.setdefault(platform_name, {})[cluster] = entry
    fsio.write_private(cache_path(), json.dumps(data, indent=2, sort_keys=True) + "\n")


def age_days(entry: dict, now: datetime | None = None) -> float | None:
    """Days since the verdict was taken (None when the entry carries no readable time)."""
    try:
        taken = datetime.strptime(str(entry.get("checked_at")), STAMP).replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return ((now or datetime.now(timezone.utc)) - taken).total_seconds() / 86400


def fresh_ok(entry: dict | None, now: datetime | None = None) -> TypeGuard[dict]:
    """An ``ok`` verdict younger than ``nccl_probe.max_age_days``."""
    if not entry or entry.get("verdict") != "ok":
        return False
    age = age_days(entry, now)
    return age is not None and age <= float(pins.resolve("nccl_probe.max_age_days"))


#: What an ok verdict of each probe backend proves (the probe and the gate say it the same way).
PROVES = {"nccl": "NCCL over GPUs: an all-reduce between the nodes' GPUs",
          "gloo-cpu": "gloo on CPU: the network path between nodes; NCCL over GPUs not proven"}


def proves(backend: str | None) -> str:
    return PROVES.get(str(backend or "nccl"), f"backend {backend}")


#: Overrides ``nccl_probe.gate_accepts`` for this shell (comma-separated backends), e.g. on a GPU-less test cluster.
GATE_ENV = "TAO_NCCL_GATE_ACCEPTS"


def gate_accepts() -> list[str]:
    """The probe backends whose ok opens the multi-node gate: $TAO_NCCL_GATE_ACCEPTS, else versions.yaml."""
    import os

    raw = os.environ.get(GATE_ENV, "").strip()
    if not raw:
        return [str(b) for b in pins.resolve("nccl_probe.gate_accepts")]
    chosen = [b.strip() for b in raw.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in PROVES]
    if unknown or not chosen:
        raise TaoError(f"{GATE_ENV} must list probe backends among {', '.join(PROVES)} (comma-separated), "
                       f"got {raw[:80]!r}")
    return chosen


def require_ok(platform_name: str, cluster: str, *, helper: str, skip: bool) -> dict:
    """The multi-node gate: an ``ok`` verdict cached for this cluster, of a backend that
    :func:`gate_accepts` lists (nccl by default; gloo-cpu proves the network path only), or an explicit skip.

    Returns what the record keeps (``{"nccl_probe": "ok"|"skipped", ...}``); raises one line otherwise.
    """
    entry = cached(platform_name, cluster)
    backend = str((entry or {}).get("backend") or "nccl")
    accepted = gate_accepts()
    if fresh_ok(entry) and backend in accepted:
        return {"nccl_probe": "ok", "nccl_probe_job": entry.get("job_id"), "nccl_probe_at": entry.get("checked_at"),
                "nccl_probe_backend": backend}
    if skip:
        return {"nccl_probe": "skipped"}
    if fresh_ok(entry):
        seen = (f"the last ok probe used the {backend} backend (job {entry.get('job_id')}), which the gate "
                f"does not accept ({', '.join(accepted)}: versions.yaml nccl_probe.gate_accepts or ${GATE_ENV})")
    elif not entry:
        seen = "no probe has run"
    elif entry.get("verdict") == "ok":
        seen = (f"the last ok probe (job {entry.get('job_id')}, {entry.get('checked_at')}) is older than "
                f"{pins.resolve('nccl_probe.max_age_days')} days")
    else:
        seen = f"the last probe said {entry.get('verdict')} (job {entry.get('job_id')})"
    raise TaoError(f"multi-node jobs on {cluster} need an ok NCCL probe and {seen}: run `{helper} nccl-probe` "
                   "first, or pass --skip-nccl-probe to go on knowingly")
