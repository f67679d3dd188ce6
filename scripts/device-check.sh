#!/usr/bin/env bash
# Checks gpugeek on a machine with NVIDIA GPUs, in three parts, and keeps what it saw in OUT_DIR:
#
# 1. NVML discovery: `gpugeek devices --json` against
#      nvidia-smi --query-gpu=name,uuid,memory.total --format=csv,noheader,nounits
#    (every GPU's UUID, model name and total memory; each name must resolve to a catalog model,
#    src/hw/gpu_catalog.json). A mismatch fails the check.
# 2. The real memory of planned jobs: for each row of PLANS below, `gpugeek plan --json` on one GPU of the
#    discovered model, then scripts/device-check/planned_memory.py trains that plan's step (its micro-batch,
#    sequence, recompute and recipe) on GPU 0 with random weights and prints planned against measured bytes
#    (torch.cuda peak allocated and reserved, plus the CUDA context). Reported, not failed: these are the
#    planner's calibration points (docs/planner.md). Needs transformers and peft beside torch; skipped
#    without them.
# 3. The GPT example on CUDA: examples/gpt/train.py, the same seed and steps on --device cuda and
#    --device cpu; the final validation losses must agree within 1% (float32 on both), and each run's
#    tokens per second is printed.
# Exits 1 on a failed check, 0 when all pass or when the machine has no NVIDIA GPU (nvidia-smi absent, or
# it finds no device).
#
# Usage: scripts/device-check.sh [OUT_DIR]      (default: a new temporary folder, printed)
#   BUILD_DIR=build    where gpugeek is built when GPUGEEK_BIN is not given
#   GPUGEEK_BIN=FILE   a gpugeek binary to use instead of building one
#   PYTHON=python3     the Python that has torch (and transformers + peft for part 2)
#   PARTS=123          which parts to run (e.g. PARTS=3 reruns the GPT check alone)
#   GPUGEEK_SHARED_DIR=../shared   where the model configs of part 2 are (models/...)
#   PLANS_FILE=FILE    part 2's rows from FILE instead of PLANS below
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

out=${1:-$(mktemp -d)}
mkdir -p "$out"
py=${PYTHON:-python3}
exec > >(tee "$out/device-check.log") 2>&1
echo "device-check: output in $out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
failed=0

if [[ -n ${GPUGEEK_BIN:-} ]]; then
  gpugeek=$GPUGEEK_BIN
else
  echo "== building gpugeek in $build_dir"
  cmake -S . -B "$build_dir" -G Ninja -DGPUGEEK_BENCH=OFF >/dev/null
  ninja -C "$build_dir" -j"$(nproc 2>/dev/null || echo 2)" gpugeek >/dev/null
  gpugeek=$build_dir/gpugeek
fi

echo "== 1. NVML discovery: gpugeek devices against nvidia-smi"
if "$gpugeek" devices && "$gpugeek" devices --json >"$work/gpugeek.json"; then
  cp "$work/gpugeek.json" "$out/devices.json"
  "$py" scripts/device-check/nvml_check.py "$work/smi.csv" "$work/gpugeek.json" || failed=1
else
  echo "FAIL: gpugeek devices did not run"
  echo '{"gpus": []}' >"$work/gpugeek.json"
  failed=1
fi

echo
parts=${PARTS:-123}
echo "== 2. The real memory of planned jobs (GPU 0)"
shared=${GPUGEEK_SHARED_DIR:-../shared}
# model config (../shared/models or any config.json) : task : seq : global batch : recipes to measure at the
# plan's micro-batch (plan = the plan's own recipe; amp, pure_bf16, fp32 = others; +full = forced recompute)
# : more `gpugeek plan` flags, space-separated. PLANS_FILE=FILE takes the rows from FILE instead, one a line.
# The first 12 rows calibrated the Hugging Face recipe (src/workload/training_memory.h); the other 7 were
# first measured after it was written.
PLANS=(
  "$shared/models/qwen/Qwen2-0.5B-Instruct.json:full:4096:8:plan:--framework hf"
  "$shared/models/llama/Llama-3.2-1B-Instruct.json:full:2048:8:plan:--framework hf"
  "$shared/models/llama/Llama-3.2-1B-Instruct.json:full:2048:8:plan:--recipe hf"
  "$shared/models/llama/Llama-3.2-1B-Instruct.json:full:2048:8:plan:--framework hf --precision bf16 --recompute none"
  "$shared/models/llama/Llama-3.2-1B-Instruct.json:full:2048:8:plan:--recipe torchtune"
  "$shared/models/gpt2/gpt2-xl.json:full:1024:8:plan:--framework hf"
  "$shared/models/qwen/Qwen2.5-3B.json:full:2048:4:plan:--framework hf"
  "$shared/models/qwen/Qwen2.5-3B.json:full:2048:4:plan:--recipe hf"
  "$shared/models/llama/Meta-Llama-3.1-8B.json:lora:2048:4:plan:--recipe peft --recompute none"
  "$shared/models/llama/Meta-Llama-3.1-8B.json:lora:2048:4:plan:--recipe peft --recompute full"
  "$shared/models/qwen/Qwen3-8B.json:lora:4096:1:plan:--recipe peft --recompute none"
  "$shared/models/llama/Meta-Llama-3.1-8B.json:full:2048:4:plan:--framework hf --recompute full"
  "$shared/models/qwen/Qwen2.5-7B.json:lora:4096:1:plan:--recipe peft"
  "$shared/models/llama/Llama-3.2-3B.json:full:4096:2:plan:--recipe torchtune"
  "$shared/models/qwen/Qwen3-4B.json:full:2048:4:plan:--recipe hf"
  "$shared/models/mistral/Mistral-7B-v0.1.json:full:2048:4:plan:--recipe torchtune"
  "$shared/models/gemma/gemma-2-2b-it.json:full:2048:4:plan:--recipe hf"
  "$shared/models/qwen/Qwen2-1.5B-Instruct.json:full:4096:2:plan:--framework hf"
  "$shared/models/phi/Phi-3.5-mini-instruct.json:lora:4096:2:plan:--recipe peft --recompute full"
)
if [[ -n ${PLANS_FILE:-} ]]; then mapfile -t PLANS < <(sed "s|\$shared|$shared|g" "$PLANS_FILE"); fi
gpu_model=$("$py" -c 'import json,sys; g=[g for g in json.load(open(sys.argv[1]))["gpus"] if g["model_id"]]; print(g[0]["model_id"] if g else "")' "$work/gpugeek.json")
if [[ $parts != *2* ]]; then
  echo "skipped: PARTS=$parts"
