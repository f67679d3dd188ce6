#!/usr/bin/env bash
# Configures and builds gpugeek into build/ (Release with debug info, warnings as errors).
# Usage: scripts/build.sh [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DGPUGEEK_WERROR=ON "$@" >/dev/null
ninja -C build -j"$jobs"
