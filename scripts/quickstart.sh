#!/usr/bin/env bash
# The main job, end to end on the embedded default: installs the dependencies (Debian 12 packages),
# builds gpugeek, then runs it on this host.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
step build/gpugeek devices                          # real GPUs via NVML / ROCm SMI, if any
step build/gpugeek devices --emulate 8xH100-SXM-80GB  # the same view of an emulated HGX H100 board
step build/gpugeek catalog                           # the GPU models gpugeek knows
