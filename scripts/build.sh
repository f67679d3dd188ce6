#!/usr/bin/env bash
# Configures and builds gpugeek into build/ (Release with debug info, warnings as errors).
# Usage: scripts/build.sh [TARGET...]   (default: everything, tests and benchmarks included;
#        scripts/quickstart.sh builds only `gpugeek`, which brings gpugeek-shim with it)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DGPUGEEK_WERROR=ON >/dev/null
ninja -C build -j"$jobs" "$@"
