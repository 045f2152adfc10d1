#!/usr/bin/env bash
# End-to-end demo on a fresh machine: bring up a local cluster, submit a TAO-shaped
# job through the skill's helpers, watch it to a terminal state, show its logs and record.
#   bash scripts/demo.sh              # Docker first (a job COMPLETE within minutes), then Kubernetes, then SLURM
#   bash scripts/demo.sh docker       # only one platform
#   bash scripts/demo.sh kubernetes
#   bash scripts/demo.sh slurm
# The clusters stay up afterwards (stop them with scripts/local_cluster.py down <platform>).
# The Docker job is a real container on a local Docker engine (Debian's docker.io, its own dockerd).
# The Kubernetes job runs a real container on one of the local cluster's real nodes
# (its image comes from a local registry that demands the NGC pull secret); the
# SLURM job runs its command on the host (container runtime "none").
set -euo pipefail
BANK="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export TAO_SKILL_BANK_PATH="$BANK"
platforms=("$@")
[ ${#platforms[@]} -gt 0 ] || platforms=(docker kubernetes slurm)

step() { printf '\n==> %s\n' "$*"; }

step "python dependencies"
python3 -m pip install -q --disable-pip-version-check -r "$BANK/requirements.txt"

demo_docker() (
  step "local Docker engine (first run installs Debian's docker.io: ~1 min; then seconds)"
  eval "$("$BANK/scripts/local_cluster.py" up docker)"
  step "submit a TAO-shaped training (engine check, image, record, docker run --detach as you)"
  # shellcheck disable=SC2016  # the container expands $RESULTS_DIR, not this shell
  JOB_ID=$("$BANK/scripts/tao_docker.py" submit --quiet --image "$TAO_LOCAL_DOCKER_IMAGE" --gpus 0 \
    --network-arch deformable_detr --action train --memory 256m --name "demo on docker" -- sh -c '
      for e in 0 1 2; do  # TAO counts epochs from 0 (status shows 1 of 3) and names checkpoints by epoch and step
        printf "{\"epoch\": %s, \"max_epoch\": 2, \"status\": \"RUNNING\", \"kpi\": {\"val_loss\": 0.%s}}\n" "$e" "$((9 - e))" >> "$RESULTS_DIR/status.json"
        echo "checkpoint $e" > "$RESULTS_DIR/model_epoch_00${e}_step_00${e}10.pth"; echo "epoch $e done"; sleep 1
      done
      echo "{\"status\": \"RUNNING\", \"message\": \"Train finished successfully.\"}" >> "$RESULTS_DIR/status.json"')
  echo "job id: $JOB_ID"
  step "status --watch (until a terminal state; the epoch comes from TAO's status.json)"
  "$BANK/scripts/tao_docker.py" status "$JOB_ID" --watch --interval 1
  step "logs"
  "$BANK/scripts/tao_docker.py" logs "$JOB_ID"
  step "artifacts (the best checkpoint by val_loss)"
  "$BANK/scripts/tao_docker.py" artifacts "$JOB_ID" --kpi val_loss
  step "job record"
  "$BANK/scripts/tao_job_record.py" show "$JOB_ID"
  [ "$("$BANK/scripts/tao_job_record.py" show "$JOB_ID" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = COMPLETE ]
)

demo_kubernetes() (
  step "local Kubernetes cluster (first run builds the control plane with Go: ~15 min; then seconds)"
  eval "$("$BANK/scripts/local_cluster.py" up kubernetes)"
  command -v kubectl >/dev/null 2>&1 || PATH="$(dirname "$TAO_LOCAL_K8S_KUBECTL"):$PATH"
  step "submit to a real node (capacity gate, record, pull secret, render, lint, server dry-run, apply)"
  NGC_KEY="$(cat "$TAO_LOCAL_K8S_NGC_KEY_FILE")"  # the local registry's password, never printed
  export NGC_KEY
  JOB_ID=$("$BANK/scripts/tao_k8s.py" submit --quiet \
    --image "$("$BANK/scripts/resolve_versions_key.py" images.tao_toolkit.pyt)" --ngc-pull-secret \
    --node-selector tao-skill-bank.local/real-kubelet=true \
    --network-arch deformable_detr --action train --gpus 2 --storage-tier A \
    --results-dir /results --pvc-mount "$TAO_LOCAL_K8S_PVC:/results" \
    --command 'echo training; hostname; ls -d /results; echo done')
  echo "job id: $JOB_ID"
  step "status --watch (until a terminal state)"
  "$BANK/scripts/tao_k8s.py" status "$JOB_ID" --watch --interval 2
  step "logs"
  "$BANK/scripts/tao_k8s.py" logs "$JOB_ID"
  step "job record"
  "$BANK/scripts/tao_job_record.py" show "$JOB_ID"
  [ "$("$BANK/scripts/tao_job_record.py" show "$JOB_ID" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = COMPLETE ]
)

demo_slurm() (
  step "local SLURM cluster (first run installs Debian packages: ~1 min)"
  eval "$("$BANK/scripts/local_cluster.py" up slurm)"
  spec="$(mktemp -d)/job.yaml"
  cat > "$spec" <<'SPEC'
network_arch: deformable_detr
action: train
image: nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt
command: 'echo "training on $(hostname) with GPUs ${CUDA_VISIBLE_DEVICES:-none}"; sleep 3; echo done'
num_nodes: 1
num_gpus: 1
cpus_per_task: 1
time_hours: 0.1
timeout_hours: 0.09
SPEC
  step "submit (preflight, record, stage, render, lint, sbatch over one SSH connection)"
  JOB_ID=$("$BANK/scripts/tao_slurm.py" submit --spec "$spec" --json \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
  echo "job id: $JOB_ID"
  step "status --watch (until a terminal state)"
  "$BANK/scripts/tao_slurm.py" status "$JOB_ID" --watch
  step "logs (main.out and main.err)"
  "$BANK/scripts/tao_slurm.py" logs "$JOB_ID"
  step "job record"
  "$BANK/scripts/tao_job_record.py" show "$JOB_ID"
  [ "$("$BANK/scripts/tao_job_record.py" show "$JOB_ID" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = COMPLETE ]
)

for platform in "${platforms[@]}"; do
  case "$platform" in
    docker) demo_docker ;;
    kubernetes|k8s) demo_kubernetes ;;
    slurm) demo_slurm ;;
    *) echo "error: unknown platform '$platform' (docker, kubernetes or slurm)" >&2; exit 2 ;;
  esac
done
step "tao_jobs.py list (the demo's jobs are in your own store, beside any others)"
"$BANK/scripts/tao_jobs.py" list
step "demo finished: every job reached COMPLETE"
