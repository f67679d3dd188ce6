#pragma once
// Measured memory peaks, to compare the planner with real runs (`gpugeek plan --compare-measured FILE`).
//
// A CSV file, one run per line after a header line naming the columns (any order; unknown columns are
// refused; `#` starts a comment line; no quoted fields, so no commas inside values; lists are
// ';'-separated):
//   model          config.json path (relative: to the models directory given, else to the CSV's folder)
//   task           full | pretrain | lora | qlora (inference only with measures=weights)
//   seq            tokens per sequence
//   batch          global batch in sequences (inference: concurrent sequences)
//   micro_batch    sequences per GPU per forward pass (optional; empty: the planner chooses)
//   gpu            catalog GPU the run used (e.g. H200-SXM-141GB)
//   recipe         a preset (training_memory.h RecipePreset); empty: auto
//   precision, optimizer, recompute   overrides of the preset; empty: the preset's (recompute: auto)
//   measured_bytes the measured figure in bytes (what it is: `measures`)
//   source         where the figure comes from: a URL or repo@commit path and the table or line
// Optional columns that give the run's own layout (a row with a value in any of them is estimated at
// that layout by EstimateTrainingMemory instead of planned on one GPU by the planner):
//   gpus           GPUs of the run (default 1); tp  tensor-parallel size (default 1; divides gpus)
//   zero           ZeRO stage 0-3 over gpus / tp data-parallel ranks (FSDP FULL_SHARD = 3; default 0)
//   offload        none | optimizer | optimizer+params (DeepSpeed offload_optimizer / offload_param, FSDP
//                  CPUOffload(offload_params=True) = optimizer+params)
//   framework      auto | megatron | deepspeed | hf (overrides the preset's)
//   features       ';'-separated RecipeFeatures (training_memory.h): paged-optimizer, optimizer-in-backward,
//                  chunked-loss, activation-offload, compile
//   lora_rank, lora_targets   the adapters (default 16 and all-linear; targets ';'-separated)
// And how to read the figure:
//   measures       allocated+context (default: torch.cuda.max_memory_allocated() + the CUDA context,
//                  compared with the plan's total) | allocated | active (torch's peak allocated or active
//                  bytes, compared with the total less the "runtime" term) | reserved (the caching
//                  allocator's peak reserved bytes: compared like allocated; the cache it keeps above the
//                  allocated peak is not modelled, so these rows read low) | nvidia-smi (process or device
//                  memory, compared with the total: the same unmodelled cache) | weights (vLLM's "Loading
//                  model weights took X GiB": compared with the serving plan's "weights" term)
//   expected_error a row the model is known to miss: the error it has, as a fraction (e.g. -0.25); the
//                  row is then checked against it (MeasuredWithinTolerance) rather than against zero
//   reason         why (required with expected_error)
// Required: model, task, seq, batch, gpu, measured_bytes.
//
// Errors: InvalidArgument naming the line and the column ("line 3, column seq: 'x' is not a positive
// integer"). At most kMaxMeasuredRows rows.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hw/gpu_catalog.h"
#include "workload/planner.h"

namespace gpugeek::workload {

inline constexpr size_t kMaxMeasuredRows = 10'000;

// What a measured figure counts (see the `measures` column above).
enum class Measure { kAllocatedWithContext, kAllocated, kActive, kReserved, kNvidiaSmi, kWeights };
std::string_view MeasureName(Measure m);  // "allocated+context", "allocated", ...
absl::StatusOr<Measure> ParseMeasure(std::string_view name);

struct MeasuredRun {
  int line = 0;             // in the file, 1-based
  std::string model;        // as written
  Task task;                // kind, seq, batch, recipe, LoRA
  int64_t micro_batch = 0;  // 0: the planner chooses
  std::string gpu;          // catalog name
  int gpus = 1;             // of the run
  int tp = 1;
  int zero_stage = 0;
  bool own_layout = false;  // a layout column has a value: estimated at it, not planned
  Measure measures = Measure::kAllocatedWithContext;
  double measured_bytes = 0;
  std::optional<double> expected_error;  // a documented miss (fraction)
  std::string reason;
  std::string source;
};

absl::StatusOr<std::vector<MeasuredRun>> ParseMeasuredRuns(std::string_view csv);

struct MeasuredComparison {
  uint64_t planned_bytes = 0;  // comparable with the measured figure (see `measures`)
  std::string plan;            // e.g. "1 x H200-SXM-141GB TP1 PP1 DP1 recompute=full"
  double error = 0;            // (planned - measured) / measured
  MemoryBreakdown memory;      // the plan's per-GPU terms (planned_bytes is their total, or a part: `measures`)
};
// The planner's figure for `run`: planned on one of its GPU (at its micro-batch, with no safety margin:
// the estimate, not the admission, is compared), or, for a row with its own layout, the training
// memory at that layout; serving rows (measures=weights) are planned at the row's TP over its GPUs.
// NotFound when the GPU is not in `catalog`; FailedPrecondition when no plan fits (the planner says the
// run cannot happen); InvalidArgument from the estimator (e.g. parameter offload below ZeRO-3).
absl::StatusOr<MeasuredComparison> CompareMeasured(const ModelConfig& config, const MeasuredRun& run,
                                                   const hw::GpuCatalog& catalog);

// Whether `c` is within `max_error` of what `run` expects: |error| for an ordinary row, |error −
// expected_error| for a documented miss. max_error <= 0 accepts every row.
bool MeasuredWithinTolerance(const MeasuredRun& run, const MeasuredComparison& c, double max_error);

}  // namespace gpugeek::workload
