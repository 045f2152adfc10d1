#!/usr/bin/env bash
# Set up a fresh machine and run the whole test suite against real local clusters.
#   bash scripts/test.sh [pytest args...]
# Installs the Python dependencies and the pinned agent CLIs (npm), brings up the
# local Kubernetes cluster (control plane, real kubelet nodes with containerd,
# CoreDNS, registry, S3, kwok nodes; apt packages and Go builds cached by version)
# and the local SLURM cluster, runs pytest, and stops the clusters it started. A
# cluster that cannot start fails the run: it is never skipped.
set -euo pipefail
BANK="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$BANK"

step() { printf '\n==> %s\n' "$*"; }

step "python dependencies"
python3 -m pip install -q --disable-pip-version-check -r requirements-dev.txt

# tests/clients drive the real Claude Code and Codex CLIs: the versions pinned in
# versions.yaml (agent_clients), installed once under ~/.cache/tao-skill-bank/npm/.
step "agent CLIs from npm"
python3 -m devtools.agent_clients install

started=()
cleanup() {
  for platform in "${started[@]}"; do
    python3 scripts/local_cluster.py down "$platform" || true
  done
}
trap cleanup EXIT

for platform in slurm kubernetes; do
  if python3 scripts/local_cluster.py status "$platform" >/dev/null 2>&1; then
    step "local $platform cluster already running: reusing it"
  else
    step "local $platform cluster: up"
    SECONDS=0
    python3 scripts/local_cluster.py up "$platform" >/dev/null
    started+=("$platform")
    echo "local $platform cluster ready in ${SECONDS}s"
  fi
done

# The skills call kubectl from PATH; a machine without one uses the client
# built with the local control plane (same version as the server).
if ! command -v kubectl >/dev/null 2>&1; then
  eval "$(python3 scripts/local_cluster.py env kubernetes)"
  PATH="$(dirname "$TAO_LOCAL_K8S_KUBECTL"):$PATH"
  export PATH
  echo "kubectl not on PATH: using $TAO_LOCAL_K8S_KUBECTL"
fi

step "pytest"
python3 -m pytest "$@"
