"""Producer action requests -> a job spec + a staged, hash-verified config file.

mode=config: the producer's nested ``config`` is materialised to a file
(:func:`materialize`), that exact file is staged as a ConfigMap and mounted
read-only at ``config_path``; submit checks the file against the sha256 the
agent passes and reads the ConfigMap back to check it again. ``{config_path}``
in argv is replaced by that path. mode=args: argv is native container argv.
A producer that needs a shell gives ``script`` (kept verbatim, /bin/sh -c);
the renderer never builds shell text from config values.

Mounts: each source may appear at several paths (its logical ``path`` plus
``aliases``, e.g. an absolute path embedded in the config); they share one
volume. Every absolute path embedded in the config must be visible in the pod.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ... import fsio, registry, states
from ...errors import TaoError, missing
from ...paths import is_under
from ... import spec as specmod
from .render import sha256_text

SCHEMA = "action-request.schema.json"
DEFAULT_CONFIG_PATH = "/tao/config/spec.yaml"
PLACEHOLDER = "{config_path}"
#: Absolute paths the pod always has (not data the request must mount).
BUILTIN_ROOTS = ("/dev/shm", "/tmp", "/proc", "/sys")


def load(path: str | Path) -> dict:
    req = specmod.load_file(path)
    specmod.validate(req, SCHEMA, f"action request {path}")
    if registry.canonical(req["backend"]) != "kubernetes":
        raise TaoError(f"action request backend {req['backend']!r} is not kubernetes: use the matching platform skill")
    return req


def materialize(req: dict) -> str:
    """The config file text for a mode=config request (YAML by default, JSON if asked)."""
    if req.get("mode") != "config":
        raise TaoError("only mode=config requests have a config to materialise")
    if req.get("config_format") == "json":
        return json.dumps(req["config"], indent=2, sort_keys=False) + "\n"
    try:
        import yaml
    except ImportError:
        raise missing("yaml") from None
    return yaml.safe_dump(req["config"], sort_keys=False, default_flow_style=False)


def staging_map(req: dict) -> list[dict]:
    """One row per pod path: which source backs it (the map the agent checks before launch)."""
    rows = []
    for m in req.get("mounts") or []:
        for path in [m["path"], *(m.get("aliases") or [])]:
            rows.append({"pod_path": path, "logical_path": m["path"], "source": m["source"],
                         "read_only": bool(m.get("read_only"))})
    return rows




def _strings(obj: Any):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def check_embedded_paths(req: dict, config_path: str) -> None:
    """Every absolute path in the config must lie under a mounted pod path."""
    roots = [r["pod_path"] for r in staging_map(req)] + [config_path, *BUILTIN_ROOTS]
    if req.get("results_dir", "").startswith("/"):
        roots.append(req["results_dir"])
    for s in _strings(req.get("config") or {}):
        if s.startswith("/") and "\n" not in s and not any(is_under(s, r) for r in roots):
            raise TaoError(f"config references {s}, which no mount provides in the pod: add the mount or an alias for it")


def to_job_spec(path: str | Path, *, config_file: str | None = None, config_sha256: str | None = None) -> tuple[dict, dict | None]:
    """(job spec, config) for the submit; config is None for mode=args."""
    req = load(path)
    res = req.get("resources") or {}
    spec: dict[str, Any] = {"image": req["image"], "gpus": res.get("gpus", 1), "nodes": res.get("nodes", 1)}
    for key in ("network_arch", "action", "results_dir", "storage_tier", "env"):
        if req.get(key):
            spec[key] = req[key]
    for key in ("cpu", "memory"):
        if res.get(key):
            spec[key] = res[key]
    mounts = []
    for m in req.get("mounts") or []:
        src = m["source"]
        for p in [m["path"], *(m.get("aliases") or [])]:
            entry: dict[str, Any] = {"mount_path": p}
            entry.update({"pvc": src["pvc"]} if "pvc" in src else {"nfs": src["nfs"]})
            if src.get("sub_path"):
                entry["sub_path"] = src["sub_path"]
            if m.get("read_only"):
                entry["read_only"] = True
            mounts.append(entry)
    if mounts:
        spec["mounts"] = mounts
    config = None
    config_path = req.get("config_path") or DEFAULT_CONFIG_PATH
    if req["mode"] == "config":
        check_embedded_paths(req, config_path)
        if not config_file or not config_sha256:
            raise TaoError("mode=config needs --config-file (from render_k8s_job.py --materialize-config) and --config-sha256")
        text = fsio.read_text(config_file, "--config-file") or ""
        digest = sha256_text(text)
        if digest != config_sha256:
            raise TaoError(f"{config_file} has sha256 {digest}, not the {config_sha256} you staged: re-materialise it")
        if text != materialize(req):
            raise TaoError(f"{config_file} is not the materialised config of this request: re-materialise it")
        config = {"text": text, "mount_path": config_path, "sha256": digest, "key": Path(config_path).name}
    if req.get("script") is not None:
        spec["command"] = req["script"]  # producer-owned shell script, verbatim under /bin/sh -c
    else:
        spec["args"] = [a.replace(PLACEHOLDER, config_path) for a in req["argv"]]
    specmod.validate(spec, "k8s-job-spec.schema.json", "job spec built from the action request")
    return spec, config
