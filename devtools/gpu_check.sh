#!/usr/bin/env bash
# The GPU-only checks, run on a GPU machine (bash devtools/gpu_check.sh; OUT=folder for the log): the NCCL probe program on a real GPU, and the Docker preflight's GPU facts.
set -u
exec > >(tee "${OUT:-.}/gpu_check.log") 2>&1
echo "== nvidia-smi"; nvidia-smi -L; nvidia-smi --query-gpu=index,uuid,name,driver_version,compute_cap,memory.total --format=csv,noheader
echo "== tools"; for t in docker podman nvidia-ctk torchrun python3; do printf '%s: %s\n' "$t" "$(command -v $t || echo missing)"; done
python3 - <<'PY'
import importlib
for m in ("torch", "yaml", "jsonschema", "jinja2"):
    try:
        mod = importlib.import_module(m); print(m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m, "missing:", type(e).__name__)
try:
    import torch; print("cuda available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count(), "nccl:", torch.cuda.nccl.version() if torch.cuda.is_available() else None)
except Exception as e:
    print("torch check failed:", e)
PY
echo "== NCCL probe program (world size 1) under torchrun"
PYTHONPATH=scripts python3 -c "from taobank.core.nccl_probe import SCRIPT; print(SCRIPT)" > /tmp/probe.py || echo "could not write the probe program from taobank.core.nccl_probe"
if python3 -c "import torch" 2>/dev/null; then
  timeout 180 python3 -m torch.distributed.run --nnodes=1 --nproc-per-node=1 /tmp/probe.py; echo "probe exit=$?"
else
  echo "probe NOT RUN: no PyTorch on this machine"
fi
echo "== tao_docker.py preflight (no engine here: the GPU lines are what matter)"
timeout 60 python3 scripts/tao_docker.py preflight 2>&1 | head -20; echo "preflight exit=${PIPESTATUS[0]}"
