"""Build Kueue's controller manager with Go, cached by version, with its module's ``config/`` (test infrastructure).

``go install sigs.k8s.io/kueue/cmd/kueue@<pin>`` (the module has no ``replace``
lines, so no wrapper module is needed) into
``$TAO_CACHE_DIR/k8s/kueue-<pin>/bin/kueue``; the same module's
``config/components/{crd,rbac,webhook}`` are copied beside it into
``share/config`` so the install (:mod:`.kueue`) reads the CRDs, RBAC and webhook
configurations of exactly the version it runs, never hand-written ones. A
second ``up`` finds the cache and builds nothing; the build lock and progress
lines are the Kubernetes build's (:mod:`.k8s_build`).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from taobank.errors import TaoError
from taobank.run import run
from . import k8s_build

MODULE = "sigs.k8s.io/kueue"
PACKAGE = MODULE + "/cmd/kueue"
#: The parts of the module's config/ the install reads (kustomize bases; see kueue.manifests).
CONFIG_PARTS = ("crd", "rbac", "webhook")


def pin() -> str:
    """``v0.17.0`` from versions.yaml (test_clusters.kubernetes.kueue)."""
    from taobank import pins

    value = str(pins.resolve("test_clusters.kubernetes.kueue"))
    if not re.fullmatch(r"v\d+\.\d+\.\d+", value):
        raise TaoError(f"versions.yaml test_clusters.kubernetes.kueue is {value!r}: use a release tag like v1.2.3")
    return value


def build_dir(version: str | None = None) -> Path:
    return k8s_build.cache_root() / f"kueue-{version or pin()}"


def cached(version: str | None = None) -> Path | None:
    """The cache folder when the binary and its config are there, else None."""
    d = build_dir(version)
    if (d / "build.json").is_file() and (d / "bin" / "kueue").is_file() and \
            all((d / "share" / "config" / part).is_dir() for part in CONFIG_PARTS):
        return d
    return None


def ensure(version: str | None = None) -> Path:
    """The cache folder holding ``bin/kueue`` and ``share/config``, built once (about 4 min on 2 cores)."""
    version = version or pin()
    d = build_dir(version)
    return k8s_build._ensure(d, lambda: cached(version), lambda: _build(d, version), "Kueue",
                             f"Kueue {version} (about 4-10 min on 2 cores)")


def _build(d: Path, version: str) -> None:
    k8s_build.check_go()
    tmp, log = d / "bin.partial", d / "build.log"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log.write_text(f"building {MODULE} {version} at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n",
                   encoding="utf-8")
    start = time.monotonic()
    argv = [k8s_build.go_binary(), "install", "-v", "-trimpath", f"{PACKAGE}@{version}"]
    env = {**os.environ, **k8s_build._go_env("-mod=mod -buildvcs=false"), "GOBIN": str(tmp)}
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ GOBIN={tmp} {' '.join(argv)}\n")
        fh.flush()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, env=env)
        rc = k8s_build._wait_with_progress(proc, "go install kueue", start, log)
        fh.write(f"exit {rc}\n")
    if rc != 0:
        raise TaoError(f"go install {PACKAGE}@{version} failed (exit {rc}): see {log}")
    seconds = time.monotonic() - start
    res = run([k8s_build.go_binary(), "mod", "download", "-json", f"{MODULE}@{version}"], timeout=600,
              env=k8s_build._go_env(""), what=f"go mod download {MODULE}@{version}")
    src = Path(json.loads(res.stdout)["Dir"]) / "config" / "components"
    share = d / "share" / "config"
    shutil.rmtree(share, ignore_errors=True)
    for part in CONFIG_PARTS:
        shutil.copytree(src / part, share / part)
    for path in share.rglob("*"):  # the module cache is read-only; the copy need not be
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(d / "bin", ignore_errors=True)
    tmp.rename(d / "bin")
    info = {"version": version, "seconds": {"kueue": round(seconds, 1)},
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (d / "build.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
