"""The README's main command (scripts/demo.sh) submits to the local Kubernetes cluster and follows it to COMPLETE."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

BANK = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e


def test_readme_demo_kubernetes_reaches_complete(k8s_cluster, tmp_path):
    state = tmp_path / "state"
    env = {**os.environ, **k8s_cluster, "TAO_STATE_DIR": str(state)}
    env.pop("TAO_K8S_CONTEXT", None)
    proc = subprocess.run(["bash", str(BANK / "scripts" / "demo.sh"), "kubernetes"], capture_output=True, text=True,
                          env=env, timeout=600, cwd=str(BANK))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = [json.loads(p.read_text()) for p in state.glob("*.json")]
    assert len(recs) == 1 and recs[0]["platform"] == "kubernetes" and recs[0]["state"] == "COMPLETE", recs
    assert [t["state"] for t in recs[0]["transitions"]][-1] == "COMPLETE"
    assert recs[0]["backend"]["uid"] and recs[0]["backend_ref"].endswith("/" + recs[0]["backend"]["name"])
