#!/usr/bin/env bash
# Checks gpugeek's NVML discovery against nvidia-smi on a machine with NVIDIA GPUs.
#
# Builds the `gpugeek` binary (assumes scripts/install-deps.sh ran), runs `gpugeek devices --json`,
# and compares every GPU's UUID, model name and total memory with
#   nvidia-smi --query-gpu=name,uuid,memory.total --format=csv,noheader,nounits
# It also requires each name to resolve to a catalog model (src/hw/gpu_catalog.json).
# Prints a PASS/FAIL table; exits 1 on any mismatch, 0 when all match or when the machine has no
# NVIDIA GPU (nvidia-smi absent, or it finds no device).
#
# Usage: scripts/device-check.sh            (BUILD_DIR=build by default)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "device-check: no NVIDIA GPU (nvidia-smi not found); nothing to check"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! nvidia-smi --query-gpu=name,uuid,memory.total --format=csv,noheader,nounits >"$work/smi.csv" 2>"$work/smi.err"; then
  if grep -qi "no devices were found" "$work/smi.csv" "$work/smi.err"; then
    echo "device-check: no NVIDIA GPU (nvidia-smi found no device); nothing to check"
    exit 0
  fi
  echo "device-check: nvidia-smi failed:" >&2
  cat "$work/smi.csv" "$work/smi.err" >&2
  exit 1
fi

echo "== building gpugeek in $build_dir"
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$build_dir" -G Ninja -DGPUGEEK_BENCH=OFF >/dev/null
ninja -C "$build_dir" -j"$jobs" gpugeek >/dev/null

echo "== gpugeek devices"
"$build_dir/gpugeek" devices
"$build_dir/gpugeek" devices --json >"$work/gpugeek.json"

python3 - "$work/smi.csv" "$work/gpugeek.json" <<'PY'
import csv, json, sys

smi_rows = [[c.strip() for c in row] for row in csv.reader(open(sys.argv[1])) if row]
inv = json.load(open(sys.argv[2]))
ours = {g["uuid"]: g for g in inv["gpus"] if g["vendor"] == "nvidia"}
checks = []  # (gpu, check, want, got, ok)

def check(gpu, what, want, got, ok):
    checks.append((gpu, what, str(want), str(got), ok))

check("-", "GPU count", len(smi_rows), len(ours), len(smi_rows) == len(ours))
nvml_problems = [p for p in inv["problems"] if p.startswith("nvml:")]
check("-", "NVML problems", "none", "; ".join(nvml_problems) or "none", not nvml_problems)
for i, (name, uuid, mem_mib) in enumerate(smi_rows):
    g = ours.get(uuid)
    check(i, "UUID", uuid, g["uuid"] if g else "missing", g is not None)
    if g is None:
        continue
    check(i, "model name", name, g["name"], g["name"] == name)
    check(i, "catalog model", "a catalog id", g["model_id"] or "unknown (add it to src/hw/gpu_catalog.json)",
          bool(g["model_id"]))
    ours_mib = g["memory_total_bytes"] / 2**20
    check(i, "memory MiB", mem_mib, f"{ours_mib:.0f}", abs(ours_mib - float(mem_mib)) <= 1)

width = [max(len(str(c[k])) for c in checks + [("GPU", "CHECK", "NVIDIA-SMI", "GPUGEEK", True)]) for k in range(4)]
header = ("GPU", "CHECK", "NVIDIA-SMI", "GPUGEEK")
print("\n== device check")
print("  ".join(h.ljust(w) for h, w in zip(header, width)) + "  RESULT")
for c in checks:
    print("  ".join(str(v).ljust(w) for v, w in zip(c[:4], width)) + ("  PASS" if c[4] else "  FAIL"))
failed = sum(1 for c in checks if not c[4])
print(f"\n{len(checks) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
