#!/usr/bin/env python3
"""Compares `gpugeek devices --json` with nvidia-smi's CSV; prints a PASS/FAIL table, exit 1 on a mismatch.

Usage: nvml_check.py SMI.csv GPUGEEK.json
  SMI.csv: nvidia-smi --query-gpu=name,uuid,memory.total --format=csv,noheader,nounits
"""
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
