#!/usr/bin/env python3
"""Regenerate the Go wrapper modules that build the local Kubernetes cluster.

  python3 testclusters/kubernetes/gen_gomod.py

Reads the pins in versions.yaml (test_clusters.kubernetes), downloads
k8s.io/kubernetes's own go.mod from the module proxy, lists every staging
module it replaces with ./staging/... and writes build/k8s/go.mod replacing
each with its published v0.X.Y twin, plus build/kwok/go.mod; `go list -deps
-mod=mod` then fills in the indirect requirements and go.sum. Commit the
result: the cluster build uses these files read-only, so it needs no checksum
database. Run it after changing a pin (set GOSUMDB=off if sum.golang.org is
unreachable; the hashes then come from the proxy alone).
"""
from __future__ import annotations

import sys
from pathlib import Path

BANK = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(BANK / "scripts"), str(BANK)]

from taobank.cli.entry import run_main  # noqa: E402
from testclusters.kubernetes import k8s_build  # noqa: E402


def main(argv: list[str]) -> int:
    if argv:
        print(__doc__)
        return 0 if argv[0] in ("-h", "--help") else 2
    k8s_build.generate_modules(k8s_build.MODULES_DIR)
    print(f"wrote {k8s_build.MODULES_DIR}/k8s and {k8s_build.MODULES_DIR}/kwok for {k8s_build.pins()}")
    return 0


if __name__ == "__main__":
    run_main(main)