elif [[ -z $gpu_model ]]; then
  echo "skipped: GPU 0 is not a catalog model"
elif ! "$py" -c 'import transformers, peft' 2>/dev/null; then
  echo "skipped: $py has no transformers and peft"
else
  : >"$out/planned_memory.jsonl"
  for row in "${PLANS[@]}"; do
    IFS=: read -r config task seq batch recipes flags <<<"$row"
    if [[ ! -f $config ]]; then echo "skipped: no $config"; continue; fi
    name=$(basename "$config" .json)
    plan=$work/$name-$task-$seq-${flags// /_}.json
    # shellcheck disable=SC2086 # flags are words
    if ! "$gpugeek" plan "$config" --task "$task" --seq "$seq" --batch "$batch" --gpus "$gpu_model:1" --top 1 \
      $flags --json >"$plan" 2>"$work/plan.err"; then
      echo "$name $task seq $seq: no plan: $(cat "$work/plan.err")"
      continue
    fi
    for recipe in ${recipes//,/ }; do
      recompute=plan
      [[ $recipe == *+full ]] && recompute=full
      echo "-- $name $task seq $seq batch $batch recipe $recipe $flags"
      "$py" scripts/device-check/planned_memory.py --config "$config" --plan "$plan" --recipe "${recipe%+full}" \
        --recompute "$recompute" >>"$out/planned_memory.jsonl" || echo "   (no measurement: exit $?)"
    done
  done
  "$py" - "$out/planned_memory.jsonl" <<'PY'
import json, os, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
gib = lambda b: f"{b / 2**30:.2f}"
head = ("MODEL", "TASK", "FRAMEWORK", "RAN", "SEQ", "MB", "RECOMPUTE", "PLANNED_GiB", "MEASURED_GiB", "ERR",
        "RESERVED_GiB", "CONTEXT_GiB", "S/STEP")
table = [head]
for r in rows:  # the plan's figure is compared only with a run of the plan's own recipe and recompute
    same = r["recipe"] == "plan" and r["recompute"] == r["plan_recompute"] and not r["oom"]
    measured = r["max_allocated"] + r["context"]  # live tensors at the peak + CUDA context
    table.append((os.path.basename(r["config"])[:-5], r["task"], r.get("plan_recipe", {}).get("framework", "auto"),
                  r.get("ran", r["recipe"]), r["seq"], r["micro_batch"], r["recompute"],
                  gib(r["planned_bytes"]) if same else "-", "OOM" if r["oom"] else gib(measured),
                  f"{100 * (r['planned_bytes'] - measured) / measured:+.1f}%" if same else "-",
                  gib(r["max_reserved"] + r["context"]), gib(r["context"]), f"{r['seconds_per_step']:.2f}"))
width = [max(len(str(t[k])) for t in table) for k in range(len(head))]
for t in table:
    print("  ".join(str(v).ljust(w) for v, w in zip(t, width)))
PY
fi

echo
echo "== 3. The GPT example on CUDA against the CPU (same seed and steps)"
[[ $parts == *3* ]] || { echo "skipped: PARTS=$parts"; exit "$failed"; }
gpt_args=(--steps 200 --batch-size 16 --seq-len 128 --eval-windows 64 --log-every 50 --ckpt-every 1000)
for dev in cuda cpu; do
  echo "-- --device $dev"
  "$py" examples/gpt/train.py --device "$dev" --out "$work/gpt-$dev" "${gpt_args[@]}" 2>&1 | tee "$work/gpt-$dev.log" ||
    failed=1
done
"$py" - "$work/gpt-cuda/summary.json" "$work/gpt-cpu/summary.json" <<'PY' || failed=1
import json, sys
cuda, cpu = (json.load(open(p)) for p in sys.argv[1:3])
rel = abs(cuda["val_loss"] - cpu["val_loss"]) / cpu["val_loss"]
ok = rel <= 0.01 and cuda["steps"] == cpu["steps"]
print(f"val_loss cuda {cuda['val_loss']:.4f} cpu {cpu['val_loss']:.4f}: {100 * rel:.2f}% apart "
      f"(<= 1% to pass): {'PASS' if ok else 'FAIL'}; wall cuda {cuda['wall_seconds_this_attempt']} s, "
      f"cpu {cpu['wall_seconds_this_attempt']} s")
sys.exit(0 if ok else 1)
PY
cp "$work"/gpt-*.log "$out/" 2>/dev/null || true

echo
if ((failed)); then echo "device-check: FAILED"; else echo "device-check: PASSED"; fi
exit "$failed"
