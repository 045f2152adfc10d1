#!/usr/bin/env bash
# Check, and with explicit consent install, the NVIDIA runtime a TAO GPU node needs:
# driver branch, CUDA level the driver supports, NVIDIA Container Toolkit.
#
#   setup-nvidia-gpu-host.sh --backend kubernetes|slurm --check-only
#   setup-nvidia-gpu-host.sh --backend kubernetes|slurm --install         (print the plan only)
#   setup-nvidia-gpu-host.sh --backend kubernetes|slurm --install --yes   (run it; root, apt hosts)
#
# Minimums come from versions.yaml (gpu_host.*) through resolve_versions_key.py.
# Exit: 0 ready / installed, 1 something MISSING or a step failed, 2 bad usage.
set -euo pipefail

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
die_usage() { echo "error: $1 (see --help)" >&2; exit 2; }

BACKEND="" MODE="" YES=0
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) [ $# -ge 2 ] || die_usage "--backend needs kubernetes or slurm"; BACKEND="$2"; shift 2 ;;
    --backend=*) BACKEND="${1#*=}"; shift ;;
    --check-only) MODE="check"; shift ;;
    --install) MODE="install"; shift ;;
    --yes) YES=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die_usage "unknown argument '$1'" ;;
  esac
done
case "$BACKEND" in kubernetes|slurm) ;; *) die_usage "--backend must be kubernetes or slurm" ;; esac
[ -n "$MODE" ] || die_usage "choose --check-only or --install"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BANK="${TAO_SKILL_BANK_PATH:-$SCRIPT_DIR/../../..}"
RESOLVE="$BANK/scripts/resolve_versions_key.py"
pin() {
  "$RESOLVE" "$1" || { echo "error: cannot read versions key $1 with $RESOLVE: set TAO_SKILL_BANK_PATH to the bank" >&2; exit 1; }
}
MIN_DRIVER="$(pin gpu_host.driver_branch)"
MIN_CUDA="$(pin gpu_host.cuda)"
MIN_CTK="$(pin gpu_host.nvidia_container_toolkit)"

# ver_ge A B: version A >= version B (numeric fields, sort -V).
ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | sed -n 1p)" = "$2" ]; }

missing=0
ok() { echo "OK: $*"; }
miss() { echo "MISSING: $*"; missing=1; }

check_driver_and_cuda() {
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    miss "NVIDIA driver: nvidia-smi not on PATH (need driver branch >= $MIN_DRIVER, CUDA >= $MIN_CUDA)"
    return
  fi
  local driver cuda
  # Capture whole outputs first: with pipefail, "| head" can SIGPIPE the writer (8-GPU nodes).
  driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null)" || driver=""
  driver="$(printf '%s\n' "$driver" | sed -n '1{s/[[:space:]]//g;p;}')"
  if [ -z "$driver" ]; then
    miss "NVIDIA driver: nvidia-smi found no GPU or no driver (need branch >= $MIN_DRIVER)"
  elif ver_ge "${driver%%.*}" "$MIN_DRIVER"; then
    ok "NVIDIA driver $driver (branch >= $MIN_DRIVER)"
  else
    miss "NVIDIA driver $driver is older than branch $MIN_DRIVER"
  fi
  cuda="$(nvidia-smi 2>/dev/null)" || cuda=""
  cuda="$(printf '%s\n' "$cuda" | sed -n 's/.*CUDA Version: *\([0-9][0-9.]*\).*/\1/p' | sed -n 1p)"
  if [ -z "$cuda" ]; then
    miss "CUDA: nvidia-smi reports no CUDA version (need >= $MIN_CUDA)"
  elif ver_ge "$cuda" "$MIN_CUDA"; then
    ok "CUDA $cuda supported by the driver (>= $MIN_CUDA)"
  else
    miss "CUDA $cuda supported by the driver is older than $MIN_CUDA"
  fi
}

check_toolkit() {
  if ! command -v nvidia-ctk >/dev/null 2>&1; then
    miss "NVIDIA Container Toolkit: nvidia-ctk not on PATH (need >= $MIN_CTK)"
    return
  fi
  local ctk
  ctk="$(nvidia-ctk --version 2>/dev/null)" || ctk=""
  ctk="$(printf '%s\n' "$ctk" | sed -n 's/.*[Vv]ersion *\([0-9][0-9.]*\).*/\1/p' | sed -n 1p)"
  if [ -z "$ctk" ]; then
    miss "NVIDIA Container Toolkit: cannot read a version from 'nvidia-ctk --version' (need >= $MIN_CTK)"
  elif ver_ge "$ctk" "$MIN_CTK"; then
    ok "NVIDIA Container Toolkit $ctk (>= $MIN_CTK)"
  else
    miss "NVIDIA Container Toolkit $ctk is older than $MIN_CTK"
  fi
}

check_backend() {
  # SLURM runs TAO through Pyxis/Enroot; Kubernetes through the node's container runtime.
  if [ "$BACKEND" = "slurm" ]; then
    if command -v enroot >/dev/null 2>&1; then ok "enroot $(enroot version 2>/dev/null || echo present)"
    else miss "enroot not on PATH (Pyxis needs it on every compute node)"; fi
  fi
}

if [ "$MODE" = "check" ]; then
  check_driver_and_cuda
  check_toolkit
  check_backend
  if [ "$missing" -ne 0 ]; then
    echo "NOT READY: GPU host runtime for $BACKEND; fix the MISSING lines (after approval: $0 --backend $BACKEND --install --yes)"
    exit 1
  fi
  echo "READY: GPU host runtime for $BACKEND"
  exit 0
fi

# --install: Debian/Ubuntu hosts only; print the plan, run it only with --yes.
command -v apt-get >/dev/null 2>&1 || { echo "error: apt-get not found: install driver $MIN_DRIVER and NVIDIA Container Toolkit $MIN_CTK with your distribution's NVIDIA packages" >&2; exit 1; }
# shellcheck source=/dev/null
. /etc/os-release
DISTRO="${ID}${VERSION_ID//./}"
ARCH="$(uname -m)"; [ "$ARCH" = "aarch64" ] && ARCH="sbsa"
CUDA_REPO="https://developer.download.nvidia.com/compute/cuda/repos/$DISTRO/$ARCH"
CTK_LIST="https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list"
CTK_KEY="https://nvidia.github.io/libnvidia-container/gpgkey"
KEYRING="/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
STEPS=(
  "curl -fsSLo /tmp/cuda-keyring.deb $CUDA_REPO/cuda-keyring_1.1-1_all.deb && dpkg -i /tmp/cuda-keyring.deb"
  "curl -fsSL $CTK_KEY | gpg --dearmor --yes -o $KEYRING"
  "curl -fsSL $CTK_LIST | sed 's#deb https://#deb [signed-by=$KEYRING] https://#g' > /etc/apt/sources.list.d/nvidia-container-toolkit.list"
  "apt-get update"
  "apt-get install -y cuda-drivers-$MIN_DRIVER"
  "apt-get install -y nvidia-container-toolkit=$MIN_CTK-1 nvidia-container-toolkit-base=$MIN_CTK-1 libnvidia-container-tools=$MIN_CTK-1 libnvidia-container1=$MIN_CTK-1"
)
if [ "$BACKEND" = "kubernetes" ]; then
  STEPS+=("nvidia-ctk runtime configure --runtime=containerd && systemctl restart containerd")
fi

echo "Plan for $BACKEND on $DISTRO/$ARCH (driver branch $MIN_DRIVER, toolkit $MIN_CTK):"
for s in "${STEPS[@]}"; do echo "  $s"; done
echo "A new driver needs a reboot before nvidia-smi sees it."
if [ "$YES" -ne 1 ]; then
  echo "NOT RUN: re-run with --install --yes after the host owner approves these steps"
  exit 1
fi
[ "$(id -u)" -eq 0 ] || { echo "error: --install --yes must run as root (sudo)" >&2; exit 1; }
for s in "${STEPS[@]}"; do
  echo "+ $s"
  bash -c "$s" || { echo "error: step failed: $s" >&2; exit 1; }
done
echo "DONE: reboot if the driver changed, then run: $0 --backend $BACKEND --check-only"
